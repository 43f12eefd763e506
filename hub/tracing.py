"""OpenTelemetry for the hub (docs/reference.md#observability): a span per request, exporter chosen
by `OTEL_*`.

Nothing is traced unless the operator asks (`shared.tracing` reads the variables the same
way for hub and agent). Incoming W3C `traceparent` headers (the agent propagates its
reconcile span) become the parents of the request spans, through OpenTelemetry's default
propagator; the store's conflict-resolution spans (`hub.store.writer`) are children of the
request span, through the provider handed to the store by `create_app`.

The provider is built by the CLI and handed to `create_app`, so tests and embedders
decide for themselves, and no global tracer provider is installed behind anyone's back.
Probe and scrape routes are not traced: they would drown the interesting spans. Nor are
the ASGI middleware's `http send` / `http receive` spans: three per request and one per
watch event, each saying only that bytes moved.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI
from opentelemetry.sdk.trace import TracerProvider

from shared import tracing

SERVICE_NAME = "mcsync-hub"
UNTRACED_URLS = "/healthz,/readyz,/metrics"


def tracer_provider_from_env(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """A provider exporting as `OTEL_*` says, or None when tracing is not configured."""
    return tracing.tracer_provider_from_env(service_name=SERVICE_NAME, environ=environ)


def instrument(app: FastAPI, *, tracer_provider: TracerProvider) -> None:
    """Open a server span for each request of `app`."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=tracer_provider,
        excluded_urls=UNTRACED_URLS,
        exclude_spans=["receive", "send"],
    )
