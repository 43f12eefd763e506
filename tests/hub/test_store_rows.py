"""The store's one write path on both databases: the row writer `StoreContext` picks, and
an annotation patch group-committed with other writes.

`RowWriter` is what every writer's batched statements go through (`hub.store.rows`); the
two back ends must leave the same rows for the same calls, including the cases a batch
meets: an upsert that meets an existing key, timestamps given in another zone, a lookup
of one row and of many, a statement over no rows at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import Conflict, NotFound, Store
from hub.store.context import StoreContext, for_backend
from hub.store.locks import PostgresLocks, SQLiteLocks, take_revisions_and_write
from hub.store.rows import COPY_MIN_ROWS, PENDING_REVISION, PostgresRows, SQLiteRows, Write
from hub.store.tables import changes, endpoint_slices, service_imports
from tests.hub.test_store_support import make_export, opened_store

CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
ROW: dict[str, object] = {
    "cluster_id": "alpha",
    "namespace": "demo",
    "name": "web-1",
    "service_name": "web",
    "spec": "{}",
    "resource_version": 1,
    "created_at": CREATED,
}


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, "alpha", "beta") as s:
        yield s


def _ctx(store: Store) -> StoreContext:
    return store._ctx


async def _slices(ctx: StoreContext) -> list[tuple[object, ...]]:
    async with ctx.read() as conn:
        query = select(endpoint_slices).order_by(endpoint_slices.c.name)
        return [tuple(row) for row in await conn.execute(query)]


def test_the_row_writer_and_locks_are_chosen_from_the_back_end() -> None:
    rows, locks = for_backend("postgresql")
    assert isinstance(rows, PostgresRows) and isinstance(locks, PostgresLocks)
    rows, locks = for_backend("sqlite")
    assert isinstance(rows, SQLiteRows) and isinstance(locks, SQLiteLocks)
    with pytest.raises(ValueError, match="unknown database back end 'mysql'"):
        for_backend("mysql")


async def test_insert_update_upsert_delete_leave_the_same_rows(store: Store) -> None:
    ctx = _ctx(store)
    east = timezone(timedelta(hours=5))
    async with ctx.write() as conn:
        await ctx.rows.insert(conn, endpoint_slices, [])  # no rows: no statement, no error
        await ctx.rows.insert(
            conn,
            endpoint_slices,
            [ROW, {**ROW, "name": "web-2", "created_at": CREATED.astimezone(east)}],
        )
        await ctx.rows.update(
            conn,
            endpoint_slices,
            [{"cluster_id": "alpha", "namespace": "demo", "name": "web-1", "resource_version": 7}],
        )
        await ctx.rows.upsert(
            conn,
            endpoint_slices,
            [
                {**ROW, "name": "web-2", "spec": '{"a":1}', "resource_version": 8},
                {**ROW, "name": "web-3", "resource_version": 9},
            ],
        )
    created = CREATED
    assert await _slices(ctx) == [
        ("alpha", "demo", "web-1", "web", "{}", 7, created),
        ("alpha", "demo", "web-2", "web", '{"a":1}', 8, created),
        ("alpha", "demo", "web-3", "web", "{}", 9, created),
    ]
    async with ctx.write() as conn:
        await ctx.rows.delete(
            conn, endpoint_slices, [("alpha", "demo", "web-1"), ("alpha", "demo", "web-3")]
        )
    assert [row[2] for row in await _slices(ctx)] == ["web-2"]


async def test_where_in_finds_one_row_and_many(store: Store) -> None:
    ctx = _ctx(store)
    async with ctx.write() as conn:
        await ctx.rows.insert(
            conn, endpoint_slices, [{**ROW, "name": f"web-{i}"} for i in range(4)]
        )
    columns = (endpoint_slices.c.cluster_id, endpoint_slices.c.name)
    async with ctx.read() as conn:
        for wanted in ([("alpha", "web-2")], [("alpha", "web-0"), ("alpha", "web-3"), ("b", "x")]):
            query = select(endpoint_slices.c.name).where(ctx.rows.where_in(columns, wanted))
            found = sorted(name for (name,) in await conn.execute(query))
            assert found == sorted(name for cluster, name in wanted if cluster == "alpha")


async def test_rows_of_one_statement_need_the_same_columns(store: Store) -> None:
    ctx = _ctx(store)
    async with ctx.write() as conn:
        with pytest.raises(ValueError, match="every row of one statement"):
            await ctx.rows.insert(
                conn, endpoint_slices, [ROW, {k: v for k, v in ROW.items() if k != "spec"}]
            )


async def test_a_naive_timestamp_is_refused(store: Store) -> None:
    ctx = _ctx(store)
    async with ctx.write() as conn:
        with pytest.raises(Exception, match="aware datetime"):
            await ctx.rows.insert(
                conn, endpoint_slices, [{**ROW, "created_at": datetime(2026, 1, 1)}]
            )


async def _begun(conn: AsyncConnection) -> None:
    """A statement first, as every writer runs its locks first: the transaction is then
    open on the driver's connection, where PostgreSQL's COPY joins it."""
    await conn.execute(select(endpoint_slices.c.name).limit(1))


async def test_a_large_insert_is_part_of_the_callers_transaction(store: Store) -> None:
    # Many rows take PostgreSQL's COPY path: it must roll back with the transaction it
    # runs in, and store each column as the one-statement insert does (timestamps in UTC).
    ctx = _ctx(store)
    east = timezone(timedelta(hours=5))
    rows = [
        {
            **ROW,
            "name": f"web-{i:03}",
            "created_at": CREATED.astimezone(east),
            "resource_version": i,
        }
        for i in range(COPY_MIN_ROWS + 3)
    ]

    class Abandon(Exception):
        pass

    with pytest.raises(Abandon):
        async with ctx.write() as conn:
            await _begun(conn)
            await ctx.rows.insert(conn, endpoint_slices, rows)
            raise Abandon
    assert await _slices(ctx) == []
    async with ctx.write() as conn:
        await _begun(conn)
        await ctx.rows.insert(conn, endpoint_slices, rows)
    stored = await _slices(ctx)
    assert len(stored) == len(rows)
    async with ctx.read() as conn:
        query = select(
            endpoint_slices.c.name, endpoint_slices.c.resource_version, endpoint_slices.c.created_at
        ).order_by(endpoint_slices.c.name)
        got = [tuple(row) for row in await conn.execute(query)]
    assert got == [(r["name"], r["resource_version"], CREATED) for r in rows]


async def _imports(ctx: StoreContext) -> list[tuple[object, ...]]:
    async with ctx.read() as conn:
        query = select(
            service_imports.c.namespace, service_imports.c.name, service_imports.c.spec
        ).order_by(service_imports.c.name)
        return [tuple(row) for row in await conn.execute(query)]


def _import(name: str, spec: str) -> dict[str, object]:
    return {
        "namespace": "demo",
        "name": name,
        "spec": spec,
        "status": "{}",
        "conflict": False,
        "resource_version": 1,
        "created_at": CREATED,
    }


async def test_writes_over_several_tables_go_as_one_unit(store: Store) -> None:
    # A write transaction's last step: the rows of several tables at once (one statement
    # on PostgreSQL, a COPY beside it for many rows). Each part leaves what its own call
    # would, empty parts are skipped, and a failing part takes every other with it.
    ctx = _ctx(store)
    async with ctx.write() as conn:
        await ctx.rows.insert(conn, endpoint_slices, [ROW, {**ROW, "name": "old"}])
        await ctx.rows.insert(conn, service_imports, [_import("gone", "{}"), _import("kept", "{}")])
    many = [{**ROW, "name": f"web-{i:03}"} for i in range(2, COPY_MIN_ROWS + 2)]
    writes = [
        Write("insert", endpoint_slices, many),
        Write("update", endpoint_slices, [{**ROW, "spec": '{"v":2}'}]),
        Write.delete(endpoint_slices, [("alpha", "demo", "old")]),
        Write("insert", endpoint_slices, []),
        Write.delete(service_imports, [("demo", "gone")]),
        Write("upsert", service_imports, [_import("kept", '{"v":2}'), _import("new", "{}")]),
    ]

    class Abandon(Exception):
        pass

    with pytest.raises(Abandon):
        async with ctx.write() as conn:
            await _begun(conn)
            await ctx.rows.write(conn, writes)
            raise Abandon
    assert [row[2] for row in await _slices(ctx)] == ["old", "web-1"]
    async with ctx.write() as conn:
        await _begun(conn)
        await ctx.rows.write(conn, writes)
    slices = await _slices(ctx)
    assert [row[2] for row in slices] == sorted(["web-1", *(r["name"] for r in many)])
    assert slices[-1][4] == '{"v":2}'
    assert await _imports(ctx) == [("demo", "kept", '{"v":2}'), ("demo", "new", "{}")]

    duplicate = [
        Write("insert", endpoint_slices, [ROW]),
        Write.delete(service_imports, [("demo", "new")]),
    ]
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        async with ctx.write() as conn:
            await _begun(conn)
            await ctx.rows.write(conn, duplicate)
    assert await _imports(ctx) == [("demo", "kept", '{"v":2}'), ("demo", "new", "{}")]


async def test_a_write_first_in_its_transaction_still_joins_it(store: Store) -> None:
    # PostgreSQL: with nothing sent yet, the transaction has not begun on the driver's
    # connection; the write must begin it (not run on its own and commit), so it rolls
    # back with the rest.
    ctx = _ctx(store)

    class Abandon(Exception):
        pass

    with pytest.raises(Abandon):
        async with ctx.write() as conn:
            await ctx.rows.write(conn, [Write("insert", endpoint_slices, [ROW])])
            raise Abandon
    assert await _slices(ctx) == []


async def test_select_in_finds_the_rows_of_one_key_and_many(store: Store) -> None:
    ctx = _ctx(store)
    async with ctx.write() as conn:
        await ctx.rows.insert(
            conn, endpoint_slices, [{**ROW, "name": f"web-{i}"} for i in range(4)]
        )
    columns = ("cluster_id", "name")
    for in_transaction in (False, True):
        async with ctx.write() as conn:
            if in_transaction:
                await _begun(conn)
            for wanted in (
                [("alpha", "web-2")],
                [("alpha", "web-0"), ("alpha", "web-3"), ("beta", "web-1")],
                [],
            ):
                found = await ctx.rows.select_in(conn, endpoint_slices, columns, wanted)
                assert sorted((r["name"], r["created_at"]) for r in found) == sorted(
                    (name, CREATED) for cluster, name in wanted if cluster == "alpha"
                )


async def test_select_many_answers_each_lookup_as_select_in_would(store: Store) -> None:
    # The reads after a write's key locks, joined (one statement on PostgreSQL): each
    # lookup answers what its own `select_in` would, by column name, typed alike.
    ctx = _ctx(store)
    async with ctx.write() as conn:
        await ctx.rows.insert(
            conn, endpoint_slices, [{**ROW, "name": f"web-{i}"} for i in range(3)]
        )
        await ctx.rows.insert(conn, service_imports, [_import("kept", '{"v":1}')])
    ids = ("cluster_id", "namespace", "name")
    for in_transaction in (False, True):
        async with ctx.write() as conn:
            if in_transaction:
                await _begun(conn)
            slices, imports, nothing = await ctx.rows.select_many(
                conn,
                [
                    (endpoint_slices, ids, [("alpha", "demo", "web-2"), ("alpha", "demo", "x")]),
                    (service_imports, ("namespace", "name"), [("demo", "kept")]),
                    (service_imports, ("namespace", "name"), []),
                ],
            )
            assert [(r["name"], r["resource_version"], r["created_at"]) for r in slices] == [
                ("web-2", 1, CREATED)
            ]
            assert [(r["name"], r["spec"], r["conflict"]) for r in imports] == [
                ("kept", '{"v":1}', False)
            ]
            assert list(nothing) == []


def _pending_change(name: str, offset: int) -> dict[str, object]:
    return {
        "revision": offset,
        "cluster_id": "alpha",
        "namespace": "demo",
        "name": name,
        "type": "ADDED",
        "object": f'{{"metadata":{{"resourceVersion":"{PENDING_REVISION}"}},"n":"{name}"}}',
        "kind": "EndpointSliceExport",
    }


async def test_revisions_taken_with_the_rows_stamp_each_row_and_text(store: Store) -> None:
    # A write's last step (`locks.take_revisions_and_write`): the counter taken and the
    # rows written with it, their revisions counted from 1 until then; few rows in one
    # statement on PostgreSQL, many (COPY) after taking the counter: both leave the same.
    ctx = _ctx(store)
    for count in (2, COPY_MIN_ROWS + 1):
        before = await store.feed.current_revision()
        names = [f"s{count}-{i:03}" for i in range(count)]
        slices = [
            {**ROW, "name": name, "resource_version": i + 1} for i, name in enumerate(names)
        ]
        history = [_pending_change(name, i + 1) for i, name in enumerate(names)]
        async with ctx.write() as conn:
            newest = await take_revisions_and_write(
                conn,
                ctx,
                count,
                [
                    Write("insert", endpoint_slices, slices, relative=("resource_version",)),
                    Write(
                        "insert",
                        changes,
                        history,
                        relative=("revision",),
                        spliced=(("object", "revision"),),
                    ),
                ],
            )
        assert newest == before + count == await store.feed.current_revision()
        async with ctx.read() as conn:
            stored = {
                r.name: r.resource_version
                for r in await conn.execute(
                    select(endpoint_slices).where(endpoint_slices.c.name.in_(names))
                )
            }
            recorded = {
                r.name: (r.revision, r.object)
                for r in await conn.execute(select(changes).where(changes.c.name.in_(names)))
            }
        assert stored == {name: before + i + 1 for i, name in enumerate(names)}
        assert recorded == {
            name: (
                before + i + 1,
                f'{{"metadata":{{"resourceVersion":"{before + i + 1}"}},"n":"{name}"}}',
            )
            for i, name in enumerate(names)
        }


async def test_a_text_without_its_revisions_place_is_refused_and_nothing_written(
    store: Store,
) -> None:
    ctx = _ctx(store)
    before = await store.feed.current_revision()
    unmarked = {**_pending_change("web-1", 1), "object": "{}"}
    with pytest.raises(ValueError, match="once"):
        async with ctx.write() as conn:
            await take_revisions_and_write(
                conn,
                ctx,
                1,
                [
                    Write("insert", endpoint_slices, [ROW], relative=("resource_version",)),
                    Write(
                        "insert",
                        changes,
                        [unmarked],
                        relative=("revision",),
                        spliced=(("object", "revision"),),
                    ),
                ],
            )
    assert await _slices(ctx) == []
    assert await store.feed.current_revision() == before


async def test_a_patch_shares_a_batch_with_puts_and_fails_alone(store: Store) -> None:
    """An annotation patch is one more mutation of the group commit: a stale
    resourceVersion or a missing record refuses that patch alone, the rest commit."""
    first = await store.exports.put("alpha", make_export("alpha", name="a"))
    version = first.object.metadata.resource_version
    assert version is not None
    good, stale, missing, put = await asyncio.gather(
        store.exports.patch_annotations(
            "alpha", "demo", "a", resource_version=version, annotations={"team": "web"}
        ),
        store.exports.patch_annotations(
            "alpha", "demo", "a", resource_version="999999", annotations={"team": "db"}
        ),
        store.exports.patch_annotations(
            "beta", "demo", "a", resource_version=version, annotations={"team": "db"}
        ),
        store.exports.put("beta", make_export("beta", name="b")),
        return_exceptions=True,
    )
    assert not isinstance(good, BaseException) and good.metadata.annotations == {"team": "web"}
    assert not isinstance(put, BaseException) and put.created
    assert isinstance(stale, Conflict)
    assert isinstance(missing, NotFound)
    stored = await store.exports.get("alpha", "demo", "a")
    assert stored.metadata.annotations == {"team": "web"}
    assert int(stored.metadata.resource_version or 0) > int(version)
