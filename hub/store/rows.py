"""How the store writes many rows at once: one `RowWriter` per back end, chosen once.

Every write of the store ends in a few batched statements over one table: insert these
rows, update those by primary key, upsert, delete by primary key. The two databases want
them said differently, and that difference is the only one the writers would otherwise
have to ask about (`if postgres:` in each writer was the old shape of this file's job):

* PostgreSQL (`PostgresRows`): each column travels as ONE array parameter and the rows are
  read from `unnest(…)`, so a 500-row batch is one execution. With
  `executemany` it was one Bind/Execute per row, an executor start per row on the server
  and SQLAlchemy's per-row parameter processing in the hub: about half of a sync's
  statement time. Lookups of many keys are a semi-join on unnested arrays too: a row-value
  `IN` list of hundreds of pairs plans as hundreds of OR branches, and SQLAlchemy compiles
  it anew for every batch size.
  Inserts of many rows go by `COPY … FROM STDIN` (binary) instead: the fastest way the
  database takes rows at all (bench 2's ceiling), and asyncpg encodes a COPY record with
  each column's codec directly, where an array parameter pays a type check per element
  (a sync create's array encoding was a fifth of the store's CPU per export). It runs on
  the same asyncpg connection inside the caller's transaction, so it commits or rolls
  back with the rest of the write. A few rows (a PUT's one record) keep the single
  `unnest` statement: COPY's extra protocol steps are not worth it for them.
* SQLite (`SQLiteRows`): `executemany` and row-value `IN` lists. Its statements are
  function calls in the same process; there is nothing to save by arrays, which it lacks.

A write transaction ends in several such statements over different tables (the export
records, their change rows, the ServiceImports); `write` takes them together. PostgreSQL
then runs them as ONE statement, each a data-modifying `WITH` part: every statement costs
the hub a round trip (a loopback send wakes the server inside the hub's own system call)
and its per-statement work, and a group-committed PUT batch paid four or five of them for
its rows. The parts never touch the same row (a write changes each record
once, and a key either keeps exports and has its ServiceImport upserted, or has none left
and has it deleted), which is what PostgreSQL requires of parts sharing one snapshot.

The revision counter can be the first part of that statement (`write_with_revisions`,
reached through `locks.take_revisions_and_write`): the rows then carry revisions counted
from 1 (`Write.relative`) and texts holding `PENDING_REVISION` where their revision goes
(`Write.spliced`), and the statement adds the counter's value. A writer then holds the
counter, which every writer queues on, over that statement and its COMMIT only. A write
with rows for COPY takes the revisions first, as before (a sync's batch: one round trip
more is nothing beside its rows).

Reads after a lock are joined the same way (`select_many`): the rows of several tables by
their keys in one statement, one array of row records per table, which asyncpg decodes
by column name (a write's reads after its key locks were three or four round trips).

On PostgreSQL these statements, and `select_in`'s lookup of many keys, go to asyncpg's own
connection under the caller's SQLAlchemy one once its transaction has begun there (as
COPY must anyway): they join that transaction, and skip SQLAlchemy's per-statement work,
measured at about three times asyncpg's own for a small statement (~100 of ~140 µs of hub
CPU on this host). Their SQL is fixed text per table and column set, built once. Before
the transaction has begun on the driver, SQLAlchemy runs the same text and begins it.

`StoreContext` picks the writer from the back end when it is built; writers call
`ctx.rows.…` and never ask which database they are on. Updates and deletes join on the
primary key; every caller has locked the rows' keys first (`hub.store.locks`), so the
order in which a statement meets its rows cannot deadlock.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal, Protocol, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Integer,
    String,
    Table,
    and_,
    bindparam,
    func,
    select,
    tuple_,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store.tables import UTCDateTime

Row = Mapping[str, Any]

# Where a row's revision goes in a text written before the revision is known (`Write`):
# a token no stored text holds (random per process; `splice` checks it is there once).
PENDING_REVISION = f"pending-revision-{secrets.token_hex(16)}"


def splice(text: str, revision: int) -> str:
    """`text` with its one `PENDING_REVISION` replaced by `revision`."""
    if text.count(PENDING_REVISION) != 1:
        raise ValueError("a text written before its revision holds the pending mark once")
    return text.replace(PENDING_REVISION, str(revision))


@dataclass(frozen=True)
class Write:
    """One batched statement of a `RowWriter.write`: rows of one table, all with the same
    columns (for a delete, the primary-key columns only)."""

    # "add": insert the rows, or add their non-key columns to the stored row's (a counter).
    op: Literal["insert", "update", "upsert", "delete", "add"]
    table: Table
    rows: Sequence[Row]
    # Written with the revisions they are taken with (`RowWriter.write_with_revisions`):
    # `relative` columns hold a revision counted from 1 (the first the write takes), and
    # each `spliced` (text column, relative column) pair's text holds `PENDING_REVISION`
    # once, where that row's revision goes.
    relative: tuple[str, ...] = ()
    spliced: tuple[tuple[str, str], ...] = ()

    def resolved(self, first: int) -> Write:
        """This write with its revisions known: `first` is the first the write took."""
        if not self.relative:
            return self
        rows = []
        for row in self.rows:
            out = dict(row)
            for column in self.relative:
                out[column] = row[column] + first - 1
            for text, column in self.spliced:
                out[text] = splice(row[text], out[column])
            rows.append(out)
        return Write(self.op, self.table, rows)

    @classmethod
    def delete(cls, table: Table, keys: Sequence[tuple[Any, ...]]) -> Write:
        names = primary_key(table)
        return cls("delete", table, [dict(zip(names, key, strict=True)) for key in keys])


class RowWriter(Protocol):
    """Batched row statements over one table; every row of a call has the same columns."""

    async def select_in(
        self,
        conn: AsyncConnection,
        table: Table,
        columns: Sequence[str],
        keys: Sequence[tuple[str, ...]],
    ) -> Sequence[Mapping[Any, Any]]:
        """Every row of `table` whose text `columns` are one of `keys`, as mappings by
        column name (an indexed lookup per key)."""
        ...

    async def write(self, conn: AsyncConnection, writes: Sequence[Write]) -> None:
        """Run `writes` as one unit (on PostgreSQL one statement, see above). No two of
        them may touch the same row, so the order they run in does not matter."""
        ...

    async def select_many(
        self, conn: AsyncConnection, lookups: Sequence[Lookup]
    ) -> list[Sequence[Mapping[Any, Any]]]:
        """`select_in` of each lookup (table, key columns, keys), answered in their order;
        on PostgreSQL in one statement (one round trip however many tables)."""
        ...

    def where_in(
        self, columns: Sequence[ColumnElement[Any]], rows: Sequence[tuple[str, ...]]
    ) -> ColumnElement[bool]:
        """`(columns…) IN rows` for text columns, planned as an indexed lookup per row."""
        ...

    async def insert(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        """Insert `rows`."""
        ...

    async def update(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        """Set each row's other columns on the row its primary-key columns name."""
        ...

    async def upsert(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        """Insert `rows`; a row whose primary key exists has its other columns set."""
        ...

    async def delete(
        self, conn: AsyncConnection, table: Table, keys: Sequence[tuple[Any, ...]]
    ) -> None:
        """Delete the rows whose primary keys (in the table's key column order) are `keys`."""
        ...


# (table, text key columns, keys): one `select_in` of a `select_many`.
Lookup = tuple[Table, Sequence[str], Sequence[tuple[str, ...]]]


def primary_key(table: Table) -> tuple[str, ...]:
    return tuple(column.name for column in table.primary_key.columns)


def _columns_of(rows: Sequence[Row]) -> tuple[str, ...]:
    columns = tuple(rows[0])
    if any(tuple(row) != columns for row in rows[1:]):
        raise ValueError(f"every row of one statement needs the columns {columns}")
    return columns


def _single(columns: Sequence[ColumnElement[Any]], row: tuple[Any, ...]) -> ColumnElement[bool]:
    return and_(*(column == value for column, value in zip(columns, row, strict=True)))


# --- PostgreSQL ----------------------------------------------------------------------------

# (parameter and unnested column name, PostgreSQL element type)
Columns = tuple[tuple[str, str], ...]


def _unnest(columns: Columns, first: int) -> str:
    """`unnest($first::T[], …) AS v(a, …)`: the rows of one array per column, bound as
    the positional parameters from `first` on."""
    args = ", ".join(f"${first + i}::{sql_type}[]" for i, (_, sql_type) in enumerate(columns))
    return f"unnest({args}) AS v({', '.join(name for name, _ in columns)})"


def _utc(value: datetime) -> datetime:
    """A timestamp bound as `UTCDateTime` binds it: aware, in UTC; naive is refused."""
    if value.tzinfo is None:
        raise ValueError(f"timestamp must be an aware datetime, got {value!r}")
    return value.astimezone(UTC)


def _sql_type(table: Table, column: str) -> str:
    """The PostgreSQL element type of one unnested array."""
    kind = table.c[column].type
    if isinstance(kind, UTCDateTime):
        return "TIMESTAMPTZ"
    if isinstance(kind, Boolean):
        return "BOOLEAN"
    if isinstance(kind, BigInteger | Integer):
        return "BIGINT"
    if isinstance(kind, String):  # Text too
        return "TEXT"
    raise TypeError(f"{table.name}.{column}: no array type for {kind!r}")


@cache
def _typed(table: Table, columns: tuple[str, ...]) -> Columns:
    return tuple((name, _sql_type(table, name)) for name in columns)


@cache
def _statement(
    op: str,
    table: Table,
    columns: Columns,
    first: int,
    relative: tuple[str, ...] = (),
    spliced: tuple[tuple[str, str], ...] = (),
    base: str = "",
) -> str:
    """The SQL of one `Write`, its arrays bound as `$first`, `$first + 1`, … With `base`
    (an expression: the revision before the first the write takes), its `relative`
    columns are counted from it and its `spliced` texts get their rows' revisions."""
    rows = _unnest(columns, first)
    keys = primary_key(table)
    where = " AND ".join(f"{table.name}.{key} = v.{key}" for key in keys)
    texts = dict(spliced)

    def value(name: str) -> str:
        if name in relative:
            return f"v.{name} + {base}"
        if name in texts:
            return f"replace(v.{name}, '{PENDING_REVISION}', (v.{texts[name]} + {base})::text)"
        return f"v.{name}"

    if op == "delete":
        return f"DELETE FROM {table.name} USING {rows} WHERE {where}"
    if op == "update":
        sets = ", ".join(f"{name} = {value(name)}" for name, _ in columns if name not in keys)
        return f"UPDATE {table.name} SET {sets} FROM {rows} WHERE {where}"
    names = ", ".join(name for name, _ in columns)
    values = ", ".join(value(name) for name, _ in columns)
    insert = f"INSERT INTO {table.name} ({names}) SELECT {values} FROM {rows}"
    if op == "insert":
        return insert
    if op == "add":
        sets = ", ".join(
            f"{name} = {table.name}.{name} + EXCLUDED.{name}"
            for name, _ in columns
            if name not in keys
        )
    else:
        sets = ", ".join(f"{name} = EXCLUDED.{name}" for name, _ in columns if name not in keys)
    return f"{insert} ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}"


@cache
def _together(parts: tuple[str, ...]) -> str:
    """One statement of `parts`: itself when alone, else each a data-modifying WITH part
    (each runs once, to completion, whether or not anything reads it)."""
    if len(parts) == 1:
        return parts[0]
    steps = ", ".join(f"w{i} AS ({part})" for i, part in enumerate(parts))
    return f"WITH {steps} SELECT 1"


@cache
def _with_revisions(counter: str, parts: tuple[str, ...]) -> str:
    """One statement taking the revisions (`counter`: an UPDATE … RETURNING value whose
    parameters are `$1`, the count, and `$2`) and writing `parts`, which read the revision
    before the first taken as `(SELECT value - $1 FROM r)`; answers the newest."""
    steps = "".join(f", w{i} AS ({part})" for i, part in enumerate(parts))
    return f"WITH r AS ({counter}){steps} SELECT value FROM r"


REVISION_BASE = "(SELECT value - $1 FROM r)"


@cache
def _select_many(lookups: tuple[tuple[Table, tuple[str, ...]], ...]) -> str:
    """One row: for each (table, key columns), an array of the table's rows whose key
    columns are one of the unnested arrays' rows (asyncpg decodes each element as a record
    by column name)."""
    selects = []
    first = 1
    for index, (table, columns) in enumerate(lookups):
        names = ", ".join(columns)
        arrays = ", ".join(f"${first + i}::TEXT[]" for i in range(len(columns)))
        first += len(columns)
        selects.append(
            f"ARRAY(SELECT x FROM {table.name} AS x WHERE ({names}) IN "
            f"(SELECT * FROM unnest({arrays}))) AS r{index}"
        )
    return f"SELECT {', '.join(selects)}"


@cache
def _select_in(table: Table, columns: tuple[str, ...]) -> str:
    """Every row of `table` whose `columns` are one of the unnested arrays' rows."""
    names = ", ".join(columns)
    arrays = ", ".join(f"${i + 1}::TEXT[]" for i in range(len(columns)))
    return f"SELECT * FROM {table.name} WHERE ({names}) IN (SELECT * FROM unnest({arrays}))"


def _arrays(columns: Columns, rows: Sequence[Row]) -> list[list[Any]]:
    arrays: list[list[Any]] = []
    for name, sql_type in columns:
        values = [row[name] for row in rows]
        if sql_type == "TIMESTAMPTZ":  # as `UTCDateTime` binds them: aware, in UTC
            values = [None if v is None else _utc(v) for v in values]
        arrays.append(values)
    return arrays


async def _driver(conn: AsyncConnection) -> Any:
    """asyncpg's own connection under `conn` when the caller's transaction has begun on it,
    else None: a statement sent there joins that transaction (and commits or rolls back
    with it) without SQLAlchemy's per-statement work, which measured three times asyncpg's
    own (~100 of ~140 µs of hub CPU for a small statement on this host)."""
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    return driver if driver is not None and driver.is_in_transaction() else None


async def _run(
    conn: AsyncConnection, driver: Any, sql: str, args: Sequence[Any]
) -> Sequence[Mapping[Any, Any]]:
    if driver is not None:
        return cast(Sequence[Mapping[Any, Any]], await driver.fetch(sql, *args))
    # Nothing has begun the transaction on the driver yet: SQLAlchemy begins it.
    result = await conn.exec_driver_sql(sql, tuple(args))
    return result.mappings().all() if result.returns_rows else []


async def fetch(conn: AsyncConnection, sql: str, *args: Any) -> Sequence[Mapping[Any, Any]]:
    """PostgreSQL: run `sql` (parameters `$1`, `$2`, …) in the caller's transaction, on the
    driver's connection once the transaction has begun there (see the module docstring);
    answers its rows by column name."""
    return await _run(conn, await _driver(conn), sql, args)


COPY_MIN_ROWS = 32


async def _copy(driver: Any, table: Table, columns: Columns, rows: Sequence[Row]) -> None:
    """`COPY` `rows` into `table` on the driver's connection, in the caller's transaction."""
    names = [name for name, _ in columns]
    records = list(zip(*_arrays(columns, rows), strict=True))
    await driver.copy_records_to_table(table.name, records=records, columns=names)


class PostgresRows:
    """Each statement once per batch, its columns as arrays read through `unnest`; many
    rows' inserts by COPY."""

    def where_in(
        self, columns: Sequence[ColumnElement[Any]], rows: Sequence[tuple[str, ...]]
    ) -> ColumnElement[bool]:
        if len(rows) == 1:
            return _single(columns, rows[0])
        arrays = select(
            *(
                func.unnest(bindparam(None, [row[i] for row in rows], type_=ARRAY(String())))
                for i in range(len(columns))
            )
        )
        return tuple_(*columns).in_(arrays)

    async def write(self, conn: AsyncConnection, writes: Sequence[Write]) -> None:
        driver = await _driver(conn)
        parts: list[str] = []
        args: list[Any] = []
        for w in writes:
            if not w.rows:
                continue
            columns = _typed(w.table, _columns_of(w.rows))
            if w.op == "insert" and len(w.rows) >= COPY_MIN_ROWS and driver is not None:
                await _copy(driver, w.table, columns, w.rows)
                continue
            parts.append(_statement(w.op, w.table, columns, len(args) + 1))
            args.extend(_arrays(columns, w.rows))
        if not parts:
            return
        await _run(conn, driver, _together(tuple(parts)), args)

    async def write_with_revisions(
        self,
        conn: AsyncConnection,
        writes: Sequence[Write],
        *,
        count: int,
        counter: str,
        counter_args: Sequence[Any],
    ) -> int | None:
        """`writes` in ONE statement with `counter` (the revision counter's UPDATE, `$1`
        the count): the revision row is taken by the statement that writes the rows, so a
        write holds it over that statement and its COMMIT only. None (nothing done) when a
        write is for COPY (many rows): the caller takes the revisions first."""
        if any(w.op == "insert" and len(w.rows) >= COPY_MIN_ROWS for w in writes):
            return None
        parts: list[str] = []
        args: list[Any] = [count, *counter_args]
        for w in writes:
            if not w.rows:
                continue
            columns = _typed(w.table, _columns_of(w.rows))
            for text, _ in w.spliced:  # fail before anything is written
                for row in w.rows:
                    if row[text].count(PENDING_REVISION) != 1:
                        raise ValueError("a text written before its revision holds the mark once")
            parts.append(
                _statement(
                    w.op,
                    w.table,
                    columns,
                    len(args) + 1,
                    w.relative,
                    w.spliced,
                    REVISION_BASE if w.relative else "",
                )
            )
            args.extend(_arrays(columns, w.rows))
        rows = await fetch(conn, _with_revisions(counter, tuple(parts)), *args)
        return int(rows[0]["value"])

    async def select_many(
        self, conn: AsyncConnection, lookups: Sequence[Lookup]
    ) -> list[Sequence[Mapping[Any, Any]]]:
        wanted = [(i, lookup) for i, lookup in enumerate(lookups) if lookup[2]]
        out: list[Sequence[Mapping[Any, Any]]] = [[] for _ in lookups]
        if not wanted:
            return out
        shape = tuple((table, tuple(columns)) for _, (table, columns, _) in wanted)
        args: list[list[str]] = []
        for _, (_, columns, keys) in wanted:
            args.extend([key[i] for key in keys] for i in range(len(columns)))
        (row,) = await fetch(conn, _select_many(shape), *args)
        for position, (index, _) in enumerate(wanted):
            out[index] = row[f"r{position}"]
        return out

    async def select_in(
        self,
        conn: AsyncConnection,
        table: Table,
        columns: Sequence[str],
        keys: Sequence[tuple[str, ...]],
    ) -> Sequence[Mapping[Any, Any]]:
        if not keys:
            return []
        arrays = [[key[i] for key in keys] for i in range(len(columns))]
        return await fetch(conn, _select_in(table, tuple(columns)), *arrays)

    async def insert(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        await self.write(conn, [Write("insert", table, rows)])

    async def update(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        await self.write(conn, [Write("update", table, rows)])

    async def upsert(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        await self.write(conn, [Write("upsert", table, rows)])

    async def delete(
        self, conn: AsyncConnection, table: Table, keys: Sequence[tuple[Any, ...]]
    ) -> None:
        await self.write(conn, [Write.delete(table, keys)])


# --- SQLite --------------------------------------------------------------------------------


def _by_key(table: Table) -> ColumnElement[bool]:
    return and_(*(table.c[name] == bindparam(f"k_{name}") for name in primary_key(table)))


class SQLiteRows:
    """`executemany`: one statement, called per row inside the same process."""

    async def select_in(
        self,
        conn: AsyncConnection,
        table: Table,
        columns: Sequence[str],
        keys: Sequence[tuple[str, ...]],
    ) -> Sequence[Mapping[Any, Any]]:
        if not keys:
            return []
        where = self.where_in([table.c[name] for name in columns], keys)
        return (await conn.execute(select(table).where(where))).mappings().all()

    async def select_many(
        self, conn: AsyncConnection, lookups: Sequence[Lookup]
    ) -> list[Sequence[Mapping[Any, Any]]]:
        return [await self.select_in(conn, t, columns, keys) for t, columns, keys in lookups]

    async def write(self, conn: AsyncConnection, writes: Sequence[Write]) -> None:
        for w in writes:  # in-process calls: nothing to gain by joining them
            if w.op == "delete":
                names = primary_key(w.table)
                await self.delete(conn, w.table, [tuple(r[n] for n in names) for r in w.rows])
            else:
                await getattr(self, w.op)(conn, w.table, w.rows)

    def where_in(
        self, columns: Sequence[ColumnElement[Any]], rows: Sequence[tuple[str, ...]]
    ) -> ColumnElement[bool]:
        if len(rows) == 1:
            return _single(columns, rows[0])
        return tuple_(*columns).in_(list(rows))

    async def insert(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        if rows:
            _columns_of(rows)  # the same refusal as PostgreSQL's
            await conn.execute(table.insert(), list(rows))

    async def update(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        if not rows:
            return
        keys = primary_key(table)
        values = [name for name in _columns_of(rows) if name not in keys]
        statement = (
            table.update()
            .where(_by_key(table))
            .values({name: bindparam(f"v_{name}") for name in values})
        )
        await conn.execute(
            statement,
            [
                {
                    **{f"k_{name}": row[name] for name in keys},
                    **{f"v_{name}": row[name] for name in values},
                }
                for row in rows
            ],
        )

    async def upsert(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        if not rows:
            return
        keys = primary_key(table)
        statement = sqlite_insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=[table.c[name] for name in keys],
            set_={name: statement.excluded[name] for name in _columns_of(rows) if name not in keys},
        )
        await conn.execute(statement, list(rows))

    async def add(self, conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
        if not rows:
            return
        keys = primary_key(table)
        statement = sqlite_insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=[table.c[name] for name in keys],
            set_={
                name: table.c[name] + statement.excluded[name]
                for name in _columns_of(rows)
                if name not in keys
            },
        )
        await conn.execute(statement, list(rows))

    async def delete(
        self, conn: AsyncConnection, table: Table, keys: Sequence[tuple[Any, ...]]
    ) -> None:
        if keys:
            names = primary_key(table)
            await conn.execute(
                table.delete().where(_by_key(table)),
                [
                    {f"k_{name}": value for name, value in zip(names, key, strict=True)}
                    for key in keys
                ],
            )
