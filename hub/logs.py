"""The hub's logging set-up: the shared line format (`shared.logs`) plus uvicorn's loggers.

The format, the structured fields, the trace id and the token redaction are the same as the
agent's and live in `shared.logs`; what is the hub's own is uvicorn: its loggers propagate
to ours, and its access log is replaced by the API's one line per request
(`hub.api.observe`).

The hub writes at least one line per request, so what a line costs is part of every
request's cost. Neither format prints the caller's source file, function, line, thread or
process, yet `logging` gathers all of them for every record by default — walking the
stack of the (deep, async) caller to find the source line, and a `getpid` system call.
The hub turns that gathering off, as the logging HOWTO's "Optimization" section
describes: 40 to 60 µs less per line, a tenth of a single-export PUT's CPU (two lines:
the decision and the request).
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
    # What no hub log line prints (see the module docstring): not gathered at all.
    logging._srcfile = None  # type: ignore[attr-defined]  # the HOWTO's documented switch
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True
    # alembic names each plugin it sets up when first imported, which is now after this
    # (docs/decisions.md#start-up-cost): nothing an operator could act on.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
