"""InternalServiceExport records: put, get, delete, annotation patch, list, full-state sync.

Every write — PUT, DELETE, annotation patch, sync batch — is a list of `Mutation`s through
`writer.write_exports` (lock the keys, plan, judge, write each row once with its revision);
single writes are group-committed (`batch.WriteBatcher`), a sync is one transaction per
batch of keys. After each commit the in-process notifier learns the new revision, which
wakes this replica's watchers at once (other replicas hear the NOTIFY).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Mapping, Sequence

from sqlalchemy import func, select, tuple_

from hub.store import codec, paging
from hub.store.batch import ClusterNotRegistered, WriteBatcher
from hub.store.clusterstate import ClusterStates
from hub.store.context import StoreContext
from hub.store.locks import lock_cluster
from hub.store.mutations import SURELY_WITHIN, annotations_refusal, not_found
from hub.store.results import Page, PutResult
from hub.store.revisions import read_current_revision
from hub.store.syncguard import guard_sync
from hub.store.synclock import SyncLocks
from hub.store.tables import clusters, exports
from hub.store.usage import EXPORTS, check_sync, registered_scope
from hub.store.writer import Mutation, MutationResult, write_exports
from shared.models import InternalServiceExport, SyncResult
from shared.timefmt import utcnow

SYNC_BATCH = 500
# Batches of one sync in flight at once on PostgreSQL (see `ExportStore._write_batches`).
SYNC_PARALLEL = 2
_LIST_KIND = "serviceexports"


def _key_of(cluster_id: str, export: InternalServiceExport) -> tuple[str, str]:
    ref = export.spec.service_reference
    if ref.cluster_id != cluster_id:
        raise ValueError(
            f"spec.serviceReference.clusterId {ref.cluster_id!r} differs from the cluster "
            f"{cluster_id!r} the export is written under"
        )
    return ref.namespace, ref.name


def _is_stored(export: InternalServiceExport, stored: tuple[str, str] | None) -> bool:
    """Whether writing `export` would change nothing: `stored` is its (spec, annotations).

    The same comparison `write_exports` makes under the key lock; a record found unchanged
    here may skip the write, since writing it would not change it either.
    """
    if stored is None:
        return False
    spec_text, annotations_text = stored
    annotations = export.metadata.annotations
    if annotations is not None and codec.canonical_json(dict(annotations)) != annotations_text:
        return False
    return codec.spec_text(export.spec) == spec_text


class ExportStore:
    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._batcher = WriteBatcher(ctx)
        self._sync_locks = SyncLocks(ctx)
        # Records stored past the annotation limit, as `check_oversized` last found them
        # (None: not checked yet, e.g. the schema was not migrated when the hub started).
        self.oversized: int | None = None

    async def close(self) -> None:
        """Let the single-export writes already queued commit."""
        await self._batcher.close()

    async def put(self, cluster_id: str, export: InternalServiceExport) -> PutResult:
        """Create or replace one export; answers it with its verdict.

        NotFound when the cluster is not registered. `metadata.annotations` of None keeps
        the stored annotations. An identical re-PUT writes nothing (`changed=False`).
        Concurrent PUTs and DELETEs share a transaction (`batch.WriteBatcher`).
        """
        namespace, name = _key_of(cluster_id, export)
        result = await self._batcher.write(
            Mutation(cluster_id, namespace, name, export.spec, export.metadata.annotations)
        )
        assert result.record is not None
        return PutResult(object=result.record, created=result.created, changed=result.changed)

    async def get(self, cluster_id: str, namespace: str, name: str) -> InternalServiceExport:
        query = (
            select(exports, clusters.c.last_heartbeat)
            .select_from(exports.outerjoin(clusters, clusters.c.name == exports.c.cluster_id))
            .where(
                exports.c.cluster_id == cluster_id,
                exports.c.namespace == namespace,
                exports.c.name == name,
            )
        )
        async with self._ctx.read() as conn:
            row = (await conn.execute(query)).mappings().first()
        if row is None:
            raise not_found(cluster_id, namespace, name)
        state = ClusterStates(self._ctx.cluster_ttl).of_export(row["last_heartbeat"])
        return codec.export_model(row, cluster_state=state)

    async def delete(self, cluster_id: str, namespace: str, name: str) -> InternalServiceExport:
        """Withdraw one export, re-judging its key; answers its last state. NotFound."""
        try:
            result = await self._batcher.write(Mutation(cluster_id, namespace, name, None))
        except ClusterNotRegistered:
            raise not_found(cluster_id, namespace, name) from None
        if not result.existed or result.record is None:
            raise not_found(cluster_id, namespace, name)
        return result.record

    async def patch_annotations(
        self,
        cluster_id: str,
        namespace: str,
        name: str,
        *,
        resource_version: str,
        annotations: Mapping[str, str | None],
    ) -> InternalServiceExport:
        """Merge-patch the annotations under a resourceVersion precondition
        (docs/reference.md#export-path).

        Conflict when `resource_version` is not the record's current one (nothing is
        written then); a null value removes the key; a patch that changes nothing makes
        no new revision. One more kind of mutation through `write_exports`, group
        committed with the PUTs and DELETEs (`batch.WriteBatcher`).
        """
        mutation = Mutation.annotate(
            cluster_id, namespace, name, annotations, resource_version=resource_version
        )
        try:
            result = await self._batcher.write(mutation)
        except ClusterNotRegistered:
            raise not_found(cluster_id, namespace, name) from None
        assert result.record is not None
        return result.record

    async def list(
        self,
        *,
        cluster_id: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        conflict: bool | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Page[InternalServiceExport]:
        """Exports in (namespace, name, cluster) order, filtered, a page at a time.

        ValueError on a malformed continue token or a limit below 1.
        """
        paging.check_limit(limit)
        query = (
            select(exports, clusters.c.last_heartbeat)
            .select_from(exports.outerjoin(clusters, clusters.c.name == exports.c.cluster_id))
            .order_by(exports.c.namespace, exports.c.name, exports.c.cluster_id)
        )
        if cluster_id is not None:
            query = query.where(exports.c.cluster_id == cluster_id)
        if namespace is not None:
            query = query.where(exports.c.namespace == namespace)
        if name is not None:
            query = query.where(exports.c.name == name)
        if conflict is not None:
            query = query.where(exports.c.conflict == conflict)
        if continue_token is not None:
            after = paging.decode(_LIST_KIND, continue_token, width=3)
            query = query.where(
                tuple_(exports.c.namespace, exports.c.name, exports.c.cluster_id) > tuple_(*after)
            )
        if limit is not None:
            query = query.limit(limit + 1)
        async with self._ctx.read() as conn:
            # The revision first: every change after it reaches a watch started from it,
            # and the rows read next include at least every change up to it.
            revision = await read_current_revision(conn)
            rows = (await conn.execute(query)).mappings().all()
        rows, token = paging.cut(
            rows, limit, _LIST_KIND, lambda r: (r["namespace"], r["name"], r["cluster_id"])
        )
        states = ClusterStates(self._ctx.cluster_ttl)
        items = [
            codec.export_model(r, cluster_state=states.of_export(r["last_heartbeat"])) for r in rows
        ]
        return Page(items=items, resource_version=str(revision), continue_token=token)

    async def check_oversized(self) -> builtins.list[tuple[str, str, str]]:
        """The records whose annotations are past what the hub now accepts, stored by an
        older hub that judged an annotation patch without the annotations already there
        (docs/reference.md#annotations); also kept as `oversized` for `/readyz`.

        Run once at start-up: the database filters by the text's length (only a text
        longer than a quarter of the limit can be past it), Python counts what it finds
        as Kubernetes would. Such a record is still read, listed, watched and withdrawn;
        it cannot be written again with its annotations as they are."""
        query = (
            select(exports.c.cluster_id, exports.c.namespace, exports.c.name, exports.c.annotations)
            .where(func.length(exports.c.annotations) > SURELY_WITHIN)
            .order_by(exports.c.cluster_id, exports.c.namespace, exports.c.name)
        )
        found: builtins.list[tuple[str, str, str]] = []
        async with self._ctx.read() as conn:
            for cluster_id, namespace, name, text in await conn.execute(query):
                if annotations_refusal(text, "metadata.annotations") is not None:
                    found.append((cluster_id, namespace, name))
        self.oversized = len(found)
        return found

    async def count_by_verdict(self) -> dict[bool, int]:
        """How many exports the fleet has with Conflict=True (True) and False (False).

        One grouped count over `ix_exports_conflict_key` (an index-only scan where the
        database can): cheap enough for every metrics scrape, and it never keeps a counter
        that could drift from the rows.
        """
        query = select(exports.c.conflict, func.count()).group_by(exports.c.conflict)
        async with self._ctx.read() as conn:
            rows = (await conn.execute(query)).all()
        counts = {True: 0, False: 0}
        for conflict, count in rows:
            counts[bool(conflict)] = int(count)
        return counts

    async def sync(self, cluster_id: str, exports_: Sequence[InternalServiceExport]) -> SyncResult:
        """Make the cluster's exports exactly `exports_`: upsert them, withdraw the rest.

        One sync of a cluster at a time (`synclock`): concurrent syncs end with exactly
        one of them stored, whole, never a union of them past the quota.
        """
        async with self._sync_locks.hold("exports", cluster_id):
            return await self._sync(cluster_id, exports_)

    async def _sync(
        self, cluster_id: str, exports_: Sequence[InternalServiceExport]
    ) -> SyncResult:
        """`sync` under the cluster's sync lock.

        Exports already stored as given are counted unchanged from one read of the
        cluster's specs and write nothing; the rest run in transactions of `SYNC_BATCH`
        keys, each one reading the batch's current rows in one query. NotFound when the
        cluster is not registered; ValueError when an export names another cluster or a
        key appears twice.
        """
        wanted: dict[tuple[str, str], InternalServiceExport] = {}
        for export in exports_:
            key = _key_of(cluster_id, export)
            if key in wanted:
                raise ValueError(f"the sync lists export {key[0]}/{key[1]} twice")
            wanted[key] = export
        result = SyncResult()
        async with self._ctx.read() as conn:
            scope_text = await registered_scope(conn, cluster_id)
            held = (
                await conn.execute(
                    select(clusters.c.sync_withdrawal_held).where(clusters.c.name == cluster_id)
                )
            ).scalar_one_or_none() is not None
            # The cluster's stored specs, in one indexed read: an export whose spec and
            # annotations are already stored is unchanged, and needs no lock, no judge and
            # no batch at all (an agent's relist re-syncs mostly unchanged exports).
            stored = {
                (ns, n): (spec, annotations)
                for ns, n, spec, annotations in await conn.execute(
                    select(
                        exports.c.namespace, exports.c.name, exports.c.spec, exports.c.annotations
                    ).where(exports.c.cluster_id == cluster_id)
                )
            }
        check_sync(
            cluster_id,
            EXPORTS,
            limit=self._ctx.quotas.exports,
            scope_text=scope_text,
            namespaces=(ns for ns, _ in wanted),
            wanted=len(wanted),
            created=sum(1 for key in wanted if key not in stored),
        )
        # The mass-withdrawal guard (`syncguard`), before anything is written.
        await guard_sync(
            self._ctx,
            cluster_id,
            would_withdraw=sum(1 for key in stored if key not in wanted),
            stored=len(stored),
            held=held,
        )
        keys = [key for key in sorted(wanted) if not _is_stored(wanted[key], stored.get(key))]
        result.unchanged += len(wanted) - len(keys)

        batches = [
            [
                Mutation(cluster_id, ns, n, wanted[ns, n].spec, wanted[ns, n].metadata.annotations)
                for ns, n in keys[start : start + SYNC_BATCH]
            ]
            for start in range(0, len(keys), SYNC_BATCH)
        ]
        for outcome in await self._write_batches(cluster_id, batches):
            for r in outcome:
                if r.created:
                    result.created += 1
                elif r.changed:
                    result.updated += 1
                else:
                    result.unchanged += 1

        # Withdraw what the cluster has and the sync did not list.
        async with self._ctx.read() as conn:
            present = (
                await conn.execute(
                    select(exports.c.namespace, exports.c.name)
                    .where(exports.c.cluster_id == cluster_id)
                    .order_by(exports.c.namespace, exports.c.name)
                )
            ).all()
        stale = [(ns, n) for ns, n in present if (ns, n) not in wanted]
        withdrawals = [
            [Mutation(cluster_id, ns, n, None) for ns, n in stale[start : start + SYNC_BATCH]]
            for start in range(0, len(stale), SYNC_BATCH)
        ]
        for outcome in await self._write_batches(cluster_id, withdrawals):
            result.withdrawn += sum(1 for r in outcome if r.existed)
        async with self._ctx.read() as conn:
            result.resource_version = str(await read_current_revision(conn))
        return result

    async def _write_batches(
        self, cluster_id: str, batches: builtins.list[builtins.list[Mutation]]
    ) -> builtins.list[builtins.list[MutationResult]]:
        """Write each batch in its own transaction; answers their results in order.

        PostgreSQL: up to `SYNC_PARALLEL` batches are in flight at once, so the hub's
        Python work on one batch (judging, building texts) overlaps the database's work
        on another; one after the other, each side idled half of a large sync. The
        batches hold disjoint keys, each locks its own in sorted order and takes the
        revision counter last, so they cannot deadlock and no export, verdict or change
        row differs from a sequential run. A failing batch cancels those still running
        (each rolls back) and those not started never start, as a sequential run would
        stop; batches already committed stay. SQLite has a single writer: one at a time.

        A second connection is only worth taking when the pool has plenty to spare: when
        many syncs run at once (a fleet starting), they already keep the database busy,
        and doubling their connections would only queue them at the pool.
        """
        if not batches:
            return []
        width = min(SYNC_PARALLEL, self._ctx.locks.concurrent_writers)
        if not self._pool_mostly_idle():
            width = 1
        if width == 1 or len(batches) == 1:
            return [await self._write_batch(cluster_id, batch) for batch in batches]
        gate = asyncio.Semaphore(width)

        async def one(batch: builtins.list[Mutation]) -> builtins.list[MutationResult]:
            async with gate:
                return await self._write_batch(cluster_id, batch)

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(batch)) for batch in batches]
        return [task.result() for task in tasks]

    def _pool_mostly_idle(self) -> bool:
        """Whether at most half of the connection pool (with its overflow) is in use."""
        pool = self._ctx.engine.sync_engine.pool
        capacity = int(getattr(pool, "size", lambda: 0)()) + int(getattr(pool, "_max_overflow", 0))
        in_use = int(getattr(pool, "checkedout", lambda: 0)())
        return in_use * 2 <= capacity

    async def _write_batch(
        self, cluster_id: str, mutations: builtins.list[Mutation]
    ) -> builtins.list[MutationResult]:
        async with self._ctx.write() as conn:
            await lock_cluster(conn, self._ctx, cluster_id)
            # The sync answers counts only: no model per record (answer_records=False).
            outcome = await write_exports(
                conn, self._ctx, mutations, now=utcnow(), answer_records=False
            )
            refused = next((r.error for r in outcome.results if r.error is not None), None)
            if refused is not None:
                raise refused  # the batch is all or nothing: it rolls back
        if outcome.newest_revision is not None:
            self._ctx.notifier.committed(outcome.newest_revision)
        return outcome.results
