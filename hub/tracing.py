"""OpenTelemetry for the hub (SPEC §6): a span per request, exporter chosen by `OTEL_*`.

Nothing is traced unless the operator asks: tracing switches on when
`OTEL_TRACES_EXPORTER` names `otlp` or `console`, or when it is unset and an OTLP endpoint
(`OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is configured. The
exporter then reads the rest of its standard variables itself. Incoming W3C `traceparent`
headers (the agent propagates its reconcile span) become the parents of the request spans,
through OpenTelemetry's default propagator.

The provider is built by the CLI and handed to `create_app`, so tests and embedders
decide for themselves, and no global tracer provider is installed behind anyone's back.
Probe and scrape routes are not traced: they would drown the interesting spans.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fastapi import FastAPI
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

SERVICE_NAME = "mcsync-hub"
UNTRACED_URLS = "/healthz,/readyz,/metrics"


def tracer_provider_from_env(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """A provider exporting as `OTEL_*` says, or None when tracing is not configured."""
    env = os.environ if environ is None else environ
    exporter_name = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if exporter_name == "" and endpoint:
        exporter_name = "otlp"
    exporter: SpanExporter
    if exporter_name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    elif exporter_name == "console":
        exporter = ConsoleSpanExporter()
    else:
        return None
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def instrument(app: FastAPI, *, tracer_provider: TracerProvider) -> None:
    """Open a server span for each request of `app`."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=tracer_provider, excluded_urls=UNTRACED_URLS
    )
