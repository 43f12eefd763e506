"""Every lock a store write takes, and the one order they are taken in.

THE LOCK ORDER. Every write transaction of the store (export PUT, DELETE, annotation
patch, sync batch, cluster withdrawal, slice write) takes its locks in this order, and
only in it:

1. **Clusters**, sorted by name, `FOR KEY SHARE` (`lock_clusters`). It conflicts with the
   `FOR UPDATE` a cluster delete takes before it marks the cluster deleting, so a delete
   waits for every in-flight write of that cluster, and every write after it sees
   `deleting` and is refused. Without it a PUT racing a cluster delete could leave an
   export nobody withdraws. Every other change of the row that a write must not race
   (the staleness sweep, a scope patch, a reported property) takes `FOR UPDATE` too.

   It does NOT conflict with a heartbeat, which takes the row `FOR NO KEY UPDATE`
   (`KeyLocks.beat`) and changes no key column: a write holds its cluster's row until
   commit, which on a starved hub is seconds, and a cluster that keeps beating must not
   miss its TTL behind its own writes (docs/reference.md#fleet-scale). What a write reads
   in the row (scope, `deleting`, the last heartbeat for its answer's cluster state) is
   what it read when it locked it; a beat committing meanwhile changes none of what the
   write decides by.
2. **Service keys** (`lock_keys`): one lock per key, taken in the sorted order of the
   keys' lock numbers (below). Every row a write then touches — the key's exports, their
   slices, the ServiceImport itself — is reached through a locked key, so two writers of
   one key take turns and writers of different keys never meet.
3. **The revision counter**, LAST (`take_revisions`): one row every writer updates,
   held until commit. Taken after everything else, so a writer holds it only for its
   final statements, and never while waiting for another lock.

Because every writer climbs the same ladder, hub replicas cannot deadlock each other.

How each back end keeps the order (`StoreContext.locks`, chosen once):

* PostgreSQL (`PostgresLocks`): step 2 is one statement taking a transaction-scoped
  advisory lock, `pg_advisory_xact_lock(bigint)`, per key, on `key_lock_number`: a
  stable 64-bit hash of (namespace, name) computed here. The numbers travel as one array
  parameter and are locked in its order (`unnest … WITH ORDINALITY`); a second statement
  then reads the keys' ServiceImport rows. A key's lock needs no row, so the writer
  stores each ServiceImport once, with its document (the old lock, an `INSERT … ON
  CONFLICT DO UPDATE` no-op upsert of the row, wrote every row twice per write and left
  an empty "lock row", `created_at` NULL, for every key a write left without exports).

  The order is that of the sorted, de-duplicated NUMBERS, not of the keys: two keys can
  share a number, and in key order writer 1 (keys A, C) would lock h(A) then h(C) while
  writer 2 (keys B, D) locks h(B) then h(D); with h(C) = h(B) and h(D) = h(A) each waits
  for the other. In number order both lock the smaller number first. A collision costs
  only that two keys' writers take turns.

  Two statements, not one: under READ COMMITTED a statement reads the snapshot taken
  when it began, so a read in the locking statement (a CTE too, whatever order its parts
  run in) could miss what the lock's previous holder committed while it waited. The
  read after the lock sees it.

  The numbers share PostgreSQL's one bigint advisory-lock space with the migration lock
  (`migrate.MIGRATION_LOCK_KEY`); a key meeting it would only wait for a migration.

  Leftover lock rows of older hubs (`created_at` NULL) are answered as found; every
  reader treats them as absent (`importfeed`, `verdicts`, `imports`), and the writer
  deletes a key's row when the key is left without exports.
* SQLite (`SQLiteLocks`): a write transaction begins with BEGIN IMMEDIATE and already
  holds the database's only writer lock; steps 1 and 2 only read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import (
    Select,
    Table,
    select,
)
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store.errors import NotFound
from hub.store.notify import CHANNEL
from hub.store.revisions import allocate_revisions, prune_history
from hub.store.rows import PostgresRows, SQLiteRows, Write, fetch
from hub.store.tables import REVISION_ROW_ID, clusters, service_imports
from hub.store.tables import revision as revision_table
from hub.store.usage import EXPORTS, SLICES, usage_column

if TYPE_CHECKING:
    from hub.store.context import StoreContext

Key = tuple[str, str]  # (namespace, name)
KeyRow = Mapping[Any, Any]  # a key's `service_imports` row as read, by column name


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

    def beat(self, query: Select[Any], *, of: Table, skip_locked: bool) -> Select[Any]:
        """`query` holding its rows of `of` until commit as a heartbeat does: against the
        sweep, a delete and another beat (`FOR UPDATE` takers), never against the writes
        (step 1 above). `skip_locked`: answer only the rows no other transaction holds (the
        rest are left out, not waited for), so that one cluster whose row is held (a
        delete, the sweep) does not hold up the beats of every other cluster."""
        ...

    async def keys(
        self, conn: AsyncConnection, keys: Sequence[Key], *, read: bool = True
    ) -> dict[Key, KeyRow]:
        """Lock `keys` until commit (step 2); answers the ServiceImport rows they have
        (a key without one is absent). `read=False`: lock only, answer nothing (the caller
        reads the rows with its own reads after the lock, `RowWriter.select_many`)."""
        ...

    async def revisions(self, conn: AsyncConnection, *, count: int, history_limit: int) -> int:
        """Take `count` revisions (step 3); answers the newest."""
        ...

    async def revisions_with(
        self, conn: AsyncConnection, *, count: int, history_limit: int, writes: Sequence[Write]
    ) -> int:
        """Take `count` revisions (step 3) and write `writes` with them (`Write.relative`);
        on PostgreSQL in one statement. Answers the newest."""
        ...

    async def selection(self, conn: AsyncConnection) -> None:
        """Take the import-selection lock exclusive until commit: no key writer runs
        meanwhile (each holds it shared, see `_TAKE_KEY_LOCKS`)."""
        ...

    async def sweep(self, conn: AsyncConnection) -> bool:
        """Take the fleet-wide staleness sweep's lock until commit, before step 1, if no
        other transaction holds it (`hub.store.withdrawals`); False when one does."""
        ...


def key_lock_number(key: Key) -> int:
    """The advisory-lock number of `key`: the same in every hub process and version (not
    Python's salted `hash`), a signed 64-bit integer as `pg_advisory_xact_lock` takes it.
    Each part is length-prefixed, so ("a", "bc") and ("ab", "c") hash different bytes."""
    digest = hashlib.blake2b(digest_size=8, person=b"mcsync-key-lock")
    for part in key:
        encoded = part.encode()
        digest.update(len(encoded).to_bytes(4, "big"))
        digest.update(encoded)
    return int.from_bytes(digest.digest(), "big", signed=True)


# The locks, one per number in the array's order: a function scan WITH ORDINALITY yields
# its rows in ordinal order (the planner knows it, so ORDER BY adds no sort) and the lock
# call is evaluated on each row as it comes. One row answered, not one per key. Like the
# read of the rows after it (`PostgresRows.select_in`) and the revision counter's
# statement, it goes on the driver's connection (`rows.fetch`): fixed text, no
# SQLAlchemy statement work per write.
#
# The same statement then takes the import-selection lock SHARED (`SELECTION_LOCK_NUMBER`),
# after the keys (the outer row needs the inner one first): every key writer holds it until
# commit, and a change of a cluster's properties takes it EXCLUSIVE
# (`lock_selection_exclusive`), so that change judges and records the keys it lets in or
# leaves out (`hub.store.importselection`) while no key is being written, without taking
# any key's lock (it never waits for a key, so no order can cycle).
_TAKE_KEY_LOCKS = (
    "SELECT pg_advisory_xact_lock_shared($2) FROM (SELECT count(*) FROM ("
    "SELECT pg_advisory_xact_lock(k.number) FROM unnest($1::BIGINT[])"
    " WITH ORDINALITY AS k(number, position) ORDER BY k.position"
    ") AS locked) AS keys"
)

# The counter's statement carries the NOTIFY (one round trip fewer per write); it is
# delivered to every LISTENer when, and only if, the transaction commits.
_TAKE_REVISIONS = (
    f"UPDATE {revision_table.name} SET value = value + $1 WHERE id = $2"
    f" RETURNING value, pg_notify('{CHANNEL}', value::text)"
)

# The staleness sweep's lock (`withdrawals.sweep`), in the advisory-lock space the key
# locks share: a fixed number no key's hash is expected to meet (a key meeting it would
# only make one sweep skip its turn).
SWEEP_LOCK_NUMBER = key_lock_number(("mcsync.io", "staleness-sweep"))
SELECTION_LOCK_NUMBER = key_lock_number(("mcsync.io", "import-selection"))
_TAKE_SELECTION_EXCLUSIVE = "SELECT pg_advisory_xact_lock($1)"
_TRY_SWEEP_LOCK = "SELECT pg_try_advisory_xact_lock($1) AS taken"

_POSTGRES_ROWS = PostgresRows()


class PostgresLocks:
    concurrent_writers = 2

    def share(self, query: Select[Any]) -> Select[Any]:
        return query.with_for_update(read=True, key_share=True)  # FOR KEY SHARE

    def exclusive(self, query: Select[Any], *, of: Table) -> Select[Any]:
        return query.with_for_update(of=of)

    def beat(self, query: Select[Any], *, of: Table, skip_locked: bool) -> Select[Any]:
        # FOR NO KEY UPDATE [SKIP LOCKED]
        return query.with_for_update(of=of, key_share=True, skip_locked=skip_locked)

    async def keys(
        self, conn: AsyncConnection, keys: Sequence[Key], *, read: bool = True
    ) -> dict[Key, KeyRow]:
        if not keys:
            return {}
        numbers = sorted({key_lock_number(key) for key in keys})  # not key order: see above
        await fetch(conn, _TAKE_KEY_LOCKS, numbers, SELECTION_LOCK_NUMBER)
        if not read:
            return {}
        found = await _POSTGRES_ROWS.select_in(conn, service_imports, ("namespace", "name"), keys)
        return {(r["namespace"], r["name"]): r for r in found}

    async def revisions(self, conn: AsyncConnection, *, count: int, history_limit: int) -> int:
        (row,) = await fetch(conn, _TAKE_REVISIONS, count, REVISION_ROW_ID)
        newest = int(row["value"])
        await prune_history(conn, newest=newest, count=count, history_limit=history_limit)
        return newest

    async def revisions_with(
        self, conn: AsyncConnection, *, count: int, history_limit: int, writes: Sequence[Write]
    ) -> int:
        newest = await _POSTGRES_ROWS.write_with_revisions(
            conn, writes, count=count, counter=_TAKE_REVISIONS, counter_args=[REVISION_ROW_ID]
        )
        if newest is None:  # rows for COPY: the revisions first, then the rows
            newest = await self.revisions(conn, count=count, history_limit=history_limit)
            await _POSTGRES_ROWS.write(conn, [w.resolved(newest - count + 1) for w in writes])
            return newest
        await prune_history(conn, newest=newest, count=count, history_limit=history_limit)
        return newest

    async def sweep(self, conn: AsyncConnection) -> bool:
        (row,) = await fetch(conn, _TRY_SWEEP_LOCK, SWEEP_LOCK_NUMBER)
        return bool(row["taken"])

    async def selection(self, conn: AsyncConnection) -> None:
        await fetch(conn, _TAKE_SELECTION_EXCLUSIVE, SELECTION_LOCK_NUMBER)


_SQLITE_ROWS = SQLiteRows()


class SQLiteLocks:
    concurrent_writers = 1

    def share(self, query: Select[Any]) -> Select[Any]:
        return query  # BEGIN IMMEDIATE holds the only writer lock

    def exclusive(self, query: Select[Any], *, of: Table) -> Select[Any]:
        return query

    def beat(self, query: Select[Any], *, of: Table, skip_locked: bool) -> Select[Any]:
        return query

    async def keys(
        self, conn: AsyncConnection, keys: Sequence[Key], *, read: bool = True
    ) -> dict[Key, KeyRow]:
        if not keys or not read:
            return {}
        where = _SQLITE_ROWS.where_in((service_imports.c.namespace, service_imports.c.name), keys)
        rows = (await conn.execute(select(service_imports).where(where))).mappings().all()
        return {(r["namespace"], r["name"]): r for r in rows}

    async def revisions(self, conn: AsyncConnection, *, count: int, history_limit: int) -> int:
        return await allocate_revisions(conn, count=count, history_limit=history_limit)

    async def revisions_with(
        self, conn: AsyncConnection, *, count: int, history_limit: int, writes: Sequence[Write]
    ) -> int:
        newest = await self.revisions(conn, count=count, history_limit=history_limit)
        await _SQLITE_ROWS.write(conn, [w.resolved(newest - count + 1) for w in writes])
        return newest

    async def sweep(self, conn: AsyncConnection) -> bool:
        return True  # BEGIN IMMEDIATE holds the only writer lock

    async def selection(self, conn: AsyncConnection) -> None:
        return None  # BEGIN IMMEDIATE holds the only writer lock


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
    """Step 1: the registered, not-deleting clusters among `names`, held so until commit.

    Each row also carries what the writes check against the cluster (`hub.store.usage`):
    its `export_namespaces` scope and its counts of exports and slices (`used_exports`,
    `used_endpoint_slices`), read by primary key in the same statement."""
    ordered = sorted(set(names))
    query = (
        select(
            clusters.c.name,
            clusters.c.last_heartbeat,
            clusters.c.deleting,
            clusters.c.export_namespaces,
            usage_column(EXPORTS),
            usage_column(SLICES),
        )
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
    conn: AsyncConnection, ctx: StoreContext, keys: Sequence[Key], *, read: bool = True
) -> dict[Key, KeyRow]:
    """Step 2: lock `keys` (in the back end's order); answers the ServiceImport rows they
    have, as read under the locks. A key without a row is absent; a leftover lock row of
    an older hub (`created_at` NULL) is answered, and readers treat it as absent.
    `read=False`: lock only (the caller reads them in its own first read after the lock)."""
    return await ctx.locks.keys(conn, sorted(set(keys)), read=read)


async def take_revisions(conn: AsyncConnection, ctx: StoreContext, count: int) -> int:
    """Step 3, LAST: take `count` revisions; answers the newest."""
    return await ctx.locks.revisions(conn, count=count, history_limit=ctx.history_limit)


async def take_revisions_and_write(
    conn: AsyncConnection, ctx: StoreContext, count: int, writes: Sequence[Write]
) -> int:
    """Step 3, LAST, with the write's rows: take `count` revisions and write `writes`
    with them (their `relative` columns count from the first taken, `Write`); answers the
    newest. On PostgreSQL one statement takes the counter's row and writes the rows, so a
    writer holds the row every writer queues on over that statement and its COMMIT only,
    not over a round trip more (docs/benchmarks.md, fleet scale). The main query reads
    the counter's part, so PostgreSQL runs it first and the parts that write rows after it
    (the rows' locks are still taken only while the counter is held)."""
    if count <= 0:
        raise ValueError("a write takes at least one revision")
    return await ctx.locks.revisions_with(
        conn, count=count, history_limit=ctx.history_limit, writes=writes
    )


async def lock_selection_exclusive(conn: AsyncConnection, ctx: StoreContext) -> None:
    """After step 1 (the changed cluster's row), instead of step 2: wait until no key is
    being written and keep it so until commit (`hub.store.importselection`)."""
    await ctx.locks.selection(conn)
