"""Many rows in one PostgreSQL statement: each column travels as one array parameter.

A sync batch writes 500 records with four `executemany` statements (insert or update the
records, stamp their verdicts, insert their change rows, update their ServiceImports).
`executemany` sends one Bind/Execute per row: PostgreSQL starts an executor per row, and
SQLAlchemy processes every row's parameters in Python. Those four statements took about
half of a 10,000-export sync. Here a statement takes one array per column and reads its
rows from `unnest(…)`: one execution per batch, and one list per column to build.

PostgreSQL only: `rows.PostgresRows` builds its statements from these; SQLite keeps
`executemany` (`rows.SQLiteRows`). Updates join on the primary key; every key of a batch
is already locked (`locks.lock_keys`), so the join's row-lock order cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection

# (parameter and unnested column name, PostgreSQL element type)
Columns = tuple[tuple[str, str], ...]


def unnest_clause(columns: Columns) -> str:
    """`unnest(CAST(:a AS T[]), …) AS v(a, …)`: the rows of one array per column."""
    args = ", ".join(f"CAST(:{name} AS {sql_type}[])" for name, sql_type in columns)
    return f"unnest({args}) AS v({', '.join(name for name, _ in columns)})"


@cache
def insert_statement(
    table: str, columns: Columns, constants: tuple[tuple[str, str], ...]
) -> TextClause:
    """`INSERT INTO table (columns…, constant columns…) SELECT … FROM unnest(…)`.

    `constants` are (column, SQL expression) pairs every row shares.
    """
    names = [name for name, _ in columns] + [name for name, _ in constants]
    values = [f"v.{name}" for name, _ in columns] + [expr for _, expr in constants]
    return text(
        f"INSERT INTO {table} ({', '.join(names)}) "
        f"SELECT {', '.join(values)} FROM {unnest_clause(columns)}"
    )


@cache
def update_statement(table: str, keys: tuple[str, ...], columns: Columns) -> TextClause:
    """`UPDATE table SET col = v.col … FROM unnest(…) WHERE table.key = v.key …`.

    `columns` lists the key columns first (named as in `keys`), then the columns set.
    """
    sets = ", ".join(f"{name} = v.{name}" for name, _ in columns if name not in keys)
    where = " AND ".join(f"{table}.{key} = v.{key}" for key in keys)
    return text(f"UPDATE {table} SET {sets} FROM {unnest_clause(columns)} WHERE {where}")


def utc(value: datetime) -> datetime:
    """A timestamp bound as `UTCDateTime` binds it: aware, in UTC; naive is refused."""
    if value.tzinfo is None:
        raise ValueError(f"timestamp must be an aware datetime, got {value!r}")
    return value.astimezone(UTC)


async def execute(
    conn: AsyncConnection,
    statement: TextClause,
    columns: Columns,
    rows: Sequence[Mapping[str, Any]],
    **shared: Any,
) -> None:
    """Run `statement` once over `rows` (dicts keyed by the names in `columns`)."""
    arrays = {name: [row[name] for row in rows] for name, _ in columns}
    await conn.execute(statement, {**arrays, **shared})
