"""One trace from the agent's reconcile to the hub's conflict resolution
(docs/reference.md#observability), and the decision's log line that leads to it.

The agent runs in-process (`Agent.run` in a thread, against an emulated cluster over real
HTTP) with one in-memory span exporter; the hub runs in-process behind a real uvicorn
server on a loopback port with another. The only thing joining the two is the W3C
`traceparent` header on the wire, exactly as between two processes. The hub's database is
SQLite and PostgreSQL in turn.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from hub.app import create_app
from hub.store import migrate
from member.app import Agent
from member.export.serviceexport import OUTCOME_EXPORTED, RECONCILE_SPAN
from member.hubclient import ROUTE_EXPORT
from member.settings import AgentSettings
from shared import conditions as c
from shared.logs import JsonFormatter, RedactBearer, TraceContext
from tests.hub.test_api_support import (
    ADMIN,
    ADMIN_TOKEN,
    export_body,
    serving,
    settings_for,
    traced,
)
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import conditions_of, service_body, service_export_body

DEADLINE = 60.0
CLUSTER = "east"


class JsonLines(logging.Handler):
    """The log lines exactly as `--log-format json` writes them, kept in memory."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.setFormatter(JsonFormatter())
        self.addFilter(RedactBearer())
        self.addFilter(TraceContext())
        self.lines: list[str] = []
        self._lock_lines = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        with self._lock_lines:
            self.lines.append(line)

    def parsed(self) -> list[dict[str, Any]]:
        with self._lock_lines:
            return [json.loads(line) for line in self.lines]


@pytest.fixture
def json_lines() -> Iterator[JsonLines]:
    handler = JsonLines()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def eventually(check: Callable[[], Any], *, what: str) -> Any:
    async with asyncio.timeout(DEADLINE):
        while True:
            value = check()
            if value:
                return value
            await asyncio.sleep(0.1)
    raise AssertionError(what)  # pragma: no cover - asyncio.timeout raises first


def ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[ReadableSpan]:
    by_id = {s.context.span_id: s for s in spans}
    chain: list[ReadableSpan] = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        chain.append(by_id[parent.span_id])
        parent = by_id[parent.span_id].parent
    return chain


async def test_one_trace_from_reconcile_to_conflict_resolution(
    database_url: str, kube_cluster: KubeCluster, json_lines: JsonLines
) -> None:
    await migrate.upgrade_async(database_url)
    hub_provider, hub_spans = traced()
    agent_provider, agent_spans = traced()
    app = create_app(settings_for(database_url), tracer_provider=hub_provider)
    async with app.router.lifespan_context(app), serving(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            tokens = {}
            for cluster in (CLUSTER, "west"):
                answer = await http.post(
                    "/api/v1/clusters", json={"metadata": {"name": cluster}}, headers=ADMIN
                )
                assert answer.status_code == 201, answer.text
                tokens[cluster] = answer.json()["token"]
            # West exported shop/web first, headless: east's export will conflict with it.
            west = export_body("west", namespace="shop", name="web", type="Headless")
            answer = await http.put(
                "/api/v1/clusters/west/serviceexports/shop/web",
                json=west,
                headers={"Authorization": f"Bearer {tokens['west']}"},
            )
            assert answer.status_code == 201, answer.text

        settings = AgentSettings(
            hub_url=url,
            cluster_id=CLUSTER,
            hub_token=SecretStr(tokens[CLUSTER]),
            metrics_port=0,
            metrics_host="127.0.0.1",
            heartbeat_interval=1.0,
            workers=2,
            identity="trace-test",
        )
        agent = Agent(
            settings,
            token=tokens[CLUSTER],
            api=kube_cluster.api_client(),
            registry=CollectorRegistry(),
            tracer_provider=agent_provider,
        )
        stop = threading.Event()
        runner = threading.Thread(target=agent.run, args=(stop,), name="agent", daemon=True)
        runner.start()
        try:
            state = kube_cluster.state
            state.create("services", "shop", service_body("web", "shop"))
            state.create("serviceexports", "shop", service_export_body("web", "shop"))

            def conflict_reported() -> bool:
                obj = state.get("serviceexports", "shop", "web")
                return conditions_of(obj).get(c.CONFLICT, ("", ""))[0] == c.TRUE

            await eventually(conflict_reported, what="Conflict=True on the ServiceExport")
        finally:
            stop.set()
            await asyncio.to_thread(runner.join, 30)
        assert not runner.is_alive()

    # --- the agent's side: the reconcile that exported, and its PUT --------------------------
    agent_finished = list(agent_spans.get_finished_spans())
    reconciles = [
        s
        for s in agent_finished
        if s.name == RECONCILE_SPAN
        and (s.attributes or {}).get("mcsync.outcome") == OUTCOME_EXPORTED
    ]
    assert len(reconciles) == 1, [(s.name, dict(s.attributes or {})) for s in agent_finished]
    (reconcile,) = reconciles
    assert dict(reconcile.attributes or {}) == {
        "mcsync.key": "shop/web",
        "mcsync.cluster": CLUSTER,
        "mcsync.outcome": OUTCOME_EXPORTED,
    }
    trace_id = reconcile.context.trace_id
    puts = [
        s
        for s in agent_finished
        if s.kind.name == "CLIENT" and s.parent is not None
        and s.parent.span_id == reconcile.context.span_id
        and (s.attributes or {}).get("http.request.method", (s.attributes or {}).get("http.method"))
        == "PUT"
    ]
    assert len(puts) == 1, [(s.name, dict(s.attributes or {})) for s in agent_finished]
    (put,) = puts

    # --- the hub's side: the request span is the PUT's child, the resolution under it --------
    hub_finished = list(hub_spans.get_finished_spans())
    in_trace = [s for s in hub_finished if s.context.trace_id == trace_id]
    # (The same reconcile also PATCHes the duration annotation: another request span.)
    (server,) = [
        s
        for s in in_trace
        if s.kind.name == "SERVER"
        and s.parent is not None
        and s.parent.span_id == put.context.span_id
    ]
    assert server.parent is not None and server.parent.is_remote
    assert server.name.startswith("PUT ")
    (resolution,) = [s for s in in_trace if s.name == "conflict resolution"]
    assert server in ancestors(resolution, in_trace)
    attributes = dict(resolution.attributes or {})
    assert attributes["mcsync.key"] == "shop/web"
    assert attributes["mcsync.export_count"] == 2  # west's and east's
    assert attributes["mcsync.conflict"] is True

    # --- the decision's log line carries key, cluster and this trace id, and no token -------
    lines = json_lines.parsed()
    trace_hex = format(trace_id, "032x")
    exported = [
        line
        for line in lines
        if line.get("trace_id") == trace_hex and "exported to the hub" in line["message"]
    ]
    assert len(exported) == 1, [line for line in lines if line.get("key") == "shop/web"]
    assert exported[0]["key"] == "shop/web"
    assert exported[0]["cluster"] == CLUSTER
    hub_lines = [
        line
        for line in lines
        if line.get("trace_id") == trace_hex and line.get("logger") == "mcsync.hub.requests"
    ]
    # The hub's request lines of this reconcile: its PUT, then the duration annotation PATCH.
    assert [line["method"] for line in hub_lines] == ["PUT", "PATCH"]
    assert all(line["route"] == ROUTE_EXPORT for line in hub_lines)
    (decided,) = [
        line
        for line in lines
        if line.get("trace_id") == trace_hex and line["message"] == "export created"
    ]
    assert (decided["key"], decided["cluster"]) == ("shop/web", CLUSTER)
    assert decided["verdict"].startswith("True/")
    text = "\n".join(json_lines.lines)
    spans_text = " ".join(str(dict(s.attributes or {})) for s in (*agent_finished, *hub_finished))
    for secret in (*tokens.values(), ADMIN_TOKEN):
        assert secret not in text
        assert secret not in spans_text
    hub_provider.shutdown()
    agent_provider.shutdown()
