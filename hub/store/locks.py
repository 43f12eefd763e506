"""Every lock a store write takes, and the one order they are taken in.

THE LOCK ORDER. Every write transaction of the store (export PUT, DELETE, annotation
patch, sync batch, cluster withdrawal, slice write) takes its locks in this order, and
only in it:

1. **Clusters**, sorted by name, `FOR SHARE` (`lock_clusters`). It conflicts with the
   UPDATE that marks a cluster deleting, so a cluster delete waits for every in-flight
   write of that cluster, and every write after it sees `deleting` and is refused.
   Without it a PUT racing a cluster delete could leave an export nobody withdraws.
2. **Service keys**, sorted by (namespace, name) (`lock_keys`): the key's ServiceImport
   row. Every row a write then touches — the key's exports, their slices, the
   ServiceImport itself — is reached through a locked key, so two writers of one key take
   turns and writers of different keys never meet.
3. **The revision counter**, LAST (`take_revisions`): one row every writer updates,
   held until commit. Taken after everything else, so a writer holds it only for its
   final statements, and never while waiting for another lock.

Because every writer climbs the same ladder, hub replicas cannot deadlock each other.

How each back end keeps the order (`StoreContext.locks`, chosen once):

* PostgreSQL (`PostgresLocks`): step 2 is one multi-row `INSERT INTO service_imports …
  SELECT … FROM unnest(…) ORDER BY position ON CONFLICT DO UPDATE` (a no-op update), which
  locks each key's row in sorted order, creating it when absent, and answers the rows as
  locked (a read saved). `ON CONFLICT DO NOTHING` + `SELECT … FOR UPDATE` would leave a
  gap: when the transaction holding the lock deletes the row (last export withdrawn), the
  waiting SELECT finds no row and returns without a lock; retrying then takes locks out of
  order and can deadlock. The upsert has no such gap (PostgreSQL re-checks a concurrently
  deleted row itself). A key left without exports has its row deleted by the writer.
* SQLite (`SQLiteLocks`): a write transaction begins with BEGIN IMMEDIATE and already
  holds the database's only writer lock; steps 1 and 2 only read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Select, String, Table, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store.errors import NotFound
from hub.store.feed import allocate_revisions
from hub.store.rows import SQLiteRows
from hub.store.tables import clusters, service_imports

if TYPE_CHECKING:
    from hub.store.context import StoreContext

Key = tuple[str, str]  # (namespace, name)


class KeyLocks(Protocol):
    """How one back end takes the locks of the order above."""

    # Write transactions of one sync worth running at once: a single-writer database
    # gains nothing from a second one.
    concurrent_writers: int

    def share(self, query: Select[Any]) -> Select[Any]:
        """`query` (over `clusters`) holding its rows until commit (step 1)."""
        ...

    def exclusive(self, query: Select[Any], *, of: Table) -> Select[Any]:
        """`query` holding its rows of `of` for update until commit: a cluster delete's
        first step, which excludes every write of that cluster (step 1 of the writes)."""
        ...

    async def keys(self, conn: AsyncConnection, keys: Sequence[Key]) -> dict[Key, RowMapping]:
        """Lock `keys` (sorted) until commit (step 2); answers their ServiceImport rows."""
        ...

    async def revisions(self, conn: AsyncConnection, *, count: int, history_limit: int) -> int:
        """Take `count` revisions (step 3); answers the newest."""
        ...


def _text_array(values: Sequence[str]) -> Any:
    return bindparam(None, list(values), type_=ARRAY(String()))


class PostgresLocks:
    concurrent_writers = 2

    def share(self, query: Select[Any]) -> Select[Any]:
        return query.with_for_update(read=True)

    def exclusive(self, query: Select[Any], *, of: Table) -> Select[Any]:
        return query.with_for_update(of=of)

    async def keys(self, conn: AsyncConnection, keys: Sequence[Key]) -> dict[Key, RowMapping]:
        if not keys:
            return {}
        # The keys travel as two array parameters, not as one VALUES row each (a 500-key
        # batch was a 1,000-parameter statement compiled afresh every time); WITH
        # ORDINALITY … ORDER BY keeps the sorted lock order explicit.
        pairs = (
            func.unnest(
                _text_array([ns for ns, _ in keys]), _text_array([name for _, name in keys])
            )
            .table_valued("namespace", "name", with_ordinality="position")
            .render_derived("lock_keys")
        )
        stmt = pg_insert(service_imports).from_select(
            ["namespace", "name"],
            select(pairs.c.namespace, pairs.c.name).order_by(pairs.c.position),
        )
        locking = stmt.on_conflict_do_update(
            index_elements=[service_imports.c.namespace, service_imports.c.name],
            set_={"namespace": stmt.excluded.namespace},
        ).returning(*service_imports.c)
        rows = (await conn.execute(locking)).mappings().all()
        return {(r["namespace"], r["name"]): r for r in rows}

    async def revisions(self, conn: AsyncConnection, *, count: int, history_limit: int) -> int:
        # The NOTIFY rides on the counter's statement (`feed.allocate_revisions`).
        return await allocate_revisions(conn, count=count, history_limit=history_limit, notify=True)


_SQLITE_ROWS = SQLiteRows()


class SQLiteLocks:
    concurrent_writers = 1

    def share(self, query: Select[Any]) -> Select[Any]:
        return query  # BEGIN IMMEDIATE holds the only writer lock

    def exclusive(self, query: Select[Any], *, of: Table) -> Select[Any]:
        return query

    async def keys(self, conn: AsyncConnection, keys: Sequence[Key]) -> dict[Key, RowMapping]:
        if not keys:
            return {}
        where = _SQLITE_ROWS.where_in((service_imports.c.namespace, service_imports.c.name), keys)
        rows = (await conn.execute(select(service_imports).where(where))).mappings().all()
        return {(r["namespace"], r["name"]): r for r in rows}

    async def revisions(self, conn: AsyncConnection, *, count: int, history_limit: int) -> int:
        return await allocate_revisions(
            conn, count=count, history_limit=history_limit, notify=False
        )


# --- the order, step by step ------------------------------------------------------------------


async def check_registered(conn: AsyncConnection, cluster_id: str) -> None:
    """NotFound unless the cluster is registered and not being deleted: a sync's first
    read, which takes no lock (the write that follows locks it, `lock_clusters`)."""
    found = await conn.execute(
        select(clusters.c.name).where(clusters.c.name == cluster_id, clusters.c.deleting.is_(False))
    )
    if found.first() is None:
        raise NotFound(f"cluster {cluster_id!r} is not registered")


async def lock_clusters(
    conn: AsyncConnection, ctx: StoreContext, names: Sequence[str]
) -> dict[str, RowMapping]:
    """Step 1: the registered, not-deleting clusters among `names`, held so until commit."""
    ordered = sorted(set(names))
    query = (
        select(clusters.c.name, clusters.c.last_heartbeat, clusters.c.deleting)
        .where(clusters.c.name.in_(ordered) if len(ordered) > 1 else clusters.c.name == ordered[0])
        .order_by(clusters.c.name)
    )
    rows = (await conn.execute(ctx.locks.share(query))).mappings().all()
    return {str(r["name"]): r for r in rows if not r["deleting"]}


async def lock_cluster(conn: AsyncConnection, ctx: StoreContext, cluster_id: str) -> RowMapping:
    """Step 1 for one cluster; NotFound when it is not registered, or is being deleted."""
    row = (await lock_clusters(conn, ctx, [cluster_id])).get(cluster_id)
    if row is None:
        raise NotFound(f"cluster {cluster_id!r} is not registered")
    return row


async def lock_keys(
    conn: AsyncConnection, ctx: StoreContext, keys: Sequence[Key]
) -> dict[Key, RowMapping]:
    """Step 2: lock `keys` in sorted order; answers each key's ServiceImport row as locked
    (on PostgreSQL possibly an empty lock row, `created_at` NULL)."""
    return await ctx.locks.keys(conn, sorted(set(keys)))


async def take_revisions(conn: AsyncConnection, ctx: StoreContext, count: int) -> int:
    """Step 3, LAST: take `count` revisions; answers the newest."""
    return await ctx.locks.revisions(conn, count=count, history_limit=ctx.history_limit)
