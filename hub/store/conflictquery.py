"""Fleet-wide: which exports disagree with their key's decided values, on which property.

The write path judges one key at a time (`hub.conflicts`) and stores each export's verdict;
that answers "does this export conflict?" but not "which clusters of the fleet run another
`type` than the service's winner, and what do they run?". This module answers that in ONE
SQL query over the decided-property columns of `exports` (docs/reference.md#conflicts's "in SQL"),
never loading a spec into Python:

    SELECT … FROM (
      SELECT namespace, name, cluster_id, type, …,
             first_value(cluster_id) OVER (PARTITION BY namespace, name
                 ORDER BY export_creation_timestamp, cluster_id) AS winner,
             first_value(type) OVER (…the same window…) AS decided_type, …
      FROM exports [WHERE namespace = ? AND name = ?]
    ) AS ranked
    WHERE type IS DISTINCT FROM decided_type OR …
    ORDER BY namespace, name, cluster_id

The window is docs/reference.md#conflicts's precedence order (the `ix_exports_key_precedence`
index), so the first row of each partition is the key's winner, on PostgreSQL and SQLite alike.
Filters that keep or drop whole keys (namespace, name, the continue token's key) go inside the
window; the cluster filter and the page's exact start go outside it, so that a cluster's
exports are still compared with a winner in another cluster.

The properties are exactly the judge's decided fields, the DECIDED rows of the one table
(`shared.properties`), compared as the judge compares them: plain text for the
enumerations, canonical JSON for the rest (sorted keys, so equal values are equal texts),
and only the part a row names where it names one (`compare_path`: the client-IP timeout
of `sessionAffinityConfig`, where `{}` and `null` both mean none).
Ports and IP families are not decided by the winner but merged (docs/reference.md#conflicts), so no
export "disagrees with the decided value" there; their conflicts stay in each export's verdict.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, ColumnElement, or_, select, tuple_
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement, func
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import Text

from hub.store import paging
from hub.store.context import StoreContext
from hub.store.results import Page
from hub.store.revisions import read_current_revision
from hub.store.tables import exports
from shared import properties
from shared.models import ExportConflict, PropertyConflict

_LIST_KIND = "conflicts"


class JsonPathText(FunctionElement[str]):
    """The value at a path inside a canonical-JSON column, as text (NULL when missing):
    the part of a property that the judge compares when its row names one
    (`ImportProperty.compare_path`, e.g. `sessionAffinityConfig`'s client-IP timeout)."""

    type = Text()
    inherit_cache = True
    name = "json_path_text"
    # The path is part of the compiled SQL, so it is part of the statement's cache key.
    _traverse_internals = [
        *FunctionElement._traverse_internals,
        ("path", InternalTraversal.dp_plain_obj),
    ]

    def __init__(self, column: ColumnElement[Any], path: tuple[str, ...]) -> None:
        self.path = path
        super().__init__(column)


def _json_path_literal(path: tuple[str, ...], *, sqlite: bool) -> str:
    for step in path:
        # The path comes from the table in code, never from a request; refuse anything
        # that would need quoting rather than quote it.
        if not step.isidentifier():
            raise ValueError(f"compare path step {step!r} is not a plain name")
    return "$." + ".".join(path) if sqlite else "{" + ",".join(path) + "}"


@compiles(JsonPathText, "sqlite")
def _sqlite_path(element: JsonPathText, compiler: SQLCompiler, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    path = _json_path_literal(element.path, sqlite=True)
    return f"CAST(json_extract({column}, '{path}') AS TEXT)"


@compiles(JsonPathText, "postgresql")
def _postgresql_path(element: JsonPathText, compiler: SQLCompiler, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    path = _json_path_literal(element.path, sqlite=False)
    return f"(CAST({column} AS jsonb) #>> '{path}')"


def _winners(value: ColumnElement[Any]) -> ColumnElement[Any]:
    """`value` of the key's winner, on every row of the key: docs/reference.md#conflicts's
    precedence order."""
    return func.first_value(value).over(
        partition_by=(exports.c.namespace, exports.c.name),
        order_by=(exports.c.export_creation_timestamp, exports.c.cluster_id),
    )


_Part = Callable[[Column[Any]], ColumnElement[Any]]


@dataclass(frozen=True)
class DecidedColumn:
    """A decided property of docs/reference.md#conflicts as stored: its column, and how SQL compares
    it."""

    index: int  # names its result columns
    field: str
    reason: str
    column: Column[Any]
    json: bool  # the column holds canonical JSON (answered parsed)
    # What SQL compares when not the column itself (the judge compares a part of it).
    compared_part: _Part | None = None

    @property
    def labels(self) -> tuple[str, str]:
        """Result columns: this export's value, and the winner's."""
        return f"value_{self.index}", f"decided_{self.index}"

    @property
    def compared(self) -> tuple[str, str]:
        """Result columns the disagreement is read from: the values, or their parts."""
        if self.compared_part is None:
            return self.labels
        return f"part_{self.index}", f"decided_part_{self.index}"

    def select(self) -> list[ColumnElement[Any]]:
        """This export's value and the winner's (and their compared parts) as columns."""
        value, decided = self.labels
        columns: list[ColumnElement[Any]] = [
            self.column.label(value),
            _winners(self.column).label(decided),
        ]
        if self.compared_part is not None:
            part, decided_part = self.compared
            compared = self.compared_part(self.column)
            columns += [compared.label(part), _winners(compared).label(decided_part)]
        return columns

    def differs(self, row: Any) -> bool:
        part, decided_part = self.compared
        return bool(row[part] != row[decided_part])

    def answer(self, text: str | None) -> Any:
        return json.loads(text) if self.json and text is not None else text


def _decided_column(index: int, prop: properties.ImportProperty) -> DecidedColumn:
    path = prop.compare_path
    return DecidedColumn(
        index=index,
        field=prop.name,
        reason=prop.reason,
        column=exports.c[prop.column],
        json=prop.storage is not properties.Storage.WORD,
        compared_part=(lambda column: JsonPathText(column, path)) if path else None,
    )


# The decided rows of the one table, in its order; a row whose column the table module
# lacks fails here, at import, not in a query.
DECIDED: tuple[DecidedColumn, ...] = tuple(
    _decided_column(i, prop) for i, prop in enumerate(properties.DECIDED)
)


def disagreement_query(
    *,
    namespace: str | None = None,
    name: str | None = None,
    cluster_id: str | None = None,
    after: tuple[str, ...] | None = None,
    limit: int | None = None,
) -> Any:
    """The window-function query of the module doc, filtered, in key order, paged."""
    columns: list[ColumnElement[Any]] = [
        exports.c.namespace,
        exports.c.name,
        exports.c.cluster_id,
        _winners(exports.c.cluster_id).label("winner"),
    ]
    for decided in DECIDED:
        columns += decided.select()
    inner = select(*columns)
    if namespace is not None:
        inner = inner.where(exports.c.namespace == namespace)
    if name is not None:
        inner = inner.where(exports.c.name == name)
    if after is not None:
        # Whole keys only inside the window: the page's key may still have rows to come.
        inner = inner.where(tuple_(exports.c.namespace, exports.c.name) >= tuple_(*after[:2]))
    ranked = inner.subquery("ranked")
    query = (
        select(ranked)
        .where(
            or_(
                *(
                    ranked.c[d.compared[0]].is_distinct_from(ranked.c[d.compared[1]])
                    for d in DECIDED
                )
            )
        )
        .order_by(ranked.c.namespace, ranked.c.name, ranked.c.cluster_id)
    )
    if cluster_id is not None:
        query = query.where(ranked.c.cluster_id == cluster_id)
    if after is not None:
        query = query.where(
            tuple_(ranked.c.namespace, ranked.c.name, ranked.c.cluster_id) > tuple_(*after)
        )
    if limit is not None:
        query = query.limit(limit + 1)
    return query


def _conflict(row: Any) -> ExportConflict:
    properties = [
        PropertyConflict(
            field=decided.field,
            reason=decided.reason,
            value=decided.answer(row[decided.labels[0]]),
            decided_value=decided.answer(row[decided.labels[1]]),
        )
        for decided in DECIDED
        if decided.differs(row)
    ]
    return ExportConflict(
        namespace=row["namespace"],
        name=row["name"],
        cluster=row["cluster_id"],
        winner=row["winner"],
        properties=properties,
    )


class ConflictQuery:
    """`Store.conflicts`: the fleet's disagreements with decided values, a page at a time."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx

    async def list(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        cluster_id: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Page[ExportConflict]:
        """Exports that differ from their key's winner on a decided property, in
        (namespace, name, cluster) order; the winner itself never appears.

        ValueError on a malformed continue token or a limit below 1.
        """
        paging.check_limit(limit)
        after = (
            paging.decode(_LIST_KIND, continue_token, width=3)
            if continue_token is not None
            else None
        )
        query = disagreement_query(
            namespace=namespace, name=name, cluster_id=cluster_id, after=after, limit=limit
        )
        async with self._ctx.read() as conn:
            # The revision first, as every list does: a watch from it misses nothing.
            revision = await read_current_revision(conn)
            rows = (await conn.execute(query)).mappings().all()
        rows, token = paging.cut(
            rows, limit, _LIST_KIND, lambda r: (r["namespace"], r["name"], r["cluster_id"])
        )
        return Page(
            items=[_conflict(r) for r in rows],
            resource_version=str(revision),
            continue_token=token,
        )
