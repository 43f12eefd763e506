"""Which span exporter a process uses, decided once from the standard `OTEL_*` variables.

Both programs trace the same way (SPEC §6): nothing is traced and nothing is exported unless
the operator asks. Tracing switches on when `OTEL_TRACES_EXPORTER` names `otlp` or
`console`, or when it is unset and an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` /
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is configured; `none` or nothing leaves it off. The
OTLP exporter (HTTP/protobuf) then reads the rest of its standard variables itself
(headers, timeout, certificate), and the SDK reads `OTEL_SERVICE_NAME`,
`OTEL_RESOURCE_ATTRIBUTES` and `OTEL_TRACES_SAMPLER*`.

When tracing is off there is no provider at all: OpenTelemetry's API hands out
non-recording spans, which cost a context-variable switch and nothing else, and no
`traceparent` is sent because no span context is valid.

The caller decides what to do with the provider (the hub hands it to `create_app`, the
agent to `Agent`); nothing here installs a global.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

__all__ = ["exporter_name", "tracer_provider_from_env"]


def exporter_name(environ: Mapping[str, str]) -> str | None:
    """`otlp`, `console`, or None (tracing off) for these environment variables."""
    name = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if name == "" and endpoint:
        name = "otlp"
    return name if name in ("otlp", "console") else None


def tracer_provider_from_env(
    *, service_name: str, environ: Mapping[str, str] | None = None
) -> TracerProvider | None:
    """A provider exporting as `OTEL_*` says (batching, off the caller's thread), or None."""
    env = os.environ if environ is None else environ
    name = exporter_name(env)
    exporter: SpanExporter
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    elif name == "console":
        exporter = ConsoleSpanExporter()
    else:
        return None
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
