"""The PostgreSQL change listener (`hub.store.notify`): it reconnects with backoff, and a
write on another replica wakes this one's watchers again once it has.

PostgreSQL only: LISTEN/NOTIFY is how replicas hear each other; a SQLite hub is one
process and has no listener (its waiters are woken by `committed` alone, which the
store and watch tests cover on both databases).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg
import pytest

from hub.store.db import asyncpg_dsn
from hub.store.notify import CHANNEL, ChangeNotifier
from tests.member.agent_support import free_port

DEADLINE = 30.0


class RecordedSleeps:
    """The listener's waits between reconnects, recorded and not slept."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


async def until(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"not within {DEADLINE}s: {what}")
        await asyncio.sleep(0.01)


def notifier(sleeps: RecordedSleeps, read_revision: int = 0) -> ChangeNotifier:
    async def read() -> int:
        return read_revision

    return ChangeNotifier(read_revision=read, sleep=sleeps)


async def test_an_unreachable_database_is_retried_at_waits_growing_to_five_seconds() -> None:
    sleeps = RecordedSleeps()
    listener = notifier(sleeps)
    listener.start_listening(f"postgresql://postgres@127.0.0.1:{free_port()}/none")
    try:
        await until(lambda: len(sleeps.waits) >= 9, "nine reconnect attempts")
        ceilings = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
        # Full jitter: each wait anywhere up to its ceiling, none beyond the 5 s cap.
        assert all(0.0 <= w <= c for w, c in zip(sleeps.waits, ceilings, strict=False))
        assert listener.needs_polling  # meanwhile, waiters poll the revision
    finally:
        await listener.close()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_a_dropped_listener_reconnects_and_hears_other_replicas_again(
    database_url: str,
) -> None:
    sleeps = RecordedSleeps()
    listener = notifier(sleeps)
    dsn = asyncpg_dsn(database_url)
    listener.start_listening(dsn)
    admin = await asyncpg.connect(dsn, timeout=10)
    try:
        await until(lambda: not listener.needs_polling, "the listener to connect")
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        await until(lambda: len(sleeps.waits) == 1, "the listener to notice the drop")
        assert sleeps.waits[0] <= 0.1  # the first retry comes quickly
        await until(lambda: not listener.needs_polling, "the listener to reconnect")

        # Another replica commits revision 7: this one's watchers wake.
        await admin.execute("SELECT pg_notify($1, '7')", CHANNEL)
        assert await listener.wait(after=0, timeout=DEADLINE) == 7
        assert len(sleeps.waits) == 1  # one reconnect did it; the count started over
    finally:
        await admin.close()
        await listener.close()
