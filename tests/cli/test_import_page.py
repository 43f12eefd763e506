"""`mcsync describe import NS/NAME`: where the Service is imported and, where not, why —
only what the hub can know (one row per case), and the page against a real hub."""

from __future__ import annotations

import pytest

from cli.importpage import NO, UNKNOWN, YES, YES_UNCHECKED, page, where_imported
from shared.models import EndpointSliceExport, MemberCluster, MemberClusterSpec
from tests.cli.conftest import RunningHub, ok, run_cli
from tests.cli.samples import NOW, ago, cluster, service_import
from tests.cli.test_cli_e2e import BASE, put_export


def scoped(name: str, namespaces: list[str]) -> MemberCluster:
    member = cluster(name, heartbeat=ago(seconds=3), imports=(0, 0))
    member.spec = MemberClusterSpec(import_namespaces=namespaces)
    return member


@pytest.mark.parametrize(("member", "expected"), [
    (cluster("east", heartbeat=ago(seconds=3), imports=(4, 8)),
     ("east", YES_UNCHECKED, "Ready, following the import feed; it exports the Service too")),
    (cluster("north", heartbeat=ago(seconds=3), imports=(0, 0)),
     ("north", YES_UNCHECKED, "Ready, following the import feed")),
    (cluster("west", state="Stale", heartbeat=ago(minutes=4), imports=(4, 8)),
     ("west", UNKNOWN, "Stale: no heartbeat for 4m; its agent does not follow the feed, and "
                       "what it last wrote stays as it was")),
    (cluster("south", state="Pending", agent_version=None),
     ("south", NO, "Pending: its agent has never sent a heartbeat, so it follows no import "
                   "feed")),
    (cluster("quiet", heartbeat=ago(seconds=3)),
     ("quiet", NO, "its agent reports no imports (started with --no-import, or too old to "
                   "import)")),
    (scoped("shop", ["team-*", "billing"]),
     ("shop", NO, "its scope imports only namespaces team-*, billing, not demo (`mcsync "
                  "clusters set-scope shop` changes it)")),
    (scoped("team", ["de*"]), ("team", YES_UNCHECKED, "Ready, following the import feed")),
    (scoped("none", []), ("none", NO, "its scope imports only namespaces none, not demo "
                                      "(`mcsync clusters set-scope none` changes it)")),
], ids=["exporter", "ready", "stale", "pending", "no-import", "out-of-scope", "in-scope-glob",
        "empty-scope"])
def test_where_imported(member: MemberCluster, expected: tuple[str, str, str]) -> None:
    item = service_import(clusters=["east"])
    assert where_imported(item, [member], now=NOW) == [expected]


def test_where_the_agent_reported_its_namespaces_the_answer_is_plain() -> None:
    """docs/reference.md#scope-and-limits: an agent's report of the namespaces it holds
    turns `yes*` into "yes" where the namespace is there and "no" where it is absent."""
    item = service_import(clusters=["east"])
    members = [cluster(n, heartbeat=ago(seconds=3), imports=(0, 0))
               for n in ("east", "north", "south")]
    rows = where_imported(item, members, now=NOW,
                          namespace_present={"east": True, "north": False})
    assert rows[0] == ("east", YES, "Ready, following the import feed; namespace demo is "
                                    "there; it exports the Service too")
    assert rows[1][:2] == ("north", NO)
    assert rows[1][2].startswith("namespace absent: its agent reports no namespace demo")
    assert rows[2] == ("south", YES_UNCHECKED, "Ready, following the import feed")
    text = page(item, members, now=NOW, rows=rows[:2])
    assert "namespace absent" in text
    assert "* when namespace demo exists" not in text  # nothing left unchecked
    assert "* when namespace demo exists" in page(item, members, now=NOW, rows=rows)


def test_the_page_qualifies_yes_with_what_the_hub_cannot_see() -> None:
    text = page(service_import(clusters=["east"]),
                [cluster("east", heartbeat=ago(seconds=3), imports=(1, 2))], now=NOW)
    assert "Imported in:" in text
    assert "* when namespace demo exists in that cluster" in text
    assert "kubectl get serviceimport web -n demo -o yaml" in text
    assert "(no cluster is registered)" in page(service_import(), [], now=NOW)


@pytest.mark.e2e
def test_describe_import_against_a_hub(hub: RunningHub) -> None:
    tokens = {}
    for name in ("ip-east", "ip-west"):
        answer = hub.call("POST", "/api/v1/clusters", token=hub.admin_token,
                          body={"metadata": {"name": name}})
        assert answer.status_code == 201, answer.text
        tokens[name] = answer.json()["token"]
    beat = hub.call("POST", "/api/v1/clusters/ip-east/heartbeat", token=tokens["ip-east"],
                    body={"agentVersion": "0.1.0", "importedServices": 1,
                          "importedEndpoints": 0})
    assert beat.status_code == 200, beat.text
    put_export(hub, tokens["ip-east"], "ip-east", "ip", "web", port=80, created=BASE)
    text = ok(run_cli("describe", "import", "ip/web",
                      env={"MCSYNC_HUB_URL": hub.url, "MCSYNC_TOKEN": hub.reader_token}))
    rows = {line.split()[0]: line.split()[1] for line in text.split("Imported in:")[1]
            .splitlines()[2:] if line.startswith("  ip-")}
    assert rows == {"ip-east": YES_UNCHECKED, "ip-west": NO}
    assert "Winning cluster:" in text  # the ServiceImport's own page comes first


def test_a_cluster_import_clusters_leaves_out_is_named_with_the_selector() -> None:
    """docs/reference.md#cluster-selection: the selector and the properties it judged."""
    from shared.clusterselection import ImportClustersSelector
    from shared.importreach import not_selected

    selector = ImportClustersSelector.model_validate(
        {"matchProperties": {"region.topology.mcsync.io": "eu"}})
    member = cluster("west", heartbeat=ago(seconds=3), imports=(0, 0))
    assert not_selected(None, member) is None
    assert not_selected(selector, member) == (
        'not selected by mcsync.io/import-clusters {"matchProperties":'
        '{"region.topology.mcsync.io":"eu"}}: it has reported no properties yet (the hub '
        "leaves the Service out of its import feed)")
    member.status.properties = {"region.topology.mcsync.io": "us"}
    assert "it has region.topology.mcsync.io=us (the hub" in (not_selected(selector, member) or "")
    member.status.properties = {"zone.topology.mcsync.io": "a"}
    assert "it has no region.topology.mcsync.io (the hub" in (not_selected(selector, member) or "")
    member.status.properties = {"region.topology.mcsync.io": "eu"}
    assert not_selected(selector, member) is None


def _slice(source: str, name: str, ready: list[bool | None]) -> EndpointSliceExport:
    return EndpointSliceExport.model_validate({
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {"serviceName": "web", "clusterId": source, "addressType": "IPv4",
                 "ports": [{"port": 80}],
                 "endpoints": [{"addresses": [f"192.0.2.{i + 1}"],
                                "conditions": {} if r is None else {"ready": r}}
                               for i, r in enumerate(ready)]},
    })


def _regional(name: str, region: str) -> MemberCluster:
    member = cluster(name, heartbeat=ago(seconds=3), imports=(1, 1))
    member.status.properties = {"region.topology.mcsync.io": region}
    return member


@pytest.mark.parametrize(("eu_ready", "active", "active_clusters"), [
    ([True, None], "tier 1", "eu-1"),  # eu's own endpoints serve the eu importer
    # None ready in eu: tier 2 (every region) is active, so us-1's endpoints serve.
    ([False, False], "tier 2", "eu-1,us-1"),
], ids=["eu-serves", "eu-down"])
def test_describe_import_shows_each_importers_tiers_and_active_tier(
        eu_ready: list[bool | None], active: str, active_clusters: str) -> None:
    from shared.clusterselection import ClusterSelector

    same = ClusterSelector.model_validate(
        {"propertySelector": {"matchProperties": {"region.topology.mcsync.io":
                                                  "@SameAsImporter@"}}})
    everyone = ClusterSelector.model_validate(
        {"propertySelector": {"matchExpressions": [
            {"key": "region.topology.mcsync.io", "operator": "Exists"}]}})
    item = service_import(clusters=["eu-1", "us-1"])
    item.spec.cluster_selectors = [same, everyone]
    clusters = [_regional("eu-1", "eu"), _regional("eu-2", "eu"), _regional("us-1", "us")]
    slices = [_slice("eu-1", "a", eu_ready), _slice("us-1", "b", [True])]
    text = page(item, clusters, now=NOW, slices=slices)
    section = text.split("Cluster selection (fallback AllClusters, minReadyEndpoints 1, "
                         "minReadyPercent 0, failbackDelaySeconds 30):\n")[1]
    rows = {line.split()[0]: line.split()[1:] for line in section.splitlines()[1:4]}
    assert rows["eu-2"] == ["1:", "eu-1;", "2:", "eu-1,us-1", *active.split(),
                            active_clusters]
    # The us importer's own tier is us-1 alone, which is ready either way.
    assert rows["us-1"] == ["1:", "us-1;", "2:", "eu-1,us-1", "tier", "1", "us-1"]
    assert "each agent waits failbackDelaySeconds" in section


def test_describe_import_without_selectors_has_no_selection_section() -> None:
    text = page(service_import(), [_regional("eu-1", "eu")], now=NOW)
    assert "Cluster selection" not in text
