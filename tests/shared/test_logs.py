"""The log format both programs write (`shared.logs`) and the OTEL_* switch
(`shared.tracing`): fields, trace ids, token redaction, tracing off by default."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider

from shared.logs import (
    JsonFormatter,
    RedactBearer,
    TextFormatter,
    TraceContext,
    configure_logging,
    fields,
)
from shared.tracing import exporter_names, tracer_provider_from_env

TOKEN = "s3cr3t-member-token-0123456789"


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    logger = logging.getLogger("test.shared.logs")
    made = logger.makeRecord(
        logger.name, logging.INFO, __file__, 1, message, args, None, extra=extra
    )
    for flt in (RedactBearer(), TraceContext()):
        flt.filter(made)
    return made


def test_json_lines_carry_plain_extras_and_fields() -> None:
    line = json.loads(
        JsonFormatter().format(
            record("shop/web: exported", key="shop/web", **fields(cluster="east", name="web"))
        )
    )
    assert line["message"] == "shop/web: exported"
    assert line["level"] == "info"
    assert line["logger"] == "test.shared.logs"
    assert (line["key"], line["cluster"], line["name"]) == ("shop/web", "east", "web")
    assert "trace_id" not in line  # no span is active


def test_text_lines_append_fields_and_quote_what_needs_it() -> None:
    text = TextFormatter().format(record("decided", key="shop/web", why="two words"))
    assert text.endswith('decided key=shop/web why="two words"')


def test_uvicorns_colour_copy_of_the_message_is_not_a_field() -> None:
    made = record("Started server process [%d]", 42,
                  color_message="Started server process [\x1b[36m%d\x1b[0m]")
    assert TextFormatter().format(made).endswith("Started server process [42]")
    assert "color_message" not in json.loads(JsonFormatter().format(made))


def test_a_line_made_inside_a_span_carries_its_trace_id() -> None:
    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("reconcile") as span:
        made = record("inside")
        context = span.get_span_context()
    line = json.loads(JsonFormatter().format(made))
    assert line["trace_id"] == format(context.trace_id, "032x")
    assert line["span_id"] == format(context.span_id, "016x")
    assert f"trace_id={line['trace_id']}" in TextFormatter().format(made)


def test_bearer_tokens_are_masked_in_messages_arguments_fields_and_tracebacks() -> None:
    made = record("sent Authorization: Bearer %s", TOKEN, header=f"Bearer {TOKEN}")
    try:
        raise RuntimeError(f"hub refused 'Bearer {TOKEN}'")
    except RuntimeError:
        made.exc_info = sys.exc_info()
    for formatter in (JsonFormatter(), TextFormatter()):
        text = formatter.format(made)
        assert TOKEN not in text
        assert "Bearer ***" in text


def test_configure_logging_installs_one_handler_with_both_filters() -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    noisy = logging.getLogger("test.noisy")
    try:
        handler = configure_logging(log_format="json", level="debug", quiet=["test.noisy"])
        assert root.handlers == [handler]
        assert root.level == logging.DEBUG
        assert isinstance(handler.formatter, JsonFormatter)
        assert {type(f) for f in handler.filters} == {RedactBearer, TraceContext}
        assert noisy.level == logging.WARNING
        text = configure_logging(log_format="text")
        assert isinstance(text.formatter, TextFormatter)
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        noisy.setLevel(logging.NOTSET)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, []),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, []),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": " OTLP "}, ["otlp_proto_http"]),
        # A list, as the specification allows: every exporter named, in order, once.
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ["otlp_proto_http", "console"]),
        ({"OTEL_TRACES_EXPORTER": "console, console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "zipkin_json"}, ["zipkin_json"]),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            ["otlp_proto_grpc"],
        ),
        (
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            ["otlp_proto_http"],
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ["otlp_proto_http"]),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"},
            ["otlp_proto_http"],
        ),
    ],
)
def test_the_exporters_are_chosen_by_the_standard_variables(
    environ: dict[str, str], expected: list[str]
) -> None:
    assert exporter_names(environ) == expected


def test_a_list_of_exporters_runs_each_of_them() -> None:
    provider = tracer_provider_from_env(
        service_name="mcsync-hub",
        environ={"OTEL_TRACES_EXPORTER": "otlp,console"},
    )
    assert provider is not None
    try:
        processors = provider._active_span_processor._span_processors
        kinds = {type(p.span_exporter).__name__ for p in processors}  # type: ignore[attr-defined]
        assert kinds == {"OTLPSpanExporter", "ConsoleSpanExporter"}
    finally:
        provider.shutdown()


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "'zipkin'"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "proto_grpc"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "udp"}, "udp"),
    ],
)
def test_an_exporter_that_cannot_run_is_a_warning_not_silence(
    environ: dict[str, str], named: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mcsync.tracing"):
        provider = tracer_provider_from_env(service_name="mcsync-hub", environ=environ)
    assert provider is None
    assert any(named in record.getMessage() for record in caplog.records), caplog.text


def test_a_provider_only_when_asked_named_after_the_program() -> None:
    assert tracer_provider_from_env(service_name="mcsync-agent", environ={}) is None
    provider = tracer_provider_from_env(
        service_name="mcsync-agent", environ={"OTEL_TRACES_EXPORTER": "console"}
    )
    assert provider is not None
    try:
        assert provider.resource.attributes["service.name"] == "mcsync-agent"
    finally:
        provider.shutdown()
