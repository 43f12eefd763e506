"""One full-state sync of a cluster at a time (docs/reference.md#scope-and-limits).

A full-state sync (`PUT /clusters/{c}/serviceexports`, `…/endpointslices`) reads what the
cluster has, checks the quota against it, then writes in batches of its own
transactions and withdraws what it did not list. Two syncs of one cluster running side
by side each read the same "before", each passed the quota for its own set alone, and
each withdrew only what it had read: the cluster ended with the union of both, past the
quota. A sync is therefore serialised per cluster and kind, from its first read to its
last write, so that concurrent syncs end with exactly one of them stored, whole.

How, on each back end:

* in this process, an `asyncio.Lock` per (kind, cluster), dropped when nobody holds or
  waits for it: waiting syncs hold no database connection (ten syncs waiting on
  connections of their own would starve the one running of the pool);
* across hub replicas (PostgreSQL), a session advisory lock taken by the one sync of this
  replica on a connection of its own, held for the sync and released after it (or with
  the connection, when the hub dies). It uses the two-key form, whose space does not
  meet the one-key locks of `hub.store.locks`; two clusters whose keys meet only take
  turns. SQLite has one hub process per database: the process lock is the whole lock.

Single writes (a PUT, a DELETE) do not take it: they are judged one by one under the
cluster and key locks, and a sync never waits behind them longer than a transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store.context import StoreContext
from hub.store.db import connection, translate_errors

# The first key of every sync lock ("mcsy"), the second the (kind, cluster) hash.
_LOCK_CLASS = int.from_bytes(b"mcsy", "big", signed=True)


def sync_lock_key(kind: str, cluster_id: str) -> int:
    """A stable signed 32-bit number for (kind, cluster): the same in every replica."""
    digest = hashlib.blake2b(f"{kind}\0{cluster_id}".encode(), digest_size=4)
    return int.from_bytes(digest.digest(), "big", signed=True)


@dataclass
class _Local:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class SyncLocks:
    """The store's sync locks (module docstring); one per `Store`."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._local: dict[tuple[str, str], _Local] = {}

    @contextlib.asynccontextmanager
    async def hold(self, kind: str, cluster_id: str) -> AsyncIterator[None]:
        """Hold the sync lock of `kind` ("exports", "slices") for `cluster_id`."""
        key = (kind, cluster_id)
        local = self._local.setdefault(key, _Local())
        local.users += 1
        try:
            async with local.lock:
                if self._ctx.backend != "postgresql":
                    yield
                    return
                async with self._shared(sync_lock_key(kind, cluster_id)):
                    yield
        finally:
            local.users -= 1
            if local.users == 0:
                self._local.pop(key, None)

    @contextlib.asynccontextmanager
    async def _shared(self, number: int) -> AsyncIterator[None]:
        """The advisory lock on a connection of its own, outside any transaction (on
        asyncpg's connection, so no transaction stays open while the sync runs)."""
        with translate_errors():
            async with connection(self._ctx.engine) as conn:
                driver = await _driver_of(conn)
                try:
                    await driver.execute("SELECT pg_advisory_lock($1, $2)", _LOCK_CLASS, number)
                except BaseException:
                    # Cancelled or failed while waiting: the lock may be granted after
                    # all; closing the connection is the one sure way to release it.
                    await conn.invalidate()
                    raise
                try:
                    yield
                finally:
                    try:
                        await driver.execute(
                            "SELECT pg_advisory_unlock($1, $2)", _LOCK_CLASS, number
                        )
                    except BaseException:
                        await conn.invalidate()
                        raise


async def _driver_of(conn: AsyncConnection) -> Any:
    raw = await conn.get_raw_connection()
    return raw.driver_connection
