"""The loop of a report to the hub that follows a change in the cluster: the cluster's
properties (`member.propertiesreport`), the namespaces it holds
(`member.imports.namespacesreport`).

A thread calls the reporter's `sync()` once at start (a restarted agent has had nothing
acknowledged), again whenever `wake()` is called (an informer's event), and every
`RETRY_SECONDS` while the last `sync()` did not get through (the hub unreachable or
refusing). `sync()` reads the cluster and hands what it found to `send()`, which compares
it with what the hub last acknowledged and sends only a difference, so a wake that changes
nothing costs no request. A problem is logged once, at DEBUG while it repeats. The thread
never dies of a failed report: the next change or retry tries again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from member.hubclient import HubError

__all__ = ["RETRY_SECONDS", "ReportLoop"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_SECONDS = 5.0
"""How soon a report the hub did not take (unreachable, refused) is tried again."""


class ReportLoop(Generic[T]):
    """Runs `sync` (True: the hub holds what it should) at start, after each `wake()`, and
    every `RETRY_SECONDS` until it succeeds; `what` names the report in its log lines,
    which go to `log` (the reporter's module's logger)."""

    def __init__(
        self, sync: Callable[[], bool], *, name: str, what: str, log: logging.Logger
    ) -> None:
        self._sync = sync
        self._name = name
        self._what = what
        self._log = log
        self._wake = threading.Event()
        self._acknowledged: T | None = None  # what the hub last answered for
        self._last_problem: str | None = None

    def send(self, values: T, put: Callable[[T], object], *, done: str) -> bool:
        """`put(values)` unless the hub acknowledged these already; True when it holds
        them. `done`: the line logged once it took them."""
        if values == self._acknowledged:
            return True
        try:
            put(values)
        except HubError as exc:
            self.problem(f"cannot report {self._what} to the hub (retried in "
                         f"{RETRY_SECONDS:g}s): {exc}", level=logging.WARNING)
            return False
        self._acknowledged = values
        self._last_problem = None
        self._log.info("%s", done)
        return True

    def problem(self, line: str, *, level: int) -> None:
        """Log `line` at `level`, or at DEBUG when it is the last problem said again."""
        repeated = line == self._last_problem
        self._last_problem = line
        self._log.log(logging.DEBUG if repeated else level, "%s", line)

    def wake(self) -> None:
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        """Report until `stop`; blocking."""
        ok = False
        self._wake.set()
        while not stop.is_set():
            woken = self._wake.wait(timeout=RETRY_SECONDS)
            if stop.is_set():
                return
            if not woken and ok:
                continue
            self._wake.clear()
            try:
                ok = self._sync()
            except Exception:  # the thread must not die: the next change tries again
                logger.exception("reporting %s failed", self._what)
                ok = False

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name=self._name, daemon=True)
        thread.start()
        return thread
