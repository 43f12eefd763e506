"""The agent's probe and scrape port (docs/reference.md#flags): `/healthz` says the process is
alive, `/readyz` answers 503 with the reason until informers synced and the hub answers, and
`/metrics` serves the agent's own registry."""

from __future__ import annotations

import httpx
from prometheus_client import CollectorRegistry

from member.app import HealthServer
from member.metrics import AgentMetrics


def test_probes_and_scrape() -> None:
    metrics = AgentMetrics(registry=CollectorRegistry())
    metrics.leader.set(1)
    state = {"ready": (False, "informers not synced: hub")}
    server = HealthServer(
        host="127.0.0.1", port=0, registry=metrics.registry, ready=lambda: state["ready"]
    )
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
        not_ready = httpx.get(f"{base}/readyz", timeout=5)
        assert not_ready.status_code == 503
        assert not_ready.text.strip() == "informers not synced: hub"
        state["ready"] = (True, "ok")
        assert httpx.get(f"{base}/readyz", timeout=5).status_code == 200
        scrape = httpx.get(f"{base}/metrics", timeout=5)
        assert scrape.status_code == 200
        assert scrape.headers["content-type"].startswith("text/plain")
        assert "mcsync_agent_leader 1.0" in scrape.text
        assert "# TYPE mcsync_service_export_duration_milliseconds histogram" in scrape.text
        # No `*_created` timestamps beside the counters and histograms.
        assert "_created" not in scrape.text
        head = httpx.head(f"{base}/metrics", timeout=5)
        assert head.status_code == 200
        assert head.headers["content-type"] == scrape.headers["content-type"]
        assert head.content == b""
        assert httpx.get(f"{base}/nothing", timeout=5).status_code == 404
    finally:
        server.stop()


def test_every_known_error_retry_and_drop_series_exists_at_zero_from_start() -> None:
    """docs/reference.md#observability: the first error, retry or drop must be an increase that
    `rate()`, `increase()` and an `increase(...) > 0` alert can see, so each series the agent knows
    of is scraped at 0 before anything happens."""
    from member.hubclient import CALLS, EXPECTED_ERROR_CODES, HubClient, HubClientConfig
    from member.workqueue import WorkQueue, WorkQueueMetrics

    metrics = AgentMetrics(registry=CollectorRegistry())
    queue_metrics = WorkQueueMetrics(registry=metrics.registry)
    WorkQueue(name="serviceexport", metrics=queue_metrics)
    HubClient(
        HubClientConfig(base_url="http://127.0.0.1:9", cluster_id="east", token="t"),
        metrics=metrics.hub,
    ).close()
    registry = metrics.registry

    def zero(name: str, labels: dict[str, str]) -> bool:
        return registry.get_sample_value(name, labels) == 0.0

    for series in ("workqueue_retries_total", "mcsync_workqueue_drops_total",
                   "workqueue_adds_total", "workqueue_depth"):
        assert zero(series, {"name": "serviceexport"}), series
    for method, route in CALLS:
        for code in EXPECTED_ERROR_CODES:
            labels = {"method": method, "route": route, "code": code}
            assert zero("mcsync_agent_hub_request_errors_total", labels), labels
