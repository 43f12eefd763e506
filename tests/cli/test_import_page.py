"""`mcsync describe import NS/NAME`: where the Service is imported and, where not, why —
only what the hub can know (one row per case), and the page against a real hub."""

from __future__ import annotations

import pytest

from cli.importpage import NO, UNKNOWN, YES, page, where_imported
from shared.models import MemberCluster, MemberClusterSpec
from tests.cli.conftest import RunningHub, ok, run_cli
from tests.cli.samples import NOW, ago, cluster, service_import
from tests.cli.test_cli_e2e import BASE, put_export


def scoped(name: str, namespaces: list[str]) -> MemberCluster:
    member = cluster(name, heartbeat=ago(seconds=3), imports=(0, 0))
    member.spec = MemberClusterSpec(import_namespaces=namespaces)
    return member


@pytest.mark.parametrize(("member", "expected"), [
    (cluster("east", heartbeat=ago(seconds=3), imports=(4, 8)),
     ("east", YES, "Ready, following the import feed; it exports the Service too")),
    (cluster("north", heartbeat=ago(seconds=3), imports=(0, 0)),
     ("north", YES, "Ready, following the import feed")),
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
    (scoped("team", ["de*"]), ("team", YES, "Ready, following the import feed")),
    (scoped("none", []), ("none", NO, "its scope imports only namespaces none, not demo "
                                      "(`mcsync clusters set-scope none` changes it)")),
], ids=["exporter", "ready", "stale", "pending", "no-import", "out-of-scope", "in-scope-glob",
        "empty-scope"])
def test_where_imported(member: MemberCluster, expected: tuple[str, str, str]) -> None:
    item = service_import(clusters=["east"])
    assert where_imported(item, [member], now=NOW) == [expected]


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
    assert rows == {"ip-east": YES, "ip-west": NO}
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
