"""Structured logging for the hub: one line per request and per decision, JSON or text.

Callers attach fields with `extra=fields(key=value, ...)`; both formatters render them
(JSON merges them into the object, text appends `key=value` pairs), so a decision's log
line carries the object's key in a machine-readable form either way.

Tokens must never reach a log line (SPEC §4.4). The API never logs a header or a token in
the first place; `RedactBearer` is the second line of defence and masks anything that
looks like `Bearer <token>` in any record, including third-party ones (uvicorn, SQLAlchemy).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

FIELDS_ATTR = "mcsync_fields"
_BEARER_RE = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")


def fields(**values: Any) -> dict[str, Any]:
    """The `extra=` argument that attaches structured fields to one log record."""
    return {FIELDS_ATTR: values}


def _record_fields(record: logging.LogRecord) -> Mapping[str, Any]:
    value = getattr(record, FIELDS_ATTR, None)
    return value if isinstance(value, Mapping) else {}


def redact(text: str) -> str:
    return _BEARER_RE.sub(r"\1***", text)


class RedactBearer(logging.Filter):
    """Mask bearer tokens in a record's message and arguments before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _record_fields(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = " ".join(f"{k}={_text_value(v)}" for k, v in _record_fields(record).items())
        if extra:
            # The exception text (if any) follows the first line; keep fields on that line.
            first, sep, rest = line.partition("\n")
            line = f"{first} {extra}{sep}{rest}"
        return redact(line)


def _text_value(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if (not text or any(c in text for c in ' "=\n')) else text


def configure_logging(*, log_format: Literal["json", "text"], level: str = "info") -> None:
    """Send every logger's records to stderr in `log_format`; call once per process."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(RedactBearer())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn's own loggers propagate to ours; its access log is replaced by the API's.
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True
