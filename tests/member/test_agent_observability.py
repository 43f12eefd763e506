"""End to end (docs/reference.md#observability): scrape the agents' and the hub's `/metrics` and
check the values against what the hub and the clusters say; probes; the agent's JSON log lines.

Two emulated clusters, two agent processes (`--log-format json`, no `OTEL_*` variables) and
a hub process. `web` clashes (east ClusterIP, west headless), `api` does not. Then:

* the hub's exports by verdict equal its own answers to `?conflict=true|false`;
* each agent counted exactly one export-duration sample per exported Service
  resourceVersion — and the hub's records say "counted" for exactly those;
* a change that exports a new resourceVersion adds exactly one sample; a restarted agent
  counts nothing again;
* PUTs the agents saw answered 201 are the PUTs the hub answered 201;
* the work queue is drained, the agent leads, no informer relisted;
* every log line is JSON, decision lines carry key and cluster, no line has a token, and
  with tracing off no line has a trace id.

And with tracing switched on the way an operator does it — `OTEL_EXPORTER_OTLP_ENDPOINT` in
both processes' environment — the standard OTLP exporters of a real agent process and a
real hub process deliver one trace, reconcile → hub request → conflict resolution, to an
OTLP/HTTP receiver on a loopback port.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from prometheus_client.parser import text_string_to_metric_families

from member.hubclient import ROUTE_EXPORT
from shared import conditions as c
from shared.constants import ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION
from shared.metrics import EXPORT_DURATION_METRIC
from tests.hub.test_api_support import export_body
from tests.kube.fixtures import KubeCluster, KubeClusterFactory
from tests.member import agent_support
from tests.member.agent_support import (
    AgentFactory,
    AgentProcess,
    HubProcess,
    conditions_of,
    service_body,
    service_export_body,
    wait_for,
)

pytestmark = pytest.mark.e2e

QUEUE = {"name": "serviceexport"}


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    answer = httpx.get(f"{url}/metrics", timeout=10)
    assert answer.status_code == 200
    return [
        (sample.name, dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    ]


def total(samples: list[tuple[str, dict[str, str], float]], metric: str, /, **labels: str) -> float:
    return sum(
        v for n, ls, v in samples if n == metric and all(ls.get(k) == x for k, x in labels.items())
    )


def agent_url(agent: AgentProcess) -> str:
    return f"http://127.0.0.1:{agent.metrics_port}"


def duration_count(agent: AgentProcess, cluster: str) -> float:
    return agent.metric(f"{EXPORT_DURATION_METRIC}_count", {"origin_cluster_id": cluster}) or 0.0


def counted_records(hub: HubProcess, cluster: str) -> int:
    """Records of `cluster` whose last-observed annotation names their current Service RV."""
    return sum(
        1
        for record in hub.exports(cluster)
        if (record["metadata"].get("annotations") or {}).get(
            ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION
        )
        == record["spec"]["serviceReference"]["resourceVersion"]
    )


def export(kube: KubeCluster, name: str, **spec: Any) -> None:
    kube.state.create("services", "shop", service_body(name, "shop", **spec))
    kube.state.create("serviceexports", "shop", service_export_body(name, "shop"))


def has_verdict(kube: KubeCluster, name: str) -> bool:
    return c.CONFLICT in conditions_of(kube.state.get("serviceexports", "shop", name))


def test_both_metrics_endpoints_agree_with_the_fleet(
    kube_cluster_factory: KubeClusterFactory,
    hub_process: HubProcess,
    agent_factory: AgentFactory,
) -> None:
    east_kube = kube_cluster_factory("east")
    west_kube = kube_cluster_factory("west")
    export(east_kube, "web")
    export(east_kube, "api")
    export(west_kube, "web", clusterIP="None")  # headless: a TypeConflict with east's web
    export(west_kube, "api")
    tokens = {name: hub_process.register(name) for name in ("east", "west")}
    agents = {
        name: agent_factory(
            name, kubeconfig=kube.kubeconfig, hub=hub_process, cluster_id=name,
            token=tokens[name], extra=["--log-format", "json", "--log-level", "INFO"],
        )
        for name, kube in (("east", east_kube), ("west", west_kube))
    }  # fmt: skip

    def verdicts() -> bool:
        return all(has_verdict(k, n) for k in (east_kube, west_kube) for n in ("web", "api"))

    def counted_and_settled() -> bool:
        return all(duration_count(a, n) == 2 and a.settled() for n, a in agents.items())

    wait_for(verdicts, what="a verdict on every ServiceExport")
    wait_for(counted_and_settled, what="two samples on each agent, queues drained")

    # --- the hub: exports by verdict are its own answers ----------------------------------
    def fleet(conflict: bool) -> int:
        answer = hub_process.request(
            "GET", "/api/v1/serviceexports", params={"conflict": str(conflict).lower()}
        )
        assert answer.status_code == 200
        return len(answer.json()["items"])

    hub_samples = scrape(hub_process.url)
    assert total(hub_samples, "mcsync_hub_exports", verdict="conflict") == fleet(True) == 2
    assert total(hub_samples, "mcsync_hub_exports", verdict="no_conflict") == fleet(False) == 2
    # Each write transaction that re-judged keys is one resolution; concurrent PUTs share a
    # transaction (group commit), so the four creates took between one and four of them.
    resolutions = total(hub_samples, "mcsync_hub_conflict_resolution_duration_seconds_count")
    assert 1 <= resolutions <= total(hub_samples, "mcsync_hub_write_batch_size_count")
    assert total(hub_samples, "mcsync_hub_write_batch_size_sum") >= 4
    # Three feeds per agent: its cluster's exports, the fleet's imports and the fleet's
    # cluster properties (docs/decisions.md: properties have a feed of their own).
    assert total(hub_samples, "mcsync_hub_active_watches") == 6
    assert total(hub_samples, "mcsync_hub_database_errors_total") == 0

    # --- the agents: one sample per exported resourceVersion, and the hub agrees ------------
    for name, agent in agents.items():
        assert duration_count(agent, name) == counted_records(hub_process, name) == 2
    # The PUTs the agents saw created are the ones the hub created.
    agent_samples = {name: scrape(agent_url(agent)) for name, agent in agents.items()}
    created_by_agents = sum(
        total(s, "mcsync_agent_hub_request_duration_seconds_count", method="PUT",
              route=ROUTE_EXPORT, code="201")
        for s in agent_samples.values()
    )  # fmt: skip
    assert created_by_agents == total(
        hub_samples, "mcsync_hub_request_duration_seconds_count", method="PUT",
        route=ROUTE_EXPORT, code="201",
    ) == 4  # fmt: skip
    for name, samples in agent_samples.items():
        assert total(samples, "mcsync_agent_leader") == 1
        assert total(samples, "workqueue_depth", **QUEUE) == 0
        assert total(samples, "workqueue_adds_total", **QUEUE) >= 2
        assert total(samples, "workqueue_queue_duration_seconds_count", **QUEUE) >= 2
        assert total(samples, "workqueue_work_duration_seconds_count", **QUEUE) >= 2
        assert total(samples, "mcsync_workqueue_drops_total", **QUEUE) == 0
        # Each reconcile that exported made exactly one successful PUT of an export (the
        # agent also PUTs its cluster's properties, on a route of their own).
        puts = sum(
            v for n, ls, v in samples
            if n == "mcsync_agent_hub_request_duration_seconds_count" and ls["method"] == "PUT"
            and ls["code"].startswith("2")
            and ls["route"].endswith("/serviceexports/{namespace}/{name}")
        )  # fmt: skip
        assert total(samples, "mcsync_agent_reconciles_total", outcome="exported") == puts >= 2
        assert total(samples, "mcsync_agent_reconcile_errors_total") == 0
        assert total(samples, "mcsync_agent_informer_relists_total") == 0
        informers = {
            ls["informer"] for n, ls, _ in samples if n == "mcsync_agent_informer_relists_total"
        }
        assert informers == {
            "services[*]", "serviceexports[*]", "endpointslices[*]", "hub",  # export
            "hub-imports", "serviceimports[*]", "derived-services[*]",  # import
            "mirrored-endpointslices[*]", "namespaces[*]",
            "hub-properties",  # the fleet's cluster properties, which selection reads
        }  # fmt: skip
        # Bounded labels: the only name-like label values are cluster ids (the agent's own,
        # and the source clusters of the sync-latency histogram: bounded by the fleet).
        values = {
            v for _, ls, _ in samples for k, v in ls.items()
            if k not in ("origin_cluster_id", "cluster_id", "source_cluster")
        }  # fmt: skip
        assert total(samples, "mcsync_agent_info", cluster_id=name) == 1
        assert not values & {"web", "api", "shop", "east", "west"}, name

    # --- a new resourceVersion: exactly one more sample -------------------------------------
    east_agent = agents["east"]
    service = copy.deepcopy(east_kube.state.get("services", "shop", "api"))
    assert service is not None
    service["spec"]["ports"] = [{"name": "http", "port": 8080}]
    east_kube.state.update("services", "shop", service)
    wait_for(lambda: duration_count(east_agent, "east") == 3, what="a third sample on east")
    wait_for(lambda: counted_records(hub_process, "east") == 2, what="the new RV counted")
    wait_for(lambda: east_agent.settled(), what="east settled after the change")
    assert duration_count(east_agent, "east") == 3

    # --- a restart counts nothing again (the hub remembers what was counted) ----------------
    assert east_agent.stop() == 0
    east_agent.start()
    wait_for(lambda: east_agent.settled(reconciles=2), what="east settled after restart")
    assert duration_count(east_agent, "east") == 0

    # --- probes ------------------------------------------------------------------------------
    for agent in agents.values():
        assert httpx.get(f"{agent_url(agent)}/healthz", timeout=5).status_code == 200
        assert httpx.get(f"{agent_url(agent)}/readyz", timeout=5).status_code == 200
        assert httpx.get(f"{agent_url(agent)}/nothing", timeout=5).status_code == 404
    assert httpx.get(f"{hub_process.url}/readyz", timeout=5).status_code == 200

    # --- logs: JSON, key and cluster on decisions, never a token, no trace id when off -------
    for name, agent in agents.items():
        assert agent.stop() == 0
        text = agent.logs()
        assert tokens[name] not in text
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        assert lines and len(lines) == len([line for line in text.splitlines() if line.strip()])
        decisions = [line for line in lines if "exported to the hub" in line["message"]]
        assert decisions, name
        assert all(line["cluster"] == name and line["key"] for line in decisions)
        assert not any("trace_id" in line for line in lines)
    assert not any(token in hub_process.log_path.read_text() for token in tokens.values())


# -- tracing switched on by OTEL_* in real processes ----------------------------------------


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]


class OtlpReceiver:
    """An OTLP/HTTP trace receiver on a loopback port: keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest.FromString(body)
                receiver.add(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value for a in resource_spans.resource.attributes}
            service = resource["service.name"].string_value if "service.name" in resource else ""
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {
                        a.key: getattr(a.value, a.value.WhichOneof("value") or "string_value")
                        for a in span.attributes
                    }
                    with self._lock:
                        self.spans.append(
                            ReceivedSpan(
                                service=service,
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                attributes=attributes,
                            )
                        )

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """A receiver, and every process the agent fixtures start told to export to it."""
    receiver = OtlpReceiver()
    plain_env = agent_support._env

    def traced_env(**extra: str) -> dict[str, str]:
        # Only the endpoint: the exporter (otlp) follows from it, as docs/reference.md#observability
        # says.
        return plain_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, **extra)

    monkeypatch.setattr(agent_support, "_env", traced_env)
    try:
        yield receiver
    finally:
        receiver.stop()


def test_otel_variables_switch_on_one_trace_across_real_processes(
    otlp: OtlpReceiver,
    kube_cluster: KubeCluster,
    agent_factory: AgentFactory,
    tmp_path: Path,
) -> None:
    hub = HubProcess(directory=tmp_path / "traced-hub")
    hub.directory.mkdir()
    hub.start()
    try:
        west_token = hub.register("west")
        west = hub.request(
            "PUT",
            "/api/v1/clusters/west/serviceexports/shop/web",
            token=west_token,
            # Headless, and older than anything east will send: a TypeConflict for east.
            json=export_body("west", namespace="shop", name="web", type="Headless"),
        )
        assert west.status_code == 201, west.text
        agent = agent_factory(
            "east", kubeconfig=kube_cluster.kubeconfig, hub=hub, cluster_id="east",
            token=hub.register("east"),
        )  # fmt: skip
        export(kube_cluster, "web")
        wait_for(
            lambda: conditions_of(kube_cluster.state.get("serviceexports", "shop", "web")).get(
                c.CONFLICT, ("", "")
            )[0] == c.TRUE,
            what="Conflict=True on east's ServiceExport",
        )  # fmt: skip
        assert agent.stop() == 0  # SIGTERM: the agent flushes its spans on the way out
    finally:
        hub.stop()  # and so does the hub

    spans = otlp.received()
    (reconcile,) = [
        s for s in spans
        if s.name == "reconcile ServiceExport" and s.attributes.get("mcsync.outcome") == "exported"
    ]  # fmt: skip
    assert reconcile.service == "mcsync-agent"
    assert reconcile.attributes["mcsync.key"] == "shop/web"
    assert reconcile.attributes["mcsync.cluster"] == "east"
    in_trace = [s for s in spans if s.trace_id == reconcile.trace_id]
    (put,) = [s for s in in_trace if s.name == "PUT" and s.parent_span_id == reconcile.span_id]
    (server,) = [s for s in in_trace if s.parent_span_id == put.span_id]
    assert server.service == "mcsync-hub"
    assert server.name == f"PUT {ROUTE_EXPORT}"
    (resolution,) = [s for s in in_trace if s.name == "conflict resolution"]
    assert resolution.service == "mcsync-hub"
    assert resolution.attributes["mcsync.key"] == "shop/web"
    assert resolution.attributes["mcsync.export_count"] == 2
