"""Rendering of the CLI, from shared-model instances and a fixed `now` (no hub, no clock)."""

from __future__ import annotations

import json

import pytest
import yaml

from cli import render
from cli.cmd import clusters, conflicts, exports, imports
from shared.models import (
    InternalServiceExport,
    InternalServiceExportList,
    MemberClusterList,
    ServiceImport,
    ServiceImportList,
)
from tests.cli.samples import NOW, ago, cluster, export, port, service_import


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        # apimachinery's duration.HumanDuration, which `kubectl get` prints as AGE.
        ({"seconds": 0}, "0s"),
        ({"seconds": 45}, "45s"),
        ({"seconds": 59.9}, "59s"),
        ({"seconds": 119}, "119s"),
        ({"seconds": 120}, "2m"),
        ({"minutes": 3, "seconds": 12}, "3m12s"),
        ({"minutes": 9, "seconds": 59}, "9m59s"),
        ({"minutes": 10, "seconds": 30}, "10m"),
        ({"minutes": 179}, "179m"),
        ({"hours": 3}, "3h"),
        ({"hours": 5}, "5h"),
        ({"hours": 5, "minutes": 4}, "5h4m"),
        ({"hours": 8, "minutes": 30}, "8h"),
        ({"hours": 47}, "47h"),
        ({"days": 2, "hours": 3}, "2d3h"),
        ({"days": 4}, "4d"),
        ({"days": 7, "hours": 23}, "7d23h"),
        ({"days": 8, "hours": 5}, "8d"),
        ({"days": 120}, "120d"),
        ({"days": 729}, "729d"),
        ({"days": 800}, "2y70d"),
        ({"days": 365 * 3}, "3y"),
        ({"days": 365 * 9 + 100}, "9y"),
        ({"seconds": -1}, "0s"),  # clocks of hub and operator a little apart
        ({"seconds": -30}, "<invalid>"),  # kubectl's word for a moment in the future
    ],
)
def test_age_is_what_kubectl_prints(delta: dict[str, float], expected: str) -> None:
    assert render.age(ago(**delta), now=NOW) == expected


def test_age_of_nothing_is_none_marker() -> None:
    assert render.age(None, now=NOW) == "<none>"


def test_ports_format() -> None:
    assert render.ports([port(80, "http"), port(443, "https")]) == "80/TCP,443/TCP"
    assert render.ports([port(53, "dns", "UDP")]) == "53/UDP"
    assert render.ports([]) == "<none>"


def test_names_truncates_like_kubectl_endpoints() -> None:
    assert render.names(["a", "b"]) == "a,b"
    assert render.names(["a", "b", "c", "d", "e"]) == "a,b,c + 2 more..."
    assert render.names([]) == "<none>"


def test_format_table_aligns_columns_with_three_spaces() -> None:
    table = render.Table(("NAME", "X"), (("a", "long-value"), ("longer-name", "b")))
    assert render.format_table(table) == (
        "NAME          X\n"
        "a             long-value\n"
        "longer-name   b\n"
    )


def test_clusters_table() -> None:
    items = [
        cluster("east", heartbeat=ago(seconds=5), exports=2, conflicts=1, created=ago(days=4),
                imports=(12, 340)),
        cluster("west-long", state="Stale", heartbeat=ago(hours=2), exports=1,
                created=ago(minutes=3), imports=(0, 0)),
        cluster("new", state="Pending", heartbeat=None, created=ago(seconds=10)),
    ]
    text = render.format_table(clusters.table(items, now=NOW))
    # IMPORTED-SVC/EP: ServiceImports/endpoints the agent's heartbeat reported; <none>
    # before any. One word per cell: the table splits on white space.
    assert text.splitlines() == [
        "NAME        STATE     LAST-HEARTBEAT   EXPORTS   CONFLICTS   IMPORTED-SVC/EP   AGE",
        "east        Ready     5s               2         1           12/340            4d",
        "west-long   Stale     120m             1         0           0/0               3m",
        "new         Pending   <none>           0         0           <none>            10s",
    ]


def test_clusters_wide_adds_agent_version_and_sorted_labels() -> None:
    items = [cluster("east", labels={"zone": "a", "env": "prod"}, agent_version="0.1.0")]
    table = clusters.table(items, now=NOW, wide=True)
    assert table.headers[-2:] == ("AGENT-VERSION", "LABELS")
    assert table.rows[0][-2:] == ("0.1.0", "env=prod,zone=a")
    width = len(clusters.HEADERS)
    assert table.headers[:width] == clusters.HEADERS  # wide appends, never reorders


def test_exports_table() -> None:
    items = [
        export(cluster="east", ports=[port(80, "http"), port(443, "https")],
               conflict=("True", "PortConflict"), created=ago(minutes=3)),
        export(cluster="west", namespace="shop", name="cart", created=ago(days=4),
               conflict=None),
    ]
    lines = render.format_table(exports.table(items, now=NOW)).splitlines()
    assert lines == [
        "NAMESPACE   NAME   CLUSTER   TYPE           PORTS            CONFLICT   REASON"
        "         AGE",
        "demo        web    east      ClusterSetIP   80/TCP,443/TCP   True       PortConflict"
        "   3m",
        "shop        cart   west      ClusterSetIP   80/TCP           <none>     <none>"
        "         4d",
    ]


def test_exports_wide_columns() -> None:
    item = export(resource_version="42", cluster_state="Stale", created=ago(minutes=1))
    table = exports.table([item], now=NOW, wide=True)
    assert table.headers == (*exports.HEADERS, "CLUSTER-STATE", "CREATED",
                             "RESOURCE-VERSION")
    assert table.rows[0][-3:] == ("Stale", "2026-11-22T11:59:00.000Z", "42")


def test_imports_table() -> None:
    items = [
        service_import(clusters=["east", "west"], conflicts=["PortConflict", "TypeConflict"],
                       winner="east", created=ago(hours=2)),
        service_import(name="api", clusters=["a", "b", "c", "d"], created=ago(days=1)),
    ]
    lines = render.format_table(imports.table(items, now=NOW)).splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "TYPE", "PORTS", "CLUSTERS",
                                "CONFLICTS", "AGE"]
    assert "east,west" in lines[1] and "PortConflict,TypeConflict" in lines[1]
    assert lines[1].endswith("120m")  # kubectl: minutes up to 3 hours
    assert "a,b,c + 1 more..." in lines[2] and lines[2].endswith("24h")
    wide = imports.table(items, now=NOW, wide=True)
    assert wide.rows[0][-3:] == ("east", "9", "<none>")  # no selectors: no ACTIVE


def test_conflict_views_join_imports_and_exports() -> None:
    imports = [
        service_import(clusters=["east", "west", "north"], winner="east",
                       conflicts=["PortConflict"]),
        service_import(name="calm", clusters=["east"]),  # no conflict: not shown
    ]
    exports = [
        export(cluster="west", conflict=("True", "PortConflict"), conflict_since=ago(minutes=5)),
        export(cluster="east", conflict=("True", "PortConflict"), conflict_since=ago(minutes=9)),
        export(cluster="north", conflict=("True", "PortConflict"), conflict_since=ago(minutes=1)),
        export(name="other", conflict=("True", "TypeConflict"), conflict_since=ago(days=9)),
    ]
    views = render.conflict_views(imports, exports)
    assert len(views) == 1
    view = views[0]
    assert (view.namespace, view.name, view.winner) == ("demo", "web", "east")
    assert view.losing_clusters == ("west", "north")
    assert view.since == ago(minutes=9)
    lines = render.format_table(conflicts.table(views, now=NOW)).splitlines()
    assert lines == [
        "NAMESPACE   NAME   WINNER   REASONS        LOSING-CLUSTERS   SINCE",
        "demo        web    east     PortConflict   west,north        9m",
    ]


def test_conflict_views_fall_back_to_precedence_order_without_a_winner() -> None:
    imports = [service_import(clusters=[], winner=None, conflicts=["TypeConflict"])]
    exports = [
        export(cluster="b", created=ago(hours=1), conflict=("True", "TypeConflict")),
        export(cluster="a", created=ago(hours=1), conflict=("True", "TypeConflict")),
        export(cluster="c", created=ago(hours=2), conflict=("True", "TypeConflict")),
    ]
    (view,) = render.conflict_views(imports, exports)
    assert view.winner == "c"  # oldest exportCreationTimestamp
    assert view.losing_clusters == ("a", "b")  # ties broken by clusterId


def test_describe_export_names_the_facts() -> None:
    item = export(ports=[port(80, "http"), port(443, "https")],
                  conflict=("True", "PortConflict"), conflict_since=ago(minutes=2))
    text = render.describe_export(item, now=NOW)
    assert "Name:" in text and "web" in text
    assert "Cluster:" in text and "east (Ready)" in text
    assert "http 80/TCP, https 443/TCP" in text
    assert "Conflict   True     PortConflict   2m" in text


def test_describe_import_lists_clusters_and_ports() -> None:
    text = render.describe_import(
        service_import(winner="east", conflicts=["PortConflict"]), now=NOW
    )
    assert "Winning cluster:" in text and "east" in text
    assert "east      Ready" in text
    assert "80/TCP   east,west" in text


def test_json_and_yaml_round_trip_to_the_same_objects() -> None:
    exports = InternalServiceExportList(
        items=[export(conflict=("True", "PortConflict")), export(cluster="west")]
    )
    imports = ServiceImportList(items=[service_import(winner="east", conflicts=["PortConflict"])])
    clusters = MemberClusterList(items=[cluster("east", heartbeat=ago(seconds=1),
                                                labels={"env": "prod"})])
    for obj in (exports, imports, clusters):
        kind = type(obj)
        assert kind.model_validate(json.loads(render.to_json(obj))) == obj
        assert kind.model_validate(json.loads(render.to_json_line(obj))) == obj
        assert kind.model_validate(yaml.safe_load(render.to_yaml(obj))) == obj
    single = export()
    assert InternalServiceExport.model_validate_json(render.to_json(single)) == single
    imp = service_import()
    assert ServiceImport.model_validate(yaml.safe_load(render.to_yaml(imp))) == imp


def test_yaml_keeps_timestamps_and_versions_as_strings() -> None:
    data = yaml.safe_load(render.to_yaml(export(resource_version="12")))
    assert data["metadata"]["resourceVersion"] == "12"
    assert isinstance(data["metadata"]["creationTimestamp"], str)
    assert data["spec"]["serviceReference"]["clusterId"] == "east"  # camelCase on the wire


def test_empty_listing_prints_only_the_message_on_stderr() -> None:
    out, err = render.listing_output(exports.table([], now=NOW))
    assert (out, err) == ("", "No resources found.\n")
    out, err = render.listing_output(clusters.table([cluster("east")], now=NOW))
    assert out.startswith("NAME") and err == ""
