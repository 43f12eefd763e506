"""`mcsync describe conflict NS/NAME` against a real hub: each disputed property with every
cluster's value, the ports each cluster lacks or had left out, and what to change."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from shared.models import ExportConflictList, to_wire
from tests.cli.conftest import RunningHub, ok, run_cli
from tests.cli.test_cli_e2e import BASE, export_body

pytestmark = pytest.mark.e2e
NS = "dc"


def export(hub: RunningHub, token: str, cluster: str, name: str, *, port: int, hours: int,
           **spec: Any) -> None:
    body = export_body(cluster, NS, name, port=port, created=BASE + timedelta(hours=hours))
    body["spec"].update(spec)
    answer = hub.call("PUT", f"/api/v1/clusters/{cluster}/serviceexports/{NS}/{name}",
                      token=token, body=body)
    assert answer.status_code in (200, 201), answer.text


@pytest.fixture(scope="module")
def disputed(hub: RunningHub) -> RunningHub:
    tokens = {}
    for cluster in ("dc-east", "dc-north", "dc-west"):
        answer = hub.call("POST", "/api/v1/clusters", token=hub.admin_token,
                          body={"metadata": {"name": cluster}})
        assert answer.status_code == 201, answer.text
        tokens[cluster] = answer.json()["token"]
    export(hub, tokens["dc-east"], "dc-east", "cart", port=80, hours=0)
    export(hub, tokens["dc-north"], "dc-north", "cart", port=80, hours=1)
    export(hub, tokens["dc-west"], "dc-west", "cart", port=8080, hours=2, type="Headless",
           exportedLabels={"tier": "web"})
    export(hub, tokens["dc-east"], "dc-east", "calm", port=80, hours=0)
    return hub


def describe(hub: RunningHub, *args: str) -> Any:
    return run_cli("describe", "conflict", *args,
                   env={"MCSYNC_HUB_URL": hub.url, "MCSYNC_TOKEN": hub.reader_token})


def test_each_disputed_property_shows_every_cluster_and_what_to_change(
        disputed: RunningHub) -> None:
    page = ok(describe(disputed, f"{NS}/cart"))
    assert "Winner:     dc-east, the oldest export" in page
    assert "Conflicts:  LabelsConflict, PortConflict, TypeConflict" in page
    type_section = page.split("\ntype (TypeConflict)")[1].split("\n\n")[0]
    rows = [line.split() for line in type_section.splitlines()[2:5]]
    assert rows == [["dc-east", "ClusterSetIP", "winner,", "decides"],
                    ["dc-north", "ClusterSetIP", "agrees"],
                    ["dc-west", "Headless", "differs"]]
    # spec.clusterIP is immutable: the hint recreates the Service instead of an edit the
    # API server would refuse.
    assert ("To settle it: recreate the Service in dc-west (delete it, then create it again) "
            "as the winner's ClusterSetIP: the Service's spec.clusterIP (None makes it "
            "Headless, anything else ClusterSetIP) cannot be changed on an existing Service"
            ) in " ".join(type_section.split())
    labels = page.split("\nexportedLabels (LabelsConflict)")[1].split("\n\n")[0]
    assert '{"tier":"web"}' in labels and "the ServiceExport's spec.exportedLabels" in labels
    ports = page.split("\nports (PortConflict)")[1]
    west = next(line.split(None, 1)[1] for line in ports.splitlines()
                if line.strip().startswith("dc-west"))
    assert west.split() == ["http:8080/TCP", "http:80/TCP", "http:8080/TCP"]  # missing, left out
    assert "now differing: dc-west" in ports


def test_a_key_without_conflict_says_so(disputed: RunningHub) -> None:
    page = ok(describe(disputed, "calm", "-n", NS))
    assert f"{NS}/calm is not in conflict" in page


def test_json_is_the_hubs_conflict_list_and_a_missing_key_is_the_hubs_404(
        disputed: RunningHub) -> None:
    listing = ExportConflictList.model_validate_json(ok(describe(disputed, f"{NS}/cart",
                                                                 "-o", "json")))
    assert {(c.cluster, p.field) for c in listing.items for p in c.properties} == {
        ("dc-west", "type"), ("dc-west", "exportedLabels")}
    assert to_wire(listing)["kind"] == "ExportConflictList"
    missing = describe(disputed, f"{NS}/nope")
    assert missing.returncode == 1 and missing.stderr.startswith("error: ")
    assert describe(disputed, f"{NS}/cart", "-o", "name").returncode == 2


def test_cluster_selection_shows_both_values_and_the_annotations_to_change(
        hub: RunningHub) -> None:
    tokens = {}
    for cluster in ("cs-east", "cs-west"):
        answer = hub.call("POST", "/api/v1/clusters", token=hub.admin_token,
                          body={"metadata": {"name": cluster}})
        assert answer.status_code == 201, answer.text
        tokens[cluster] = answer.json()["token"]
    eu = {"propertySelector": {"matchProperties": {"region": "eu"}}}
    export(hub, tokens["cs-east"], "cs-east", "pick", port=80, hours=0, clusterSelectors=[eu])
    export(hub, tokens["cs-west"], "cs-west", "pick", port=80, hours=1,
           clusterSelectors=[eu], clusterSelection={"fallback": "None"})
    page = ok(describe(hub, f"{NS}/pick"))
    assert "Conflicts:  ClusterSelectorsConflict" in page
    section = page.split("\nclusterSelectors (ClusterSelectorsConflict)")[1]
    rows = {line.split()[0]: line for line in section.splitlines()[2:4]}
    winner = '{"clusterSelectors":[{"propertySelector":{"matchExpressions":[],' \
        '"matchProperties":{"region":"eu"}}}]}'
    assert winner in rows["cs-east"] and "winner, decides" in rows["cs-east"]
    assert '"fallback":"None"' in rows["cs-west"] and "differs" in rows["cs-west"]
    assert ("the ServiceExport's annotations mcsync.io/cluster-selectors, "
            "mcsync.io/cluster-selection and mcsync.io/import-clusters in cs-west") in section
