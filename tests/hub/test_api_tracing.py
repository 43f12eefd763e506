"""Tracing (docs/reference.md#observability): a server span per request, parented by the caller's
`traceparent`, and each conflict resolution a span under its request; nothing traced (and no
middleware installed) unless `OTEL_*` asks for it."""

from __future__ import annotations

from hub.app import create_app
from hub.store import migrate
from hub.tracing import tracer_provider_from_env
from tests.hub.test_api_support import ADMIN, at, running_hub, settings_for, traced

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
TRACEPARENT = f"00-{TRACE_ID:032x}-b7ad6b7169203331-01"


async def test_request_span_continues_the_callers_trace(database_url: str) -> None:
    provider, exporter = traced()
    async with running_hub(database_url, tracer_provider=provider) as hub:
        answer = await hub.client.get(
            "/api/v1/clusters", headers={**ADMIN, "traceparent": TRACEPARENT}
        )
        assert answer.status_code == 200
        assert (await hub.client.get("/healthz")).status_code == 200
    servers = [s for s in exporter.get_finished_spans() if s.kind.name == "SERVER"]
    assert [s.name for s in servers] == ["GET /api/v1/clusters"]  # probes are not traced
    # No ASGI `http send` / `http receive` spans: they only say that bytes moved.
    assert [s.name for s in exporter.get_finished_spans()] == ["GET /api/v1/clusters"]
    assert servers[0].context.trace_id == TRACE_ID
    assert "Bearer" not in str(dict(servers[0].attributes or {}))


def test_tracing_is_off_unless_otel_variables_ask() -> None:
    assert tracer_provider_from_env({}) is None
    assert tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "none"}) is None
    for env in (
        {"OTEL_TRACES_EXPORTER": "console"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
    ):
        provider = tracer_provider_from_env(env)
        assert provider is not None, env
        provider.shutdown()


async def test_without_a_provider_nothing_is_instrumented(database_url: str) -> None:
    from opentelemetry import trace

    from hub.api.deps import context_of

    await migrate.upgrade_async(database_url)
    app = create_app(settings_for(database_url))
    assert not any("OpenTelemetry" in getattr(m.cls, "__name__", "") for m in app.user_middleware)
    async with app.router.lifespan_context(app):
        store = context_of(app).store
        assert store is not None
        assert isinstance(store._ctx.instruments.tracer, trace.NoOpTracer)


async def test_each_conflict_resolution_is_a_span_under_its_request(database_url: str) -> None:
    provider, exporter = traced()
    async with running_hub(database_url, tracer_provider=provider) as hub:
        members = await hub.register("east", "west")
        assert (await hub.put("east", members["east"], created=at(0))).status_code == 201
        exporter.clear()
        answer = await hub.put("west", members["west"], created=at(1), type="Headless")
        assert answer.status_code == 201
        scraped = (await hub.client.get("/metrics")).text
    spans = exporter.get_finished_spans()
    (server,) = [s for s in spans if s.kind.name == "SERVER"]
    (resolution,) = [s for s in spans if s.name == "conflict resolution"]
    assert resolution.context.trace_id == server.context.trace_id
    # The resolution sits under the request (through the ASGI middleware's own spans).
    by_id = {s.context.span_id: s for s in spans}
    parent = resolution.parent
    chain = []
    while parent is not None and parent.span_id in by_id:
        chain.append(by_id[parent.span_id])
        parent = by_id[parent.span_id].parent
    assert server in chain
    attributes = dict(resolution.attributes or {})
    assert attributes["mcsync.key"] == "demo/web"
    assert attributes["mcsync.export_count"] == 2
    assert attributes["mcsync.conflict"] is True
    assert attributes["mcsync.reasons"] == "TypeConflict"
    assert "mcsync_hub_conflict_resolution_duration_seconds_count 2.0" in scraped
    provider.shutdown()
