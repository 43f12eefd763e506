"""EndpointSliceExports (docs/reference.md#import-path, #rest-api): each source cluster's
EndpointSlices of the Services it exports, as its agent sends them, and the fleet-wide listing of
them.

A slice is accepted only while its cluster exports its Service (`Conflict` otherwise, a
409), and it goes with that export: `importchanges.follow_exports` deletes it inside the
transaction that withdraws the export (a DELETE, a sync, a cluster's deregistration).

Every write is one transaction through `write_slices`, in the store-wide lock order
(`locks`), its rows written through the store's one row writer (`ctx.rows`), as export
writes are:

1. the clusters, `FOR KEY SHARE` (`locks.lock_clusters`): a slice write and the cluster's
   deregistration exclude each other, as export writes and the deregistration do;
2. whether each slice's Service is exported by its cluster, checked BEFORE the keys are
   locked, so that a refused slice (409) never waits on a key; the slices' stored rows
   are read in the same statement (`RowWriter.select_many`), to learn their keys;
3. the slices' keys (`locks.lock_keys`, the locks every export writer takes first): a
   slice write and an export write of one key take turns, so the export cannot be
   withdrawn, nor the key's per-port cluster lists change, between the check and the
   commit. A slice's key is its Service; a slice whose Service changed is locked under
   both. Under the locks ONE read answers the keys' ServiceImports, the slices' rows
   again, their exports again and which of them the import feed withholds: a key changed
   since step 2 (another writer moved the slice to another Service) makes the
   transaction start again, and an export withdrawn since fails it;
4. an unchanged slice writes nothing and takes no revision;
5. LAST, the revision counter and, in the same statement on PostgreSQL, the slice rows
   and the change rows, each slice cut to what its source serves (`importfeed`)
   (`locks.take_revisions_and_write`).

From the clusters' lock to COMMIT that is six round trips on PostgreSQL, the revision
counter held over the last two (docs/benchmarks.md, fleet scale: on a busy hub every
round trip of a transaction waits for a turn of the event loop while it holds its locks;
`bench.write_round_trips` counts them).

Single-slice PUTs and DELETEs are group-committed (`SliceBatcher`, on `batch.GroupCommit`
as export PUTs are): the revision counter is one row every writer holds until its commit,
so one transaction per slice meant commits one at a time, and at 100 changes/s 32 of the
pool's 40 sessions queued on it (docs/benchmarks.md §7). Now the slices that arrived
while the previous transaction was in the database share the next one, each with its own
revision and answer; an unregistered cluster or an unexported Service refuses only its
own slice. A sync keeps its own all-or-nothing transactions of `SYNC_BATCH` slices.

Cost per write: a few indexed statements for the slices written, whatever the number of
slices stored. A sync finds the slices already stored as given from one read of its
cluster's slices; the rest go in transactions of `SYNC_BATCH`.
"""

from __future__ import annotations

import builtins
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import codec, paging
from hub.store.batch import ClusterNotRegistered, GroupCommit
from hub.store.context import StoreContext
from hub.store.errors import Conflict, NotFound
from hub.store.importchanges import ImportChanges, SliceChange, withheld_among
from hub.store.importview import Key, Triple, importer_sees, served_ports
from hub.store.locks import lock_clusters, lock_keys, take_revisions_and_write
from hub.store.results import Page
from hub.store.revisions import change_rows, read_current_revision
from hub.store.rows import Write
from hub.store.synclock import SyncLocks
from hub.store.tables import endpoint_slices, endpoint_withdrawals, exports, service_imports
from hub.store.usage import (
    SLICES,
    Allowance,
    check_sync,
    difference,
    registered_scope,
    scope_refusal,
    usage_write,
)
from shared.models import (
    EndpointSliceExport,
    EndpointSliceExportSpec,
    ObjectMeta,
    SyncResult,
    to_wire,
)
from shared.timefmt import utcnow

SYNC_BATCH = 500
_LIST_KIND = "endpointslices"
_ATTEMPTS = 3  # transactions a write tries when other writers keep moving its slices

SliceId = tuple[str, str]  # (namespace, slice name) within one cluster
SliceRecord = tuple[str, str, str]  # (cluster, namespace, slice name) fleet-wide


@dataclass(frozen=True)
class SliceMutation:
    """One intended change of one cluster's slice."""

    cluster_id: str
    namespace: str
    name: str
    spec: EndpointSliceExportSpec | None  # None: withdraw the slice

    @property
    def record_id(self) -> SliceRecord:
        return (self.cluster_id, self.namespace, self.name)


@dataclass(frozen=True)
class SliceResult:
    """What became of one mutation."""

    record: EndpointSliceExport | None  # as stored (for a withdrawal: its last state)
    existed: bool
    changed: bool
    created: bool = False


@dataclass(frozen=True)
class SlicePutResult:
    object: EndpointSliceExport
    created: bool
    changed: bool  # False for an unchanged PUT (no new revision)


class _KeysMoved(Exception):
    """A slice's Service changed between the read that chose the locks and the locks."""


def spec_wire(cluster_id: str, spec: EndpointSliceExportSpec) -> dict[str, Any]:
    """The spec as stored: the wire form, with the source cluster filled in."""
    wire = to_wire(spec)
    wire["clusterId"] = cluster_id
    return wire


def slice_model(row: Mapping[Any, Any]) -> EndpointSliceExport:
    """The EndpointSliceExport of an `endpoint_slices` row, as its source sent it."""
    return EndpointSliceExport(
        metadata=ObjectMeta(
            name=row["name"],
            namespace=row["namespace"],
            resource_version=str(row["resource_version"]),
            creation_timestamp=row["created_at"],
        ),
        spec=EndpointSliceExportSpec.model_validate_json(row["spec"]),
    )


def _not_found(cluster_id: str, namespace: str, name: str) -> NotFound:
    return NotFound(f"EndpointSliceExport {namespace}/{name} of cluster {cluster_id!r} not found")


def _not_exported(cluster_id: str, missing: Sequence[Key]) -> Conflict:
    named = ", ".join(f"{ns}/{name}" for ns, name in missing[:5])
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return Conflict(
        f"cluster {cluster_id!r} does not export Service {named}{more}: an "
        "EndpointSliceExport is accepted only for a Service its cluster exports; export the "
        "Service first"
    )


_SLICE_ID = ("cluster_id", "namespace", "name")
_EXPORT_ID = ("cluster_id", "namespace", "name")
_WITHHELD_ID = ("cluster_id", "namespace", "service_name")


def _triple(row: Mapping[Any, Any], last: str) -> tuple[str, str, str]:
    return (row["cluster_id"], row["namespace"], row[last])


async def write_slices(
    conn: AsyncConnection,
    ctx: StoreContext,
    mutations: Sequence[SliceMutation],
    *,
    now: datetime,
    answer_records: bool = True,
    enforce_quota: bool = True,
) -> tuple[list[SliceResult | Exception], int | None]:
    """Apply `mutations` (at most one per slice, of any clusters) in the caller's
    transaction; answers each one's result, or the error that refused it alone, and the
    newest revision taken (None when nothing changed).

    Refused alone: a slice of a cluster that is not registered (or being deleted),
    `ClusterNotRegistered`; a slice naming a Service its cluster does not export,
    `Conflict` (checked before the keys are locked, so a refused slice waits on no key).
    Raised for the whole transaction: `Conflict` when an export went between that check
    and the key locks (PostgreSQL; the group commit then retries each write alone),
    `_KeysMoved` (start the transaction again) when a concurrent writer moved a
    slice to another Service. Also refused alone (`Forbidden`, docs/reference.md#scope-and-limits):
    a slice outside its cluster's `spec.exportNamespaces`, and with `enforce_quota` a create past
    `--max-endpointslices-per-cluster` (a sync has judged its final size already).
    """
    ids = [m.record_id for m in mutations]
    if len(set(ids)) != len(ids):
        raise ValueError("a write may change each slice only once")
    outcomes: dict[SliceRecord, SliceResult | Exception] = {}
    registered = await lock_clusters(conn, ctx, sorted({m.cluster_id for m in mutations}))
    for m in mutations:
        if m.cluster_id not in registered:
            outcomes[m.record_id] = ClusterNotRegistered(
                f"cluster {m.cluster_id!r} is not registered"
            )
        elif m.spec is not None:
            refusal = scope_refusal(
                m.cluster_id,
                m.namespace,
                registered[m.cluster_id]["export_namespaces"],
                what=f"EndpointSliceExport {m.name!r}",
            )
            if refusal is not None:
                outcomes[m.record_id] = refusal
    quota = Allowance(SLICES, ctx.quotas.endpoint_slices, registered) if enforce_quota else None

    # --- 1. the Services must be exported by their clusters; which keys to lock ---------------
    def wanted_triples(ms: Sequence[SliceMutation]) -> list[Triple]:
        return sorted({(m.cluster_id, m.namespace, m.spec.service_name) for m in ms if m.spec})

    # The exports and the stored slices in one read (`RowWriter.select_many`): every
    # round trip from the clusters' lock to the commit is one the write holds its locks
    # over, and on a busy hub each waits for a turn of the event loop.
    live = [m for m in mutations if m.record_id not in outcomes]
    exported_rows, seen_rows = await ctx.rows.select_many(
        conn,
        [
            (exports, _EXPORT_ID, wanted_triples(live)),
            (endpoint_slices, _SLICE_ID, [m.record_id for m in live]),
        ],
    )
    exported = {_triple(r, "name") for r in exported_rows}
    for m in live:
        if m.spec is not None and (m.cluster_id, m.namespace, m.spec.service_name) not in exported:
            outcomes[m.record_id] = _not_exported(
                m.cluster_id, [(m.namespace, m.spec.service_name)]
            )
    live = [m for m in live if m.record_id not in outcomes]
    live_ids = [m.record_id for m in live]
    still = set(live_ids)
    seen = {i: r for r in seen_rows if (i := _triple(r, "name")) in still}
    wanted = wanted_triples(live)
    keys = sorted(
        {(ns, name) for _, ns, name in wanted}
        | {(r["namespace"], r["service_name"]) for r in seen.values()}
    )
    await lock_keys(conn, ctx, keys, read=False)
    # Read again under the locks, in one read: the keys' ServiceImports, the slices, their
    # exports (none can go under the key locks: was one withdrawn since?) and which of them
    # the import feed withholds (on SQLite nothing can have moved: BEGIN IMMEDIATE held the
    # only writer lock all along, and these reads are in-process calls).
    candidates = sorted({*wanted, *(_triple(r, "service_name") for r in seen.values())})
    import_rows, current_rows, exported_rows, withheld_rows = await ctx.rows.select_many(
        conn,
        [
            (service_imports, ("namespace", "name"), keys),
            (endpoint_slices, _SLICE_ID, live_ids),
            (exports, _EXPORT_ID, wanted),
            (endpoint_withdrawals, _WITHHELD_ID, candidates),
        ],
    )
    current = {_triple(r, "name"): r for r in current_rows}
    if any((r["namespace"], r["service_name"]) not in keys for r in current.values()):
        raise _KeysMoved
    gone = sorted(set(wanted) - {_triple(r, "name") for r in exported_rows})
    if gone:
        raise _not_exported(gone[0][0], [(ns, name) for _, ns, name in gone])

    # --- 2. the ports each cluster serves in each key's import (docs/reference.md#conflicts's
    # per-port lists), and which exports the import feed withholds (docs/reference.md#failover:
    # their slices are not imported while so), both read under the key locks
    statuses = {
        (r["namespace"], r["name"]): r["status"] if r["created_at"] else None for r in import_rows
    }
    served = {key: served_ports(statuses.get(key)) for key in keys}
    withheld = {_triple(r, "service_name") for r in withheld_rows}
    moved = sorted({_triple(r, "service_name") for r in current.values()} - set(candidates))
    if moved:  # a slice moved to another of the locked keys since the first read
        withheld |= await withheld_among(conn, ctx, moved)

    def view_of(cluster_id: str, key: Key, spec: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        return importer_sees(
            spec, served[key].get(cluster_id), withheld=(cluster_id, *key) in withheld
        )

    # --- 3. the real changes -----------------------------------------------------------------
    feed = ImportChanges()
    deletes: list[SliceRecord] = []
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    written: dict[SliceRecord, int] = {}  # slice → index of its last feed item
    for m in live:
        cluster_id = m.cluster_id
        row = current.get(m.record_id)
        old_view: tuple[bool, dict[str, Any]] | None = None
        if row is not None:
            old_key = (row["namespace"], row["service_name"])
            old_view = view_of(cluster_id, old_key, json.loads(row["spec"]))
        if m.spec is None:
            if row is None:
                outcomes[m.record_id] = SliceResult(record=None, existed=False, changed=False)
                continue
            assert old_view is not None
            deletes.append(m.record_id)
            feed.items.append(
                SliceChange(
                    "DELETED",
                    cluster_id,
                    m.namespace,
                    m.name,
                    row["created_at"],
                    old_view[1],
                    False,
                )
            )
            record = slice_model(row) if answer_records else None
            if record is not None:
                record.metadata.resource_version = None  # stamped below
            outcomes[m.record_id] = SliceResult(record=record, existed=True, changed=True)
            written[m.record_id] = len(feed.items) - 1
            continue
        if row is None and quota is not None:
            refusal = quota.take(cluster_id)
            if refusal is not None:
                outcomes[m.record_id] = refusal
                continue
        wire = spec_wire(cluster_id, m.spec)
        text = codec.canonical_json(wire)
        if row is not None and row["spec"] == text:
            # Unchanged: nothing to write, no revision, no change row.
            outcomes[m.record_id] = SliceResult(
                record=slice_model(row) if answer_records else None, existed=True, changed=False
            )
            continue
        key = (m.namespace, m.spec.service_name)
        before: bool | None = None
        created_at = now if row is None else row["created_at"]
        if row is not None and old_view is not None:
            if row["service_name"] != m.spec.service_name:
                # Moved to another Service: gone from the old key's imports, new in the new.
                feed.items.append(
                    SliceChange(
                        "DELETED", cluster_id, m.namespace, m.name, created_at, old_view[1], False
                    )
                )
            else:
                before = old_view[0]
        imported, view = view_of(cluster_id, key, wire)
        change_type = "DELETED" if not imported else ("MODIFIED" if before else "ADDED")
        feed.items.append(
            SliceChange(change_type, cluster_id, m.namespace, m.name, created_at, view, False)
        )
        written[m.record_id] = len(feed.items) - 1
        values: dict[str, Any] = {
            "cluster_id": cluster_id,
            "namespace": m.namespace,
            "name": m.name,
            "service_name": m.spec.service_name,
            "spec": text,
            "resource_version": 0,  # stamped below
        }
        if row is None:
            inserts.append({**values, "created_at": now})
        else:
            updates.append(values)
        record = None
        if answer_records:
            record = EndpointSliceExport(
                metadata=ObjectMeta(
                    name=m.name, namespace=m.namespace, creation_timestamp=created_at
                ),
                spec=m.spec.model_copy(update={"cluster_id": cluster_id}),
            )
        outcomes[m.record_id] = SliceResult(
            record=record, existed=row is not None, changed=True, created=row is None
        )

    if not feed.items:
        return [outcomes[i] for i in ids], None

    # --- 4. LAST: revisions, and with them the rows, history (one statement on PostgreSQL,
    # `locks.take_revisions_and_write`); revisions counted from 1 until they are taken
    history, _, _ = feed.records(1, pending=True)
    for stamped in (*inserts, *updates):
        slice_record = (stamped["cluster_id"], stamped["namespace"], stamped["name"])
        stamped["resource_version"] = 1 + written[slice_record]
    stamped_later = ("resource_version",)
    newest = await take_revisions_and_write(
        conn,
        ctx,
        len(feed),
        [
            Write.delete(endpoint_slices, deletes),
            Write("insert", endpoint_slices, inserts, relative=stamped_later),
            Write("update", endpoint_slices, updates, relative=stamped_later),
            change_rows(history, pending=True),
            usage_write(
                Counter(),
                difference(
                    created=(row["cluster_id"] for row in inserts),
                    deleted=(cluster_id for cluster_id, _, _ in deletes),
                ),
            ),
        ],
    )
    first = newest - len(feed) + 1
    for record_id, index in written.items():
        result = outcomes[record_id]
        if isinstance(result, SliceResult) and result.record is not None:
            result.record.metadata.resource_version = str(first + index)
    return [outcomes[i] for i in ids], newest


async def _transaction(
    ctx: StoreContext,
    mutations: Sequence[SliceMutation],
    *,
    answer_records: bool,
    all_or_nothing: bool,
    enforce_quota: bool = True,
) -> list[SliceResult | Exception]:
    """One transaction over `mutations`, started again when a slice moved under it.

    `all_or_nothing`: a mutation refused alone rolls the whole transaction back and is
    raised (a sync); otherwise the others commit and the refusal is answered in its place
    (the group commit of single writes).
    """
    for attempt in range(_ATTEMPTS):
        try:
            async with ctx.write() as conn:
                outcomes, newest = await write_slices(
                    conn,
                    ctx,
                    mutations,
                    now=utcnow(),
                    answer_records=answer_records,
                    enforce_quota=enforce_quota,
                )
                if all_or_nothing:
                    for outcome in outcomes:
                        if isinstance(outcome, Exception):
                            raise outcome
        except _KeysMoved:
            if attempt + 1 < _ATTEMPTS:
                continue
            clusters_named = ", ".join(sorted({repr(m.cluster_id) for m in mutations}))
            raise Conflict(
                f"slices of cluster {clusters_named} kept changing Service while being "
                "written; retry"
            ) from None
        if newest is not None:
            ctx.notifier.committed(newest)
        return outcomes
    raise AssertionError("unreachable")  # pragma: no cover


class SliceBatcher(GroupCommit[SliceMutation, SliceResult]):
    """Single-slice PUTs and DELETEs of every cluster, committed together (`batch`): the
    slices that arrive while the previous transaction is in the database share the next
    one, one hold of the revision row and one commit for all of them. Each still gets its
    own revision, change row and answer; an unregistered cluster or a Service not
    exported refuses only its own slice."""

    def __init__(self, ctx: StoreContext) -> None:
        super().__init__(ctx, name="mcsync-slice-batcher")

    async def commit(self, mutations: Sequence[SliceMutation]) -> Sequence[SliceResult | Exception]:
        return await _transaction(self._ctx, mutations, answer_records=True, all_or_nothing=False)


class EndpointSliceStore:
    """EndpointSliceExports: put, delete, sync, list, count."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._batcher = SliceBatcher(ctx)
        self._sync_locks = SyncLocks(ctx)

    async def close(self) -> None:
        """Wait for the single writes already queued (the store is closing)."""
        await self._batcher.close()

    async def _write(
        self, mutations: Sequence[SliceMutation], *, answer_records: bool = True
    ) -> builtins.list[SliceResult]:
        """One all-or-nothing transaction over `mutations` (a sync's batch, whose size
        `sync` has checked against the quota already)."""
        outcomes = await _transaction(
            self._ctx,
            mutations,
            answer_records=answer_records,
            all_or_nothing=True,
            enforce_quota=False,
        )
        return [o for o in outcomes if isinstance(o, SliceResult)]

    async def put(self, cluster_id: str, slice_: EndpointSliceExport) -> SlicePutResult:
        """Create or replace one slice (`metadata.namespace` required); answers it stored.

        NotFound when the cluster is not registered; Conflict when the cluster does not
        export the slice's Service; ValueError when the body names another cluster. An
        unchanged PUT writes nothing (`changed=False`). Concurrent PUTs and DELETEs share
        a transaction (`SliceBatcher`).
        """
        namespace = _namespace_of(cluster_id, slice_)
        result = await self._batcher.write(
            SliceMutation(cluster_id, namespace, slice_.metadata.name, slice_.spec)
        )
        assert result.record is not None
        return SlicePutResult(object=result.record, created=result.created, changed=result.changed)

    async def delete(self, cluster_id: str, namespace: str, name: str) -> EndpointSliceExport:
        """Withdraw one slice; answers its last state. NotFound."""
        try:
            result = await self._batcher.write(SliceMutation(cluster_id, namespace, name, None))
        except NotFound:
            raise _not_found(cluster_id, namespace, name) from None
        if not result.existed or result.record is None:
            raise _not_found(cluster_id, namespace, name)
        return result.record

    async def get(self, cluster_id: str, namespace: str, name: str) -> EndpointSliceExport:
        query = select(endpoint_slices).where(
            endpoint_slices.c.cluster_id == cluster_id,
            endpoint_slices.c.namespace == namespace,
            endpoint_slices.c.name == name,
        )
        async with self._ctx.read() as conn:
            row = (await conn.execute(query)).mappings().first()
        if row is None:
            raise _not_found(cluster_id, namespace, name)
        return slice_model(row)

    async def sync(self, cluster_id: str, slices: Sequence[EndpointSliceExport]) -> SyncResult:
        """Make the cluster's slices exactly `slices`: upsert them, withdraw the rest.

        One sync of a cluster at a time (`synclock`): concurrent syncs end with exactly
        one of them stored, whole, never a union of them past the quota.
        """
        async with self._sync_locks.hold("slices", cluster_id):
            return await self._sync(cluster_id, slices)

    async def _sync(self, cluster_id: str, slices: Sequence[EndpointSliceExport]) -> SyncResult:
        """`sync` under the cluster's sync lock.

        NotFound when the cluster is not registered; Conflict (before anything is written)
        when a slice names a Service the cluster does not export; ValueError when a slice
        names another cluster, has no namespace, or appears twice.
        """
        wanted: dict[SliceId, EndpointSliceExportSpec] = {}
        for item in slices:
            slice_id = (_namespace_of(cluster_id, item), item.metadata.name)
            if slice_id in wanted:
                raise ValueError(f"the sync lists slice {slice_id[0]}/{slice_id[1]} twice")
            wanted[slice_id] = item.spec
        result = SyncResult()
        async with self._ctx.read() as conn:
            scope_text = await registered_scope(conn, cluster_id)
            # The cluster's stored slices and exported Services, one indexed read each.
            stored = {
                (ns, name): spec
                for ns, name, spec in await conn.execute(
                    select(
                        endpoint_slices.c.namespace, endpoint_slices.c.name, endpoint_slices.c.spec
                    ).where(endpoint_slices.c.cluster_id == cluster_id)
                )
            }
            exported = {
                (ns, name)
                for ns, name in await conn.execute(
                    select(exports.c.namespace, exports.c.name).where(
                        exports.c.cluster_id == cluster_id
                    )
                )
            }
        check_sync(
            cluster_id,
            SLICES,
            limit=self._ctx.quotas.endpoint_slices,
            scope_text=scope_text,
            namespaces=(ns for ns, _ in wanted),
            wanted=len(wanted),
            created=sum(1 for slice_id in wanted if slice_id not in stored),
        )
        missing = sorted({(ns, spec.service_name) for (ns, _), spec in wanted.items()} - exported)
        if missing:
            raise _not_exported(cluster_id, missing)
        changed = [
            slice_id
            for slice_id in sorted(wanted)
            if codec.canonical_json(spec_wire(cluster_id, wanted[slice_id])) != stored.get(slice_id)
        ]
        result.unchanged = len(wanted) - len(changed)
        for start in range(0, len(changed), SYNC_BATCH):
            batch = [
                SliceMutation(cluster_id, ns, name, wanted[ns, name])
                for ns, name in changed[start : start + SYNC_BATCH]
            ]
            for r in await self._write(batch, answer_records=False):
                if r.created:
                    result.created += 1
                elif r.changed:
                    result.updated += 1
                else:
                    result.unchanged += 1
        stale = sorted(slice_id for slice_id in stored if slice_id not in wanted)
        for start in range(0, len(stale), SYNC_BATCH):
            batch = [
                SliceMutation(cluster_id, ns, name, None)
                for ns, name in stale[start : start + SYNC_BATCH]
            ]
            outcome = await self._write(batch, answer_records=False)
            result.withdrawn += sum(1 for r in outcome if r.existed)
        async with self._ctx.read() as conn:
            result.resource_version = str(await read_current_revision(conn))
        return result

    async def list(
        self,
        *,
        cluster_id: str | None = None,
        namespace: str | None = None,
        service_name: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Page[EndpointSliceExport]:
        """Slices in (namespace, Service, cluster, slice) order, filtered, a page at a
        time, as their sources sent them (uncut). ValueError on a malformed continue
        token or a limit below 1."""
        paging.check_limit(limit)
        query = select(endpoint_slices).order_by(
            endpoint_slices.c.namespace,
            endpoint_slices.c.service_name,
            endpoint_slices.c.cluster_id,
            endpoint_slices.c.name,
        )
        if cluster_id is not None:
            query = query.where(endpoint_slices.c.cluster_id == cluster_id)
        if namespace is not None:
            query = query.where(endpoint_slices.c.namespace == namespace)
        if service_name is not None:
            query = query.where(endpoint_slices.c.service_name == service_name)
        if continue_token is not None:
            after = paging.decode(_LIST_KIND, continue_token, width=4)
            query = query.where(
                tuple_(
                    endpoint_slices.c.namespace,
                    endpoint_slices.c.service_name,
                    endpoint_slices.c.cluster_id,
                    endpoint_slices.c.name,
                )
                > tuple_(*after)
            )
        if limit is not None:
            query = query.limit(limit + 1)
        async with self._ctx.read() as conn:
            revision = await read_current_revision(conn)
            rows = (await conn.execute(query)).mappings().all()
        rows, token = paging.cut(
            rows,
            limit,
            _LIST_KIND,
            lambda r: (r["namespace"], r["service_name"], r["cluster_id"], r["name"]),
        )
        return Page(
            items=[slice_model(r) for r in rows],
            resource_version=str(revision),
            continue_token=token,
        )

    async def count(self) -> int:
        """How many EndpointSliceExports the fleet has (for the metrics scrape)."""
        async with self._ctx.read() as conn:
            value = (
                await conn.execute(select(func.count()).select_from(endpoint_slices))
            ).scalar_one()
        return int(value)


def _namespace_of(cluster_id: str, slice_: EndpointSliceExport) -> str:
    if slice_.spec.cluster_id not in (None, cluster_id):
        raise ValueError(
            f"spec.clusterId {slice_.spec.cluster_id!r} differs from the cluster "
            f"{cluster_id!r} the slice is written under"
        )
    if slice_.metadata.namespace is None:
        raise ValueError(f"slice {slice_.metadata.name!r} has no metadata.namespace")
    return slice_.metadata.namespace
