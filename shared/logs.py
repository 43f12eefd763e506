"""The log format both programs write (docs/reference.md#observability): one line per decision, JSON
or text.

The hub and the agent must render a log line identically — an operator greps both with the
same query and a log pipeline parses both with the same rule — so the formatters live here,
once, and each program only chooses its level and its noisy third-party loggers.

Fields: callers attach them either as plain `extra={"key": ...}` or with
`extra=fields(key=..., ...)` (which also allows names a `LogRecord` reserves, such as
`name`). JSON merges them into the object; text appends `key=value` pairs to the line.
`TraceContext` adds `trace_id` and `span_id` of the span active when the record was made,
so a decision's line leads to its trace (and the trace to its lines).

Tokens never reach a log line (docs/reference.md#credentials): neither program logs a header or a
token in the first place, and `RedactBearer` is the second line of defence, masking anything shaped
like `Bearer <token>` in every record — including third-party ones — and in tracebacks.

The hub writes two lines per request (the decision and the request), so a line's cost is
part of every request's. The formatters skip what cannot change a line — the redaction's
regular expression where no "bearer" is, re-rendering a second already rendered, copying
a record's fields, building a JSON encoder — and the tests pin each line's bytes.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from opentelemetry import trace

__all__ = [
    "JsonFormatter",
    "LogFormat",
    "RedactBearer",
    "TextFormatter",
    "TraceContext",
    "configure_logging",
    "fields",
    "record_fields",
    "redact",
]

LogFormat = Literal["json", "text"]
FIELDS_ATTR = "mcsync_fields"
_BEARER_RE = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")
# LogRecord attributes that are not caller-supplied fields. uvicorn attaches
# `color_message`, a copy of the message with terminal colour codes: not a field, and its
# escape codes would only garble the line.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
    FIELDS_ATTR,
}


def fields(**values: Any) -> dict[str, Any]:
    """The `extra=` argument that attaches structured fields to one log record."""
    return {FIELDS_ATTR: values}


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """Every structured field of `record`: plain extras, then `fields(...)` ones."""
    return dict(_fields_of(record))


def _fields_of(record: logging.LogRecord) -> Mapping[str, Any]:
    """`record_fields` for the formatters, which only read it: a record with no plain
    extras (every line written with `fields(...)`) answers its `fields` mapping itself,
    without sifting and copying the record's twenty-odd attributes."""
    state = vars(record)
    attached = getattr(record, FIELDS_ATTR, None)
    if _STANDARD.issuperset(state):
        return attached if isinstance(attached, Mapping) else {}
    values = {k: v for k, v in state.items() if k not in _STANDARD and not k.startswith("_")}
    if isinstance(attached, Mapping):
        values.update(attached)
    return values


def redact(text: str) -> str:
    """`text` with every bearer token masked.

    Nearly no text says "bearer", and a lower-cased copy and a substring search cost a
    fraction of the regular expression's scan, so the expression runs only on the text that
    does. The test is exact: the pattern's case-insensitive `bearer` matches ASCII letters
    only (no other character folds to b, e, a or r), and `str.lower` turns each of those
    into its lower-case letter in place, so every match survives as "bearer".
    """
    if "bearer" not in text.lower():
        return text
    return _BEARER_RE.sub(r"\1***", text)


class RedactBearer(logging.Filter):
    """Mask bearer tokens in a record's message and arguments before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class TraceContext(logging.Filter):
    """Add `trace_id` / `span_id` (W3C hex) of the active span; nothing when none is."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return True


def _json_value(value: Any) -> Any:
    if type(value) is str:  # most fields: the checks below would answer the same
        return redact(value)
    if value is None or isinstance(value, int | float | bool):
        return value
    return redact(str(value))


def _line_encoder() -> Callable[[dict[str, Any]], str]:
    """`json.dumps(entry, separators=(",", ":"))`, built once instead of per line.

    `json.dumps` with separators makes a `JSONEncoder` per call, whose `encode` makes a C
    encoder per call: 0.85 of the 2.4 us a line's encoding costs. A line's entry holds
    only strings, numbers, booleans and None (`_json_value`), never a container that could
    refer to itself, so one C encoder without the circular-reference bookkeeping writes
    the same bytes; where the C accelerator is missing, one `JSONEncoder` does.
    """
    plain = json.JSONEncoder(separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain.encode
    chunks = make(
        None,  # no circular-reference markers (see above)
        plain.default,
        json.encoder.encode_basestring_ascii,  # plain.ensure_ascii
        None,  # plain.indent
        plain.key_separator,
        plain.item_separator,
        plain.sort_keys,
        plain.skipkeys,
        plain.allow_nan,
    )
    return lambda entry: "".join(chunks(entry, 0))


_JSON_LINE = _line_encoder()


class _LastSecond:
    """The rendered text of the last whole second a formatter wrote, for the next record.

    A busy program writes many lines within one second, and rendering a date is a tenth of
    a line's cost, so each formatter renders a second once and adds the milliseconds. The
    pair is one tuple, replaced whole: threads sharing a formatter never see one second's
    number with another's text.
    """

    __slots__ = ("_last", "_render")

    def __init__(self, render: Callable[[int], str]) -> None:
        self._render = render
        self._last: tuple[int | None, str] = (None, "")

    def text(self, second: int) -> str:
        last = self._last
        if last[0] != second:
            last = (second, self._render(second))
            self._last = last
        return last[1]


def _utc_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).replace(tzinfo=None).isoformat()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, then the fields."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # as `logging.Formatter`, which it long was
        self._seconds = _LastSecond(_utc_second)

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self._time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _fields_of(record).items():
            if key not in entry:
                entry[key] = _json_value(value)
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return _JSON_LINE(entry)

    def _time(self, created: float) -> str:
        """`datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")`.

        datetime rounds the timestamp half-to-even to the microsecond, carrying into the
        next second, then cuts to milliseconds; so do these lines, the same way in the same
        floating point, leaving only the second to render (once per second).
        """
        fraction, whole = math.modf(created)
        micros = round(fraction * 1e6)
        if micros >= 1_000_000:
            whole, micros = whole + 1.0, micros - 1_000_000
        elif micros < 0:
            whole, micros = whole - 1.0, micros + 1_000_000
        return f"{self._seconds.text(int(whole))}.{micros // 1000:03d}+00:00"


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value …` (the fields stay on the first line)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._seconds = _LastSecond(self._render_second)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """`logging.Formatter.formatTime`, each second rendered once."""
        if datefmt or not self.default_msec_format:
            return super().formatTime(record, datefmt)
        # `converter` (localtime) takes the whole second below the timestamp.
        second = self._seconds.text(math.floor(record.created))
        return self.default_msec_format % (second, record.msecs)

    def _render_second(self, second: int) -> str:
        return time.strftime(self.default_time_format, self.converter(second))

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            line = super().format(record)
        else:  # `logging.Formatter.format` less its traceback and stack, with no tests left
            record.message = record.getMessage()
            record.asctime = self.formatTime(record, self.datefmt)
            line = self.formatMessage(record)
        extra = " ".join([f"{k}={_text_value(v)}" for k, v in _fields_of(record).items()])
        if extra:
            # The exception text (if any) follows the first line; keep fields on that line.
            first, sep, rest = line.partition("\n")
            line = f"{first} {extra}{sep}{rest}"
        return redact(line)


def _text_value(value: Any) -> str:
    text = str(value)
    if not text or " " in text or '"' in text or "=" in text or "\n" in text:
        return json.dumps(text)
    return text


def configure_logging(
    *, log_format: LogFormat, level: str = "info", quiet: Iterable[str] = ()
) -> logging.Handler:
    """Send every logger's records to stderr in `log_format`; call once per process.

    `quiet`: loggers lowered to WARNING (HTTP libraries that log every request). Answers
    the installed handler.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(RedactBearer())
    handler.addFilter(TraceContext())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in quiet:
        logging.getLogger(name).setLevel(logging.WARNING)
    return handler
