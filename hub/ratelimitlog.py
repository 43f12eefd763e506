"""A logging filter that lets a repeating message through once per interval, with a count
of the copies it held back.

Why: when the process runs out of file descriptors, asyncio's accept loop (CPython 3.11,
`BaseSelectorEventLoop._accept_connection`) logs "socket.accept() out of system resource"
with a full traceback, and does not stop there: it goes on calling `accept()` up to
`backlog` (2048) times in the same tick, logging each failure. Under `ulimit -n 256`, 300
slow connections made the hub write 391,214 such tracebacks (173 MB) in 40 s, and the
logging alone kept the event loop from serving anyone. One line per interval says the same.
The hub's own connection-guard warnings (`hub.connections`) go through the same filter.

A record is "the same" as an earlier one when its `key` (a function of the record, None
for records this filter leaves alone) is equal. The first record of a key passes; the
others are dropped until `interval` seconds have passed; the next one to pass then says
how many were dropped. A filter on a logger runs before any handler formats the record,
so a dropped record costs its creation only (its traceback is never formatted).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

ACCEPT_ERROR_PREFIX = "socket.accept() out of system resource"
INTERVAL_SECONDS = 10.0


class RateLimitFilter(logging.Filter):
    """Let one record per key through every `interval` seconds (see the module doc)."""

    def __init__(
        self,
        key: Callable[[logging.LogRecord], str | None],
        *,
        interval: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._key = key
        self._interval = interval
        self._clock = clock
        self._passed_at: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = self._key(record)
        if key is None:
            return True
        now = self._clock()
        passed_at = self._passed_at.get(key)
        if passed_at is not None and now - passed_at < self._interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        held = self._held.pop(key, 0)
        self._passed_at[key] = now
        if held and passed_at is not None:
            record.msg = (
                f"{record.getMessage()} ({held} more like it in the last "
                f"{now - passed_at:.0f} s were not logged)"
            )
            record.args = None
        return True


def accept_error_key(record: logging.LogRecord) -> str | None:
    """asyncio's accept-loop resource error is one kind; everything else passes."""
    return "accept" if record.getMessage().startswith(ACCEPT_ERROR_PREFIX) else None


def by_logger(record: logging.LogRecord) -> str:
    """Every record of a logger is one kind (for a logger that only ever says one thing)."""
    return record.name


def install(*, interval: float = INTERVAL_SECONDS) -> None:
    """Rate-limit asyncio's accept-loop errors and the hub's connection-guard warnings."""
    logging.getLogger("asyncio").addFilter(RateLimitFilter(accept_error_key, interval=interval))
    logging.getLogger("mcsync.hub.connections").addFilter(
        RateLimitFilter(by_logger, interval=interval)
    )
