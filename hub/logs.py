"""The hub's logging set-up: the shared line format (`shared.logs`) plus uvicorn's loggers.

The format, the structured fields, the trace id and the token redaction are the same as the
agent's and live in `shared.logs`; what is the hub's own is uvicorn: its loggers propagate
to ours, and its access log is replaced by the API's one line per request
(`hub.api.observe`).
"""

from __future__ import annotations

import logging

from shared.logs import (
    JsonFormatter,
    LogFormat,
    RedactBearer,
    TextFormatter,
    fields,
    redact,
)
from shared.logs import configure_logging as _configure

__all__ = [
    "JsonFormatter",
    "RedactBearer",
    "TextFormatter",
    "configure_logging",
    "fields",
    "redact",
]


def configure_logging(*, log_format: LogFormat, level: str = "info") -> None:
    """Send every logger's records to stderr in `log_format`; call once per process."""
    _configure(log_format=log_format, level=level)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True
