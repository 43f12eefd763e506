"""The export-duration contract of docs/reference.md#export-path, #observability, as the agent
exposes it."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from member.metrics import AgentMetrics
from shared.metrics import (
    EXPORT_DURATION_BUCKETS_MS,
    EXPORT_DURATION_LABEL,
    EXPORT_DURATION_METRIC,
    EXPORT_DURATION_RIGHT_BOUND_MS,
    clamp_export_duration_ms,
)

SPEC_BUCKETS = (10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000)


def test_names_buckets_and_clamps_are_the_specs() -> None:
    assert EXPORT_DURATION_METRIC == "mcsync_service_export_duration_milliseconds"
    assert EXPORT_DURATION_LABEL == "origin_cluster_id"
    assert EXPORT_DURATION_BUCKETS_MS == tuple(float(b) for b in SPEC_BUCKETS)
    assert EXPORT_DURATION_RIGHT_BOUND_MS == 100000
    assert clamp_export_duration_ms(0) == clamp_export_duration_ms(-5) == 1000
    assert clamp_export_duration_ms(1e9) == 100000
    assert clamp_export_duration_ms(42.5) == 42.5


def test_the_agent_exposes_exactly_those_buckets() -> None:
    metrics = AgentMetrics(registry=CollectorRegistry())
    metrics.export_duration.labels("east").observe(clamp_export_duration_ms(0))
    (family,) = [f for f in metrics.registry.collect() if f.name == EXPORT_DURATION_METRIC]
    buckets = [s for s in family.samples if s.name.endswith("_bucket")]
    assert [s.labels["le"] for s in buckets] == [*(f"{float(b)}" for b in SPEC_BUCKETS), "+Inf"]
    assert {s.labels[EXPORT_DURATION_LABEL] for s in buckets} == {"east"}
    # The ≤ 0 clamp lands the sample at 1000 ms: first counted in the 1000 bucket.
    counts = {s.labels["le"]: s.value for s in buckets}
    assert (counts["500.0"], counts["1000.0"], counts["+Inf"]) == (0, 1, 1)


def exposed_families() -> dict[str, str]:
    """Every metric family either program exposes: {name as exposed: type}.

    Counters are listed under their `_total` sample name, which is how queries use them.
    """
    from hub.metrics import HubMetrics
    from member.imports.importmetrics import ImportMetrics
    from member.workqueue import WorkQueueMetrics

    agent = AgentMetrics(registry=CollectorRegistry())
    WorkQueueMetrics(registry=agent.registry)
    ImportMetrics(agent)
    agent.watch_informers(lambda: [("hub", 0)])
    families: dict[str, str] = {}
    for registry in (agent.registry, HubMetrics().registry):
        for family in registry.collect():
            name = f"{family.name}_total" if family.type == "counter" else family.name
            families[name] = family.type
    return families


def test_every_metric_is_documented() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    missing = [
        name
        for name in exposed_families()
        if not name.startswith(("process_", "python_")) and f"`{name}`" not in docs
    ]
    assert missing == []
