"""Step 2 of the store's lock order, the service-key locks (`hub.store.locks`), on both
back ends: two writers of one key take turns, the second seeing what the first committed;
keys whose lock numbers collide cannot deadlock writers that name them in opposite
orders; a write leaves no row behind for a key it leaves empty, and a lock row left by
an older hub (`created_at` NULL) reads as no ServiceImport at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest
from sqlalchemy import func, insert, select, text
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import NotFound, Store
from hub.store import locks as locks_module
from hub.store.locks import Key, key_lock_number, lock_keys
from hub.store.tables import service_imports
from tests.hub.test_store_support import at, make_export, open_store, register

DEADLINE = 30.0  # seconds: generous; only a broken lock order would ever reach it
KEY: Key = ("demo", "web")


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[tuple[Store, Store]]:
    """Two stores on one database: two hub replicas."""
    a = await open_store(database_url)
    b = await Store.open(database_url)
    await register(a, "c1", "c2")
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


KeysLock = Callable[..., Awaitable[dict[Key, RowMapping]]]


def _wrap_key_locks(
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    after: Callable[[dict[Key, RowMapping]], Awaitable[None]],
) -> None:
    """Have `store`'s key locks call `after` with the keys' ServiceImport rows as read
    under them, locks held (a writer that reads them itself after the lock, `read=False`,
    is answered nothing, as the lock answers it)."""
    locks = store._ctx.locks
    taken: KeysLock = locks.keys

    async def keys(
        conn: AsyncConnection, keys: Sequence[Key], *, read: bool = True
    ) -> dict[Key, RowMapping]:
        rows = await taken(conn, keys, read=True)
        await after(rows)
        return rows if read else {}

    monkeypatch.setattr(locks, "keys", keys)


async def _waiting_for_advisory_locks(store: Store, count: int) -> None:
    """Until `count` sessions of this database wait for an advisory lock (PostgreSQL)."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
    )
    while True:
        async with store.engine.connect() as conn:
            if (await conn.execute(query)).scalar_one() >= count:
                return
        await asyncio.sleep(0.02)


async def _import_types(store: Store) -> list[str]:
    return [
        row.type for row in await store.import_feed.imports_since(0, 1000) if row.cluster_id == ""
    ]


async def test_two_writers_of_one_key_take_turns(
    stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = stores
    first_locked, release_first = asyncio.Event(), asyncio.Event()
    second_found: list[dict[Key, RowMapping]] = []

    async def hold(rows: dict[Key, RowMapping]) -> None:
        first_locked.set()
        await release_first.wait()

    async def record(rows: dict[Key, RowMapping]) -> None:
        second_found.append(rows)

    _wrap_key_locks(monkeypatch, a, hold)
    _wrap_key_locks(monkeypatch, b, record)

    first = asyncio.create_task(a.exports.put("c1", make_export("c1", created=at(0))))
    second: asyncio.Task[Any] | None = None
    try:
        await asyncio.wait_for(first_locked.wait(), DEADLINE)
        second = asyncio.create_task(b.exports.put("c2", make_export("c2", created=at(1))))
        if a.backend == "postgresql":
            await asyncio.wait_for(_waiting_for_advisory_locks(a, 1), DEADLINE)
        else:
            # SQLite: the second waits for the database's writer lock, where nothing
            # shows it waiting; give it a moment to get there (the assertions below hold
            # however far it got).
            await asyncio.sleep(0.2)
        assert not second.done()
        assert second_found == []  # the second has not got the key while the first holds it
    finally:
        release_first.set()
    put_first, put_second = await asyncio.wait_for(asyncio.gather(first, second), DEADLINE)

    assert put_first.created and put_second.created
    # The second found the first's committed ServiceImport under its lock...
    [found] = second_found
    assert found[KEY]["created_at"] is not None
    # ...so the import names both clusters, added by the first and modified by the second.
    imported = await a.imports.get(*KEY)
    assert imported.status.winning_cluster == "c1"
    assert sorted(c.cluster for c in imported.status.clusters) == ["c1", "c2"]
    assert await _import_types(a) == ["ADDED", "MODIFIED"]


async def test_keys_sharing_a_lock_number_in_opposite_orders_do_not_deadlock(
    stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Keys in order A < B < C < D where h(B) = h(C) = 1 and h(A) = h(D) = 2: locked in key
    # order, writer 1 (A, C) takes 2 then waits for 1 while writer 2 (B, D) takes 1 and
    # waits for 2. Locked in number order, both start with 1.
    A, B, C, D = (("demo", name) for name in "abcd")
    numbers = {A: 2, B: 1, C: 1, D: 2}
    monkeypatch.setattr(locks_module, "key_lock_number", numbers.__getitem__)
    a, b = stores
    release_holder = asyncio.Event()
    holder_locked = asyncio.Event()

    async def holder() -> None:
        # Holds number 1 until both writers wait, so each has locked what comes before it.
        async with a._ctx.write() as conn:
            if a.backend == "postgresql":
                await conn.execute(text("SELECT pg_advisory_xact_lock(1)"))
            holder_locked.set()
            await release_holder.wait()

    async def writer(store: Store, keys: list[Key]) -> dict[Key, RowMapping]:
        async with store._ctx.write() as conn:
            return await lock_keys(conn, store._ctx, keys)

    holding = asyncio.create_task(holder())
    await asyncio.wait_for(holder_locked.wait(), DEADLINE)
    writers = [
        asyncio.create_task(writer(a, [A, C])),
        asyncio.create_task(writer(b, [B, D])),
    ]
    if a.backend == "postgresql":
        await asyncio.wait_for(_waiting_for_advisory_locks(a, 2), DEADLINE)
    release_holder.set()
    await asyncio.wait_for(holding, DEADLINE)
    # A deadlock would raise DatabaseUnavailable ("deadlock detected") in one of them.
    assert await asyncio.wait_for(asyncio.gather(*writers), DEADLINE) == [{}, {}]


async def _service_import_rows(store: Store) -> list[tuple[Any, ...]]:
    async with store.engine.connect() as conn:
        query = select(service_imports.c.namespace, service_imports.c.name)
        return [tuple(r) for r in await conn.execute(query)]


async def test_a_write_that_leaves_a_key_empty_leaves_no_row(
    stores: tuple[Store, Store],
) -> None:
    a, _ = stores
    with pytest.raises(NotFound):
        await a.exports.delete("c1", "demo", "never-exported")
    await a.exports.put("c1", make_export("c1"))
    await a.exports.delete("c1", *KEY)
    result = await a.exports.sync("c1", [])  # a sync of nothing locks nothing either
    assert (result.created, result.updated) == (0, 0)
    assert await _service_import_rows(a) == []
    async with a._ctx.write() as conn:
        assert await lock_keys(conn, a._ctx, [KEY, ("demo", "other")]) == {}
    assert await _service_import_rows(a) == []  # locking a key writes nothing


async def test_a_lock_row_of_an_older_hub_reads_as_no_import(
    stores: tuple[Store, Store],
) -> None:
    a, b = stores
    async with a._ctx.write() as conn:
        # What an older hub's key lock left: its key only (column defaults), no created_at.
        await conn.execute(insert(service_imports).values(namespace=KEY[0], name=KEY[1]))
    with pytest.raises(NotFound):
        await b.imports.get(*KEY)
    await b.exports.put("c1", make_export("c1"))
    imported = await b.imports.get(*KEY)
    assert imported.metadata.creation_timestamp is not None
    assert await _import_types(b) == ["ADDED"]  # new to importers, not MODIFIED
    await b.exports.delete("c1", *KEY)
    assert await _service_import_rows(b) == []
    async with a.engine.connect() as conn:
        left = select(func.count()).select_from(service_imports)
        assert (await conn.execute(left)).scalar_one() == 0


def test_the_lock_number_of_a_key_is_stable_and_unambiguous() -> None:
    # Every hub replica, of any version, must lock a key under the same number.
    assert key_lock_number(("demo", "web")) == -6747775804541951467
    # Length-prefixed parts: moving a character across the boundary changes the number.
    assert key_lock_number(("a", "bc")) != key_lock_number(("ab", "c"))
    numbers = [key_lock_number(("ns", f"svc-{i}")) for i in range(1000)]
    assert all(-(2**63) <= n < 2**63 for n in numbers)
    assert len(set(numbers)) == len(numbers)
