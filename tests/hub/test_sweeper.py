"""The staleness sweep's loop (hub/sweeper.py): it sweeps every interval, but only once it
has heard for a whole grace (the TTL) — after it starts and after its database came back —
so a hub that was away does not withdraw the clusters whose first heartbeat comes last."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from hub.store import DatabaseUnavailable
from hub.store.withdrawals import FleetState, SweepResult
from hub.sweeper import Sweeper, sweep_interval

QUIET = SweepResult(fleet=FleetState(stale=frozenset(), heartbeated=0, panic=False))


class Sweeps:
    """A store's `withdrawals` that counts sweeps; `down` makes them find no database."""

    def __init__(self) -> None:
        self.count = 0
        self.down = False

    async def sweep(self) -> SweepResult:
        if self.down:
            raise DatabaseUnavailable("the database does not answer")
        self.count += 1
        return QUIET


def test_the_interval_is_a_sixth_of_the_ttl_at_most_a_second() -> None:
    assert [sweep_interval(ttl) for ttl in (3.0, 6.0, 90.0)] == [0.5, 1.0, 1.0]


async def test_no_sweep_before_a_whole_grace_of_hearing() -> None:
    sweeps = Sweeps()
    store: Any = SimpleNamespace(withdrawals=sweeps)
    sweeper = Sweeper(store_of=lambda: store, interval=0.01, grace=0.3)
    sweeper.start()
    try:
        await asyncio.sleep(0.15)
        assert sweeps.count == 0  # just started: not heard for a grace yet
        await asyncio.sleep(0.4)
        assert sweeps.count > 0
        sweeps.down = True
        await asyncio.sleep(0.1)
        sweeps.down = False
        after_outage = sweeps.count
        await asyncio.sleep(0.15)
        assert sweeps.count == after_outage  # the database was away: a grace again
        await asyncio.sleep(0.4)
        assert sweeps.count > after_outage
    finally:
        await sweeper.stop()
