"""The staleness sweep's loop (docs/reference.md#failover): every hub replica runs one, for as long
as its app runs.

Nothing writes when a cluster goes quiet, so something must look: each replica asks its
store to sweep (`hub.store.withdrawals.sweep`) every `interval` seconds. The sweep is
cheap when nothing changed (two small reads) and decides from the database, so every
replica running it costs nothing extra and needs no leader: whichever sees a transition
first records it, once, and the others find it done. A replica alone (or one whose peers
are down) still withholds a lost cluster's endpoints on time.

The interval is a sixth of the TTL, at most a second: a lost cluster's endpoints leave the
feed within about a second of its TTL running out (docs/benchmarks.md measures it), while
a sweep at 1,000 clusters costs a few milliseconds of CPU.

A replica sweeps only once it has been able to hear heartbeats for a whole TTL: after it
starts, and after its database came back (a sweep that found the database down). A hub
that was away — its replicas stopped, or its database down — sees every cluster's last
heartbeat older than the TTL when it returns, through no fault of theirs; the panic
threshold would cover that moment only while most of them are still silent, and the
clusters whose first heartbeat comes last would be withdrawn for an instant each. Within
the grace their heartbeats arrive (an agent beats three times per TTL).

The loop logs each transition it records and each start and end of a panic (more than
`--stale-panic-fraction` of the fleet Stale: nothing withheld), which the metrics also
show (`hub.metrics`, read from the database at scrape time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from hub.logs import fields
from hub.store import DatabaseUnavailable, Store
from hub.store.withdrawals import SweepResult

log = logging.getLogger("mcsync.hub.sweeper")

MAX_INTERVAL_SECONDS = 1.0


def sweep_interval(cluster_ttl_seconds: float) -> float:
    """Seconds between sweeps for a hub whose TTL is `cluster_ttl_seconds`."""
    return min(MAX_INTERVAL_SECONDS, cluster_ttl_seconds / 6)


class Sweeper:
    """Runs `Store.withdrawals.sweep` every `interval` seconds on the store `store_of()`
    answers (None: the app has none yet, skip the turn) until `stop`, once it has heard
    for `grace` seconds (module docstring)."""

    def __init__(
        self, *, store_of: Callable[[], Store | None], interval: float, grace: float = 0.0
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self._store_of = store_of
        self._interval = interval
        self._grace = grace
        self._task: asyncio.Task[None] | None = None
        self._panic = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="mcsync-staleness-sweep")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        hearing_since = loop.time()
        while True:
            await asyncio.sleep(self._interval)
            store = self._store_of()
            if store is None or loop.time() - hearing_since < self._grace:
                continue
            try:
                self._report(await store.withdrawals.sweep())
            except DatabaseUnavailable as exc:
                hearing_since = loop.time()  # heartbeats failed meanwhile too
                log.debug("staleness sweep skipped: %s", exc)
            except Exception:  # one bad turn must not end the loop
                log.exception("staleness sweep failed; trying again next turn")

    def _report(self, result: SweepResult) -> None:
        fleet = result.fleet
        if fleet.panic != self._panic:
            self._panic = fleet.panic
            if fleet.panic:
                log.warning(
                    "more clusters are Stale than --stale-panic-fraction allows: the hub "
                    "suspects itself and withholds no endpoints until fewer are",
                    extra=fields(stale=len(fleet.stale), heartbeated=fleet.heartbeated),
                )
            else:
                log.info(
                    "Stale clusters back under --stale-panic-fraction: withholding again",
                    extra=fields(stale=len(fleet.stale), heartbeated=fleet.heartbeated),
                )
        if result.wrote and (result.marked_stale or result.applied.events):
            log.info(
                "staleness transition recorded",
                extra=fields(
                    markedStale=result.marked_stale,
                    exportsWithheld=result.applied.withheld,
                    exportsGivenBack=result.applied.given_back,
                    feedEvents=result.applied.events,
                    stale=sorted(fleet.stale)[:20],
                ),
            )
