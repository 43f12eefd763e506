"""The log format both programs write (`shared.logs`) and the OTEL_* switch
(`shared.tracing`): fields, trace ids, token redaction, tracing off by default."""

from __future__ import annotations

import json
import logging
import random
import re
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import shared.logs
from shared.logs import (
    JsonFormatter,
    RedactBearer,
    TextFormatter,
    TraceContext,
    configure_logging,
    fields,
    record_fields,
    redact,
)
from shared.tracing import exporter_names, tracer_provider_from_env

TOKEN = "s3cr3t-member-token-0123456789"


def record(
    message: str,
    *args: object,
    logger_name: str = "test.shared.logs",
    created: float | None = None,
    exc: BaseException | None = None,
    stack: str | None = None,
    **extra: object,
) -> logging.LogRecord:
    """A record as the configured handler sees it (after both filters); `created` pins
    its time the way `LogRecord` sets it, `exc` attaches an exception (no traceback)."""
    logger = logging.getLogger(logger_name)
    exc_info = None if exc is None else (type(exc), exc, None)
    made = logger.makeRecord(
        logger.name, logging.INFO, __file__, 1, message, args, exc_info, extra=extra,
        sinfo=stack,
    )
    if created is not None:
        made.created = created
        made.msecs = int((created - int(created)) * 1000) + 0.0
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


# Every line below is what the formatters wrote before their fast paths (prefiltered
# redaction, cached seconds, fields read without copies) existed: the same record must
# keep giving the same bytes, in both formats.
SECOND = 1_764_000_000  # 2025-11-24 16:00:00 UTC
DECISION_LOGGER = "mcsync.hub.exports"


def traced() -> logging.LogRecord:
    made = record("inside", logger_name=DECISION_LOGGER, created=SECOND + 0.25,
                  **fields(key="k"))
    made.trace_id = "0af7651916cd43dd8448eb211c80319c"
    made.span_id = "b7ad6b7169203331"
    return made


def case(message: str, *args: object, **extra: Any) -> logging.LogRecord:
    extra.setdefault("created", SECOND + 0.25)
    return record(message, *args, logger_name=DECISION_LOGGER, **extra)


LOOP: list[object] = [1]
LOOP.append(LOOP)

GOLDEN = {
    "decision": (
        lambda: case("export created", **fields(
            key="ns/svc", cluster="c1", namespace="ns", name="svc", resourceVersion="123",
            verdict="Valid")),
        "2025-11-24 16:00:00,250 INFO mcsync.hub.exports: export created key=ns/svc"
        " cluster=c1 namespace=ns name=svc resourceVersion=123 verdict=Valid",
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"export created","key":"ns/svc","cluster":"c1","namespace":"ns",'
        '"name":"svc","resourceVersion":"123","verdict":"Valid"}',
    ),
    "values": (
        lambda: case("request %s %d", "PUT", 7, **fields(
            empty="", space="two words", quote='say "hi"', eq="a=b", nl="x\ny", none=None,
            int=3, float=1.5, flag=True, uni="naïve ✓")),
        '2025-11-24 16:00:00,250 INFO mcsync.hub.exports: request PUT 7 empty=""'
        ' space="two words" quote="say \\"hi\\"" eq="a=b" nl="x\\ny" none=None int=3'
        ' float=1.5 flag=True uni="na\\u00efve \\u2713"',
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"request PUT 7","empty":"","space":"two words","quote":"say \\"hi\\"",'
        '"eq":"a=b","nl":"x\\ny","none":null,"int":3,"float":1.5,"flag":true,'
        '"uni":"na\\u00efve \\u2713"}',
    ),
    # Containers are written as their text, so no line's entry holds one (nor a cycle).
    "containers": (
        lambda: case("containers", **fields(items=[1, "a"], mapping={"k": "v"}, loop=LOOP)),
        "2025-11-24 16:00:00,250 INFO mcsync.hub.exports: containers items=\"[1, 'a']\""
        " mapping=\"{'k': 'v'}\" loop=\"[1, [...]]\"",
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"containers","items":"[1, \'a\']","mapping":"{\'k\': \'v\'}",'
        '"loop":"[1, [...]]"}',
    ),
    # Plain extras first; a `fields` name that repeats one keeps the extra's place.
    "extras_then_fields": (
        lambda: case("mixed", plain="p", key="extra", _private="hidden",
                     color_message="\x1b[36mmixed\x1b[0m", **fields(key="field", name="web")),
        "2025-11-24 16:00:00,250 INFO mcsync.hub.exports: mixed plain=p key=field name=web",
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"mixed","plain":"p","key":"field","name":"web"}',
    ),
    "trace": (
        traced,
        "2025-11-24 16:00:00,250 INFO mcsync.hub.exports: inside"
        " trace_id=0af7651916cd43dd8448eb211c80319c span_id=b7ad6b7169203331 key=k",
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"inside","trace_id":"0af7651916cd43dd8448eb211c80319c",'
        '"span_id":"b7ad6b7169203331","key":"k"}',
    ),
    "bearer_in_any_case_everywhere": (
        lambda: case("sent BeArEr %s", "tok-1", exc=RuntimeError("refused 'bEaReR tok-2'"),
                     header="BEARER tok-3",
                     **fields(auth="bearer\ttok-4", other="Bearer\u2003tok-5,rest")),
        "2025-11-24 16:00:00,250 INFO mcsync.hub.exports: sent BeArEr *** header=\"BEARER ***\""
        " auth=bearer\t*** other=Bearer\u2003***,rest\nRuntimeError: refused 'bEaReR ***'",
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"sent BeArEr ***","header":"BEARER ***","auth":"bearer\\t***",'
        '"other":"Bearer\\u2003***,rest","exception":"RuntimeError: refused \'bEaReR ***\'"}',
    ),
    # Text redacts the whole line, so a message ending in "bearer" masks the next field.
    "bearer_across_fields": (
        lambda: case("auth scheme: bearer", **fields(next="value")),
        "2025-11-24 16:00:00,250 INFO mcsync.hub.exports: auth scheme: bearer ***",
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"auth scheme: bearer","next":"value"}',
    ),
    "newline_message": (
        lambda: case("first\nsecond", **fields(key="k")),
        "2025-11-24 16:00:00,250 INFO mcsync.hub.exports: first key=k\nsecond",
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"first\\nsecond","key":"k"}',
    ),
    "stack": (
        lambda: case("with stack", stack='Stack (most recent call last):\n  File "x.py", line 1',
                     **fields(key="k")),
        "2025-11-24 16:00:00,250 INFO mcsync.hub.exports: with stack key=k\n"
        'Stack (most recent call last):\n  File "x.py", line 1',
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"with stack","key":"k"}',
    ),
    "no_fields": (
        lambda: case("plain line"),
        "2025-11-24 16:00:00,250 INFO mcsync.hub.exports: plain line",
        '{"time":"2025-11-24T16:00:00.250+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"plain line"}',
    ),
    # Text truncates to the millisecond; JSON rounds to the microsecond first (datetime).
    "carry_to_next_second": (
        lambda: case("late", created=SECOND + 0.9999996),
        "2025-11-24 16:00:00,999 INFO mcsync.hub.exports: late",
        '{"time":"2025-11-24T16:00:01.000+00:00","level":"info","logger":"mcsync.hub.exports",'
        '"message":"late"}',
    ),
}


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Text lines carry local time: pin the zone so that the expected lines hold anywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("utc")
@pytest.mark.parametrize("name", list(GOLDEN))
def test_lines_are_byte_for_byte_what_they_were(name: str) -> None:
    build, text, json_line = GOLDEN[name]
    assert TextFormatter().format(build()) == text
    assert JsonFormatter().format(build()) == json_line


@pytest.mark.usefixtures("utc")
def test_json_lines_are_the_same_without_the_c_accelerator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    monkeypatch.setattr(shared.logs, "_JSON_LINE", shared.logs._line_encoder())
    for build, _, json_line in GOLDEN.values():
        assert JsonFormatter().format(build()) == json_line


@pytest.mark.usefixtures("utc")
def test_one_formatter_times_repeated_earlier_and_new_seconds_to_the_millisecond() -> None:
    text, json_formatter = TextFormatter(), JsonFormatter()
    stamps = [  # fractions a float holds exactly
        (SECOND + 0.125, "2025-11-24 16:00:00,125", "2025-11-24T16:00:00.125"),
        (SECOND + 0.9990234375, "2025-11-24 16:00:00,999", "2025-11-24T16:00:00.999"),
        (SECOND + 1.5, "2025-11-24 16:00:01,500", "2025-11-24T16:00:01.500"),
        (SECOND + 0.25, "2025-11-24 16:00:00,250", "2025-11-24T16:00:00.250"),  # a late one
        (SECOND + 61.0625, "2025-11-24 16:01:01,062", "2025-11-24T16:01:01.062"),
        (SECOND + 86_400.75, "2025-11-25 16:00:00,750", "2025-11-25T16:00:00.750"),
    ]
    for created, text_time, json_time in stamps:
        made = record("tick", created=created)
        assert text.format(made) == f"{text_time} INFO test.shared.logs: tick"
        assert json.loads(json_formatter.format(made))["time"] == f"{json_time}+00:00"


def test_json_times_agree_with_datetime_to_the_millisecond() -> None:
    """JSON times are datetime's (rounded to the microsecond, then cut to milliseconds),
    including the fractions that round up into the next second."""
    formatter = JsonFormatter()
    rng = random.Random(17)
    edges = [SECOND + f for f in (0.0, 0.0005, 0.0004999, 0.9994999, 0.9995, 0.9999994,
                                  0.9999995, 0.9999996, 0.9999999)]
    for created in edges + [SECOND + rng.uniform(0, 10) for _ in range(2_000)]:
        made = record("tick", created=created)
        expected = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
        assert json.loads(formatter.format(made))["time"] == expected, created


def test_only_ascii_letters_spell_bearer_for_the_pattern() -> None:
    """`redact` skips its regular expression when the lower-cased text lacks "bearer";
    exact only because the pattern's case-insensitivity matches no other letter."""
    every_character = "".join(map(chr, range(sys.maxunicode + 1)))
    assert sorted(set(re.findall(r"(?i)[bear]", every_character))) == sorted("aAbBeErR")


@pytest.mark.parametrize("spelling", ["bearer", "BEARER", "Bearer", "bEaReR", "BeArEr"])
def test_bearer_tokens_in_any_case_are_masked_everywhere(spelling: str) -> None:
    assert redact(f"x {spelling}  {TOKEN}") == f"x {spelling}  ***"
    made = record(f"sent {spelling} %s", TOKEN, header=f"{spelling} {TOKEN}",
                  **fields(auth=f"{spelling}\t{TOKEN}"))
    try:
        raise RuntimeError(f"hub refused '{spelling} {TOKEN}'")
    except RuntimeError:
        made.exc_info = sys.exc_info()
    for formatter in (JsonFormatter(), TextFormatter()):
        line = formatter.format(made)
        assert TOKEN not in line
        assert line.count("***") == 4  # message, extra, field, traceback


def test_record_fields_answers_a_copy_in_order() -> None:
    made = record("m", plain="p", **fields(key="k", name="n"))
    values = record_fields(made)
    assert list(values.items()) == [("plain", "p"), ("key", "k"), ("name", "n")]
    values["key"] = "changed"
    assert record_fields(made)["key"] == "k"
    only_fields = record("m", **fields(key="k"))
    values = record_fields(only_fields)
    values["key"] = "changed"
    assert record_fields(only_fields) == {"key": "k"}


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
