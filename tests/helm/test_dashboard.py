"""The Grafana dashboard (helm/mcsync-hub/dashboards/mcsync-overview.json): every query
names a metric one of the programs exposes, and the hub chart ships it on request."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.helm.conftest import HUB_CHART, render
from tests.helm.test_hub_chart import SCENARIOS
from tests.shared.test_metrics import exposed_families

DASHBOARD = HUB_CHART / "dashboards" / "mcsync-overview.json"
_METRIC_RE = re.compile(r"\b((?:mcsync|mcs|workqueue)_[a-z_]+)\b")
_SUFFIXES = ("_bucket", "_count", "_sum")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def queries() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def test_every_query_names_an_exposed_metric() -> None:
    families = exposed_families()
    used = {m for expr in queries() for m in _METRIC_RE.findall(expr)}
    unknown = []
    for name in used:
        base = next((name.removesuffix(s) for s in _SUFFIXES if name.endswith(s)), name)
        if name not in families and families.get(base) != "histogram":
            unknown.append(name)
    assert unknown == []
    # The three subjects are all on it.
    subjects = {
        "mcsync_service_export_duration_milliseconds_bucket",
        "mcsync_hub_exports",
        "workqueue_depth",
        "workqueue_retries_total",
        "mcsync_workqueue_drops_total",
        # The end-to-end sync latency (docs/reference.md#observability).
        "mcs_endpointslice_sync_latency_seconds_bucket",
    }
    assert subjects <= used


def test_panels_are_well_formed() -> None:
    board = dashboard()
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for p in board["panels"]:
        grid = p["gridPos"]
        assert grid["x"] + grid["w"] <= 24, p["title"]
        for target in p.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", p["title"]
    names = {v["name"] for v in board["templating"]["list"]}
    assert names == {"datasource", "cluster"}


def test_the_chart_ships_the_dashboard_only_when_asked() -> None:
    base = SCENARIOS["sqlite"]
    names = [c["metadata"]["name"] for c in render(HUB_CHART, base).of_kind("ConfigMap")]
    assert not any(name.endswith("-dashboard") for name in names)
    rendered = render(HUB_CHART, {**base, "metrics": {"grafanaDashboard": {"enabled": True}}})
    config_map = rendered.one("ConfigMap", "mc-mcsync-hub-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["mcsync-overview.json"]) == dashboard()


def test_every_agent_panel_follows_the_cluster_picker() -> None:
    """Agent series carry no cluster label: each agent query joins them with
    `mcsync_agent_info{cluster_id=~"$cluster"}` on (job, instance), so picking a cluster
    filters every agent panel, not only the export-duration ones."""
    agent = re.compile(
        r"\b(?:mcsync_agent_(?!info\b)[a-z_]+|(?:mcsync_)?workqueue_[a-z_]+"
        r"|mcs_endpointslice_[a-z_]+)\b"
    )
    join = 'on (job, instance) group_left () mcsync_agent_info{cluster_id=~"$cluster"}'
    agent_queries = [q for q in queries() if agent.search(q)]
    assert len(agent_queries) >= 10
    for query in agent_queries:
        assert join in query, query
        # Every agent metric in the query is joined, not only the first.
        assert query.count(join) == len(agent.findall(query)), query
