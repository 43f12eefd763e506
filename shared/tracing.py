"""Which span exporters a process uses, decided once from the standard `OTEL_*` variables.

Both programs trace the same way (docs/reference.md#observability): nothing is traced and nothing is
exported unless the operator asks. `OTEL_TRACES_EXPORTER` is read as the OpenTelemetry specification
and SDK read it — a comma-separated list (`otlp,console`), `none` for off — and when it is unset
an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
switches OTLP on. Each name is found, as the SDK finds it, among the installed
`opentelemetry_traces_exporter` entry points: `console`, `otlp_proto_http`, and whatever
exporter package the operator added (`zipkin_json`, `otlp_proto_grpc`, ...). `otlp` means
the protocol of `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`,
`http/protobuf` when neither is set (the specification's default; the image ships that
exporter). A name that no installed package provides, or an unknown protocol, is logged
as a warning naming the variable and the value — it used to switch tracing off without a
word — and the exporters that do exist still run.

The exporters and the SDK read the rest of their standard variables themselves (headers,
timeout, certificate, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
`OTEL_TRACES_SAMPLER*`). When tracing is off there is no provider at all: OpenTelemetry's
API hands out non-recording spans, which cost a context-variable switch and nothing else,
and no `traceparent` is sent because no span context is valid.

The caller decides what to do with the provider (the hub hands it to `create_app`, the
agent to `Agent`); nothing here installs a global (which is why this does not call the
SDK's auto-configurator, which does).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from importlib.metadata import entry_points

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

__all__ = ["exporter_names", "tracer_provider_from_env"]

log = logging.getLogger("mcsync.tracing")

ENTRY_POINT_GROUP = "opentelemetry_traces_exporter"
# OTLP protocol (the specification's values) -> the entry point of its exporter package.
OTLP_BY_PROTOCOL = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
DEFAULT_OTLP_PROTOCOL = "http/protobuf"


def _otlp_entry_point(environ: Mapping[str, str]) -> str | None:
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = environ.get(variable, "").strip()
        if protocol:
            if protocol not in OTLP_BY_PROTOCOL:
                log.warning(
                    "%s=%s is not an OTLP protocol (%s); OTLP tracing is off",
                    variable,
                    protocol,
                    ", ".join(OTLP_BY_PROTOCOL),
                )
                return None
            return OTLP_BY_PROTOCOL[protocol]
    return OTLP_BY_PROTOCOL[DEFAULT_OTLP_PROTOCOL]


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The entry-point names of the exporters these variables ask for ([] = tracing off)."""
    raw = environ.get("OTEL_TRACES_EXPORTER", "")
    names = [part.strip().lower() for part in raw.split(",") if part.strip()]
    if not names:
        endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        names = ["otlp"] if endpoint else []
    if "none" in names:
        return []
    resolved: list[str] = []
    for name in names:
        entry = _otlp_entry_point(environ) if name == "otlp" else name
        if entry is not None and entry not in resolved:
            resolved.append(entry)
    return resolved


def _load(name: str) -> type[SpanExporter] | None:
    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        installed = sorted(e.name for e in entry_points(group=ENTRY_POINT_GROUP))
        log.warning(
            "OTEL_TRACES_EXPORTER asks for %r, which no installed package provides "
            "(installed: %s); install its exporter package or remove it",
            name,
            ", ".join(installed),
        )
        return None
    exporter = next(iter(found)).load()
    if not (isinstance(exporter, type) and issubclass(exporter, SpanExporter)):
        log.warning("OTEL_TRACES_EXPORTER %r is not a span exporter; ignored", name)
        return None
    return exporter


def tracer_provider_from_env(
    *, service_name: str, environ: Mapping[str, str] | None = None
) -> TracerProvider | None:
    """A provider exporting as `OTEL_*` says (batching, off the caller's thread), or None."""
    env = os.environ if environ is None else environ
    exporters = [cls() for cls in map(_load, exporter_names(env)) if cls is not None]
    if not exporters:
        return None
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
