"""A member cluster's scope and quotas, as its writes meet them
(docs/reference.md#scope-and-limits).

**Scope.** A MemberCluster's `spec.exportNamespaces` is read with the cluster's row in the
first step of every write (`locks.lock_clusters`), so checking it costs no statement: an
export or slice written outside it is refused alone (`Forbidden`, 403 naming the rule).
Withdrawals always pass, so that a narrowed scope can be cleaned up.

**Quotas.** `cluster_usage` holds each cluster's count of exports and EndpointSliceExports.
Every write that creates or deletes records adds its difference to its clusters' rows in
the same transaction, in the one statement that writes its rows (`rows.Write("add", …)`),
so a quota costs the write path neither a statement nor a count of the cluster's rows.
The count is read with the cluster's row (the same first step, no lock on it), and a create
that would pass the limit is refused alone (`Forbidden` naming the limit); updates and
deletes always pass.

The counts are written only while the writer holds the revision counter (the last lock of
every writer, `hub.store.locks`), so their updates are ordered and cannot deadlock, and
each is exact. The check reads the count before that lock: on PostgreSQL two transactions
creating records of one cluster at the same moment may both see room for their creates, so
a quota can be passed by at most what the transactions in flight for that cluster create
together (one group-committed batch per replica, or a sync's batches); SQLite has one
writer and is exact. A full-state sync is judged by the size it asks for (its final
count), before it writes anything.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store.errors import Forbidden, NotFound
from hub.store.rows import Write
from hub.store.tables import cluster_usage, clusters
from shared import scope


@dataclass(frozen=True)
class Quotas:
    """The hub's `--max-exports-per-cluster` and `--max-endpointslices-per-cluster`."""

    exports: int = 10_000
    endpoint_slices: int = 100_000


# The kinds a quota counts: (usage column, the flag that sets the limit, a word for them).
EXPORTS = ("exports", "--max-exports-per-cluster", "exports")
SLICES = ("endpoint_slices", "--max-endpointslices-per-cluster", "EndpointSliceExports")
Kind = tuple[str, str, str]


def usage_column(kind: Kind) -> ColumnElement[Any]:
    """The cluster's current count of `kind`, as a column of a query over `clusters` (a
    scalar subquery by primary key: no join, so a `FOR KEY SHARE` locks the cluster alone)."""
    column = cluster_usage.c[kind[0]]
    return (
        select(column)
        .where(cluster_usage.c.cluster_id == clusters.c.name)
        .scalar_subquery()
        .label(f"used_{kind[0]}")
    )


def limit_of(quotas: Quotas, kind: Kind) -> int:
    return quotas.exports if kind is EXPORTS else quotas.endpoint_slices


def over_quota(cluster_id: str, kind: Kind, *, limit: int, count: int) -> Forbidden:
    _, flag, word = kind
    return Forbidden(
        f"cluster {cluster_id!r} may hold at most {limit} {word} ({flag} {limit}); it would "
        f"hold {count}: a create past the quota is refused, updates and deletes pass"
    )


class Allowance:
    """How many more records of one kind each cluster may create in one transaction."""

    def __init__(self, kind: Kind, limit: int, rows: Mapping[str, Mapping[Any, Any]]) -> None:
        self._kind = kind
        self._limit = limit
        self._used = {name: int(row.get(f"used_{kind[0]}") or 0) for name, row in rows.items()}

    def take(self, cluster_id: str) -> Forbidden | None:
        """Count one create of `cluster_id`; the refusal instead when it is past the quota."""
        used = self._used.get(cluster_id, 0)
        if used >= self._limit:
            return over_quota(cluster_id, self._kind, limit=self._limit, count=used + 1)
        self._used[cluster_id] = used + 1
        return None


def difference(*, created: Iterable[str], deleted: Iterable[str]) -> Counter[str]:
    """Per cluster: records created minus records deleted (negative kept, unlike `-`)."""
    delta = Counter(created)
    delta.subtract(deleted)
    return delta


def usage_write(exports: Counter[str], slices: Counter[str]) -> Write:
    """The statement part that adds these differences to the clusters' counts (nothing
    when every difference is zero)."""
    names = sorted(name for name in exports.keys() | slices.keys() if exports[name] or slices[name])
    return Write(
        "add",
        cluster_usage,
        [
            {"cluster_id": name, "exports": exports[name], "endpoint_slices": slices[name]}
            for name in names
        ],
    )


def scope_refusal(
    cluster_id: str, namespace: str, export_namespaces: str | None, *, what: str
) -> Forbidden | None:
    """`Forbidden` naming the rule when the cluster's `spec.exportNamespaces` (its stored
    JSON text, None: absent) does not allow `namespace`; None when it does."""
    if export_namespaces is None:
        return None
    patterns = list(_parsed(export_namespaces))
    if scope.allows(patterns, namespace):
        return None
    return Forbidden(
        f"cluster {cluster_id!r} may not export {what} in namespace {namespace!r}: its "
        f"spec.exportNamespaces {patterns} allows none that matches"
    )


def scope_patterns(text: str | None) -> list[str] | None:
    """A stored scope list (JSON text) as a list; None when absent."""
    return None if text is None else list(_parsed(text))


@lru_cache(maxsize=1024)
def _parsed(text: str) -> tuple[str, ...]:
    # Parsed once per distinct text: every write of a scoped cluster reads the same one.
    return tuple(str(item) for item in json.loads(text))


async def registered_scope(conn: AsyncConnection, cluster_id: str) -> str | None:
    """A sync's first read: the cluster's stored `spec.exportNamespaces` (None: absent);
    NotFound unless it is registered and not being deleted. It takes no lock: the writes
    that follow lock the cluster and check each record again."""
    found = (
        await conn.execute(
            select(clusters.c.export_namespaces).where(
                clusters.c.name == cluster_id, clusters.c.deleting.is_(False)
            )
        )
    ).first()
    if found is None:
        raise NotFound(f"cluster {cluster_id!r} is not registered")
    return cast(str | None, found[0])


def check_sync(
    cluster_id: str,
    kind: Kind,
    *,
    limit: int,
    scope_text: str | None,
    namespaces: Iterable[str],
    wanted: int,
    created: int,
) -> None:
    """Refuse a full-state sync before it writes anything (`Forbidden`): a record outside
    the cluster's scope, or a sync that creates records and would leave the cluster with
    more than its quota. A sync is judged by its final size, `wanted`: its creates may
    pass the limit for a moment (upserts run before withdrawals) only when it ends
    within it."""
    for namespace in sorted(set(namespaces)):
        refusal = scope_refusal(cluster_id, namespace, scope_text, what=kind[2])
        if refusal is not None:
            raise refusal
    if created and wanted > limit:
        raise over_quota(cluster_id, kind, limit=limit, count=wanted)
