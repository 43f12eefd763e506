"""Tracing (SPEC §6): a server span per request, parented by the caller's `traceparent`;
nothing traced unless `OTEL_*` asks for it."""

from __future__ import annotations

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hub.app import create_app
from hub.store import migrate
from hub.tracing import tracer_provider_from_env
from tests.hub.test_api_support import ADMIN, settings_for

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
TRACEPARENT = f"00-{TRACE_ID:032x}-b7ad6b7169203331-01"


async def test_request_span_continues_the_callers_trace(database_url: str) -> None:
    await migrate.upgrade_async(database_url)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(settings_for(database_url), tracer_provider=provider)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://hub") as client:
            answer = await client.get(
                "/api/v1/clusters", headers={**ADMIN, "traceparent": TRACEPARENT}
            )
            assert answer.status_code == 200
            assert (await client.get("/healthz")).status_code == 200
    servers = [s for s in exporter.get_finished_spans() if s.kind.name == "SERVER"]
    assert [s.name for s in servers] == ["GET /api/v1/clusters"]  # probes are not traced
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
    assert not any("OpenTelemetry" in m.cls.__name__ for m in app.user_middleware)
    async with app.router.lifespan_context(app):
        store = context_of(app).store
        assert store is not None
        assert isinstance(store._ctx.instruments.tracer, trace.NoOpTracer)
