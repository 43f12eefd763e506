"""The import feed's store half (docs/reference.md#import-path, #change-feeds): what every cluster
must import, as ServiceImport and EndpointSliceExport changes in the one revision history.

Every write that changes a ServiceImport or an EndpointSliceExport records that change
here, inside its own transaction, with a revision from the one global sequence (taken LAST,
as `hub.store.feed` explains), in the `changes` table with the row's `kind`. So the import
feed needs no second sequence and no second history: it is the same history read with
another filter (`imports_since`), and the export feed reads it without these rows.

Each EndpointSliceExport is recorded as an importing cluster must write it: its ports cut
to those its source cluster serves in the import (the ServiceImport's `status.ports[].
clusters` lists; a slice port matches an import port by name, since a slice carries the
Service port's name with the *target* port number). A slice with ports of which its source
serves none is not imported at all (docs/reference.md#import-path): its change is recorded as
DELETED, so an importer holding an older, visible form of it drops it. Cutting at write time, once,
rather than per watcher is what lets every agent of the fleet receive the same bytes.

A write that changes a key's per-port cluster lists changes what some slices look like to
importers although the slices themselves did not change: those slices are recorded again
(re-sent) in the same transaction, each only when its cut form actually differs. Withdrawing
an export withdraws its cluster's slices of that key in the same transaction.

While a cluster is Stale its exports may be withheld (docs/reference.md#failover,
`hub.store.withdrawals`, which records the events of withholding and giving back): a withheld
export's slices are not imported (out of the list; a write of one is recorded as DELETED) and are
not re-sent when the import's ports change. Each writer reads the rows of `endpoint_withdrawals` of
its keys under the keys' locks (`withheld_among`).

Within one transaction the import feed's changes take revisions before the transaction's
export changes (`ImportChanges` is allocated first): a slice deletion, then the
ServiceImport, then the slices re-sent or written. Export records keep the newest revisions
of their transaction, as before this feed existed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter
from sqlalchemy import and_, delete, exists, false, or_, select, tuple_
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import codec, paging
from hub.store.context import StoreContext
from hub.store.fanout import BufferLimits, FeedFanout, Subscription
from hub.store.feed import (
    ChangeRecord,
    check_history_read,
    read_current_revision,
    read_retained,
)
from hub.store.importselection import ANNOTATION_AUDIENCE, excluded_at, judge_key
from hub.store.locks import KeyRow
from hub.store.results import Page
from hub.store.tables import (
    changes,
    endpoint_slices,
    endpoint_withdrawals,
    import_exclusions,
    service_imports,
)
from shared import constants
from shared.models import EndpointSliceExport, ServiceImport, WatchEvent
from shared.timefmt import format_millis, utcnow

Key = tuple[str, str]  # (namespace, Service name)
Triple = tuple[str, str, str]  # (cluster_id, namespace, Service name): one export's slices

IMPORT_KINDS: tuple[str, str] = (constants.KIND_IMPORT, constants.KIND_ENDPOINT_SLICE)
# The `cluster_id` of a ServiceImport's change row: it belongs to every cluster, and to no
# cluster's export feed (no cluster can be named "").
FLEET = ""

_TIMESTAMP: TypeAdapter[datetime] = TypeAdapter(datetime)
_LIST_KIND = "clusterimports"


# --- cutting a slice to what its source serves -----------------------------------------------


def served_ports(status_text: str | None) -> dict[str, frozenset[str]]:
    """cluster → the names of the import ports it serves, from a stored import status."""
    if not status_text:
        return {}
    served: dict[str, set[str]] = {}
    for port in json.loads(status_text).get("ports", ()):
        for cluster in port.get("clusters", ()):
            served.setdefault(cluster, set()).add(port.get("name", ""))
    return {cluster: frozenset(names) for cluster, names in served.items()}


def importer_view(
    spec: Mapping[str, Any], served: frozenset[str] | None
) -> tuple[bool, dict[str, Any]]:
    """(imported?, the spec as importers see it): the slice's ports cut to `served`.

    A slice without ports (a Service without ports) has nothing to cut and is imported as
    it is. A slice with ports of which its source serves none is not imported.
    """
    ports = spec.get("ports") or []
    if not ports:
        return True, dict(spec)
    names = served or frozenset()
    kept = [p for p in ports if p.get("name", "") in names]
    return bool(kept), {**spec, "ports": kept}


def _change_type(before: bool | None, after: bool) -> str:
    """The event of a slice whose imported state goes from `before` (None: absent)."""
    if not after:
        return "DELETED"
    return "MODIFIED" if before else "ADDED"


# --- the texts of the history rows ----------------------------------------------------------


def _annotations(changed_at: datetime | None, audience: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if changed_at is not None:
        out[constants.ANNOTATION_CHANGED_AT] = format_millis(changed_at)
    if audience is not None:
        out[ANNOTATION_AUDIENCE] = audience
    return out


def _timestamp(value: datetime | None) -> Any:
    return None if value is None else _TIMESTAMP.dump_python(value, mode="json")


def slice_text(
    *,
    namespace: str,
    name: str,
    resource_version: int,
    created_at: datetime,
    spec: Mapping[str, Any],
    changed_at: datetime | None = None,
    audience: str | None = None,
) -> str:
    """The canonical JSON of an EndpointSliceExport (as `to_wire` gives it); a change of
    the feed carries its commit time in `mcsync.io/changed-at` (`changed_at`), a row for
    one cluster's feed alone its name in `mcsync.io/audience` (`importselection`)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "resourceVersion": str(resource_version),
        "creationTimestamp": _timestamp(created_at),
    }
    annotations = _annotations(changed_at, audience)
    if annotations:
        metadata["annotations"] = annotations
    return codec.canonical_json(
        {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND_ENDPOINT_SLICE,
            "metadata": metadata,
            "spec": spec,
        }
    )


def import_text(
    *,
    namespace: str,
    name: str,
    resource_version: int,
    created_at: datetime | None,
    spec_text: str,
    status_text: str,
    changed_at: datetime | None = None,
    audience: str | None = None,
) -> str:
    """The canonical JSON of a ServiceImport from its stored texts, without building it;
    a change of the feed carries its commit time in `mcsync.io/changed-at`.

    The cluster states of `status.clusters` are read-time facts and are not in it.
    """
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "resourceVersion": str(resource_version),
        "annotations": _annotations(changed_at, audience),
    }
    if created_at is not None:
        metadata["creationTimestamp"] = _timestamp(created_at)
    document = {
        "apiVersion": constants.API_VERSION,
        "kind": constants.KIND_IMPORT,
        "metadata": metadata,
    }
    try:
        return orjson.dumps(
            {
                **document,
                "spec": orjson.Fragment(spec_text),
                "status": orjson.Fragment(status_text),
            },
            option=orjson.OPT_SORT_KEYS,
        ).decode()
    except TypeError:  # what orjson refuses, the stdlib writes (see codec.canonical_json)
        return codec.canonical_json(
            {**document, "spec": json.loads(spec_text), "status": json.loads(status_text)}
        )


# --- the changes of one write transaction ---------------------------------------------------


@dataclass(frozen=True)
class SliceChange:
    """One slice's change as importers see it; `stamp`: the row takes the revision."""

    type: str
    cluster_id: str
    namespace: str
    name: str
    created_at: datetime
    view: Mapping[str, Any]
    stamp: bool
    # The one cluster whose feed carries this row (`importselection`); None: every one.
    audience: str | None = None


@dataclass(frozen=True)
class ImportChange:
    """One ServiceImport's change: its texts after it (the last ones for DELETED)."""

    type: str
    namespace: str
    name: str
    created_at: datetime | None
    spec_text: str
    status_text: str
    # The one cluster whose feed carries this row (`importselection`); None: every one.
    audience: str | None = None


@dataclass
class ImportChanges:
    """The import feed's changes of one write transaction, in revision order."""

    items: list[SliceChange | ImportChange] = field(default_factory=list)
    # EndpointSliceExport rows the write deletes, per source cluster (`hub.store.usage`).
    deleted_slices: Counter[str] = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.items)

    def records(
        self, first: int
    ) -> tuple[list[tuple[int, ChangeRecord]], dict[Key, int], list[dict[str, Any]]]:
        """With revisions from `first` on: the history rows, each ServiceImport's revision,
        and the `endpoint_slices` rows to update with theirs (re-sent slices). Each row carries the
        time of this write (`mcsync.io/changed-at`): the transaction commits right after."""
        changed_at = utcnow()
        history: list[tuple[int, ChangeRecord]] = []
        import_revisions: dict[Key, int] = {}
        stamps: dict[Triple, dict[str, Any]] = {}
        for offset, item in enumerate(self.items):
            rev = first + offset
            if isinstance(item, ImportChange):
                text = import_text(
                    namespace=item.namespace,
                    name=item.name,
                    resource_version=rev,
                    created_at=item.created_at,
                    spec_text=item.spec_text,
                    status_text=item.status_text,
                    changed_at=changed_at,
                    audience=item.audience,
                )
                if item.audience is None:
                    import_revisions[(item.namespace, item.name)] = rev
                record = ChangeRecord(
                    item.type,
                    FLEET if item.audience is None else item.audience,
                    item.namespace,
                    item.name,
                    None,
                    text,
                    constants.KIND_IMPORT,
                )
            else:
                text = slice_text(
                    namespace=item.namespace,
                    name=item.name,
                    resource_version=rev,
                    created_at=item.created_at,
                    spec=item.view,
                    changed_at=changed_at,
                    audience=item.audience,
                )
                record = ChangeRecord(
                    item.type,
                    item.cluster_id,
                    item.namespace,
                    item.name,
                    None,
                    text,
                    constants.KIND_ENDPOINT_SLICE,
                )
                if item.stamp and item.audience is None:
                    stamps[(item.cluster_id, item.namespace, item.name)] = {
                        "cluster_id": item.cluster_id,
                        "namespace": item.namespace,
                        "name": item.name,
                        "resource_version": rev,
                    }
            history.append((rev, record))
        return history, import_revisions, list(stamps.values())


def triples_filter(ctx: StoreContext, triples: Sequence[Triple]) -> Any:
    """The slices of the exports `triples` name (`ix_endpoint_slices_service`)."""
    columns = (
        endpoint_slices.c.cluster_id,
        endpoint_slices.c.namespace,
        endpoint_slices.c.service_name,
    )
    return ctx.rows.where_in(columns, triples)


async def withheld_among(
    conn: AsyncConnection, ctx: StoreContext, triples: Sequence[Triple]
) -> set[Triple]:
    """Which of `triples` (cluster, namespace, Service) the import feed withholds now (one
    indexed read); under the triples' key locks the answer holds until commit."""
    if not triples:
        return set()
    found = await ctx.rows.select_in(
        conn, endpoint_withdrawals, ("cluster_id", "namespace", "service_name"), sorted(triples)
    )
    return {(r["cluster_id"], r["namespace"], r["service_name"]) for r in found}


async def follow_exports(
    conn: AsyncConnection,
    ctx: StoreContext,
    *,
    written: Mapping[Triple, str],
    before: Mapping[Key, KeyRow | None],
    upserts: Sequence[Mapping[str, Any]],
    deletes: Sequence[Key],
) -> ImportChanges:
    """What an export write (`writer.write_exports`) does to the import feed.

    `written`: each export record written → ADDED / MODIFIED / DELETED; `before`: the
    stored ServiceImport row of each affected key as the write found it (None, or a lock
    row with no `created_at`, when there was none); `upserts` / `deletes`: the
    ServiceImport rows the write is about to store / remove. Deletes the withdrawn
    exports' slices, and answers the changes to record, allocation not yet made.
    """
    out = ImportChanges()
    withdrawn = [rid for rid, kind in written.items() if kind == "DELETED"]
    added = {rid for rid, kind in written.items() if kind == "ADDED"}

    def served_before(key: Key) -> dict[str, frozenset[str]]:
        row = before.get(key)
        return served_ports(row["status"] if row is not None and row["created_at"] else None)

    # 1. A withdrawn export takes its cluster's slices of that key along.
    if withdrawn:
        where = triples_filter(ctx, withdrawn)
        rows = (await conn.execute(select(endpoint_slices).where(where))).mappings().all()
        if rows:
            served_of: dict[Key, dict[str, frozenset[str]]] = {}
            for row in sorted(rows, key=lambda r: (r["namespace"], r["name"], r["cluster_id"])):
                key = (row["namespace"], row["service_name"])
                if key not in served_of:
                    served_of[key] = served_before(key)
                _, view = importer_view(
                    json.loads(row["spec"]), served_of[key].get(row["cluster_id"])
                )
                out.items.append(
                    SliceChange(
                        "DELETED",
                        row["cluster_id"],
                        row["namespace"],
                        row["name"],
                        row["created_at"],
                        view,
                        stamp=False,
                    )
                )
            await conn.execute(delete(endpoint_slices).where(where))
            out.deleted_slices.update(row["cluster_id"] for row in rows)
            # A withheld export goes with its slices (an export without slices has no row).
            withheld = (
                endpoint_withdrawals.c.cluster_id,
                endpoint_withdrawals.c.namespace,
                endpoint_withdrawals.c.service_name,
            )
            await conn.execute(
                delete(endpoint_withdrawals).where(ctx.rows.where_in(withheld, withdrawn))
            )

    # 2. The ServiceImports themselves.
    for key in deletes:
        last = before.get(key)
        if last is not None and last["created_at"] is not None:
            await judge_key(conn, ctx, key, before=last["spec"], after=None)
            out.items.append(
                ImportChange("DELETED", *key, last["created_at"], last["spec"], last["status"])
            )
    resend: dict[Triple, tuple[frozenset[str] | None, frozenset[str] | None]] = {}
    gone = set(withdrawn)
    let_in: list[tuple[Mapping[str, Any], set[str]]] = []
    for upsert in upserts:
        key = (upsert["namespace"], upsert["name"])
        stored = before.get(key)
        existed = stored is not None and stored["created_at"] is not None
        # 2a. `mcsync.io/import-clusters` (`importselection`): the clusters the key's new
        #     selector leaves out hear of it first, so no event of this write reaches them.
        left, admitted = await judge_key(
            conn,
            ctx,
            key,
            before=stored["spec"] if existed and stored is not None else None,
            after=upsert["spec"],
        )
        if left:
            last = stored if existed and stored is not None else upsert
            held = (await keys_slices(conn, ctx, [key])).get(key, [])
            out.items.extend(exclusion(key, last, held, left))
        if admitted:
            let_in.append((upsert, admitted))
        out.items.append(
            ImportChange(
                "MODIFIED" if existed else "ADDED",
                *key,
                upsert["created_at"],
                upsert["spec"],
                upsert["status"],
            )
        )
        # 3. Which clusters' slices of the key now look different to importers.
        old_served = served_before(key)
        if existed and stored is not None and stored["status"] == upsert["status"]:
            continue
        new_served = served_ports(upsert["status"])
        for cluster in old_served.keys() | new_served.keys():
            rid = (cluster, *key)
            if rid in gone or rid in added:  # slices gone above, or none yet
                continue
            if old_served.get(cluster) != new_served.get(cluster):
                resend[rid] = (old_served.get(cluster), new_served.get(cluster))

    # 4. Re-send those slices whose cut form changed, unless their export is withheld.
    if resend:
        for rid in await withheld_among(conn, ctx, sorted(resend)):
            del resend[rid]
    if resend:
        where = triples_filter(ctx, sorted(resend))
        query = select(endpoint_slices).where(where)
        query = query.order_by(
            endpoint_slices.c.namespace,
            endpoint_slices.c.service_name,
            endpoint_slices.c.cluster_id,
            endpoint_slices.c.name,
        )
        for row in (await conn.execute(query)).mappings():
            old, new = resend[(row["cluster_id"], row["namespace"], row["service_name"])]
            spec = json.loads(row["spec"])
            was, old_view = importer_view(spec, old)
            now_in, view = importer_view(spec, new)
            if (was, old_view) == (now_in, view):
                continue
            out.items.append(
                SliceChange(
                    _change_type(was, now_in),
                    row["cluster_id"],
                    row["namespace"],
                    row["name"],
                    row["created_at"],
                    view,
                    stamp=True,
                )
            )

    # 5. The clusters the key's new selector lets in get it whole, as it is now.
    if let_in:
        held_of = await keys_slices(
            conn, ctx, [(u["namespace"], u["name"]) for u, _ in let_in]
        )
        for upsert, admitted in let_in:
            key = (upsert["namespace"], upsert["name"])
            out.items.extend(admission(key, upsert, held_of.get(key, []), admitted))
    return out


async def keys_slices(
    conn: AsyncConnection, ctx: StoreContext, keys: Sequence[Key]
) -> dict[Key, list[RowMapping]]:
    """Each key's stored slices whose export is not withheld, in list order: one read of
    the slices and one of the withheld exports, however many keys."""
    if not keys:
        return {}
    where = ctx.rows.where_in(
        (endpoint_slices.c.namespace, endpoint_slices.c.service_name), sorted(set(keys))
    )
    rows = (
        await conn.execute(
            select(endpoint_slices)
            .where(where)
            .order_by(
                endpoint_slices.c.namespace,
                endpoint_slices.c.service_name,
                endpoint_slices.c.cluster_id,
                endpoint_slices.c.name,
            )
        )
    ).mappings().all()
    triples = sorted({(r["cluster_id"], r["namespace"], r["service_name"]) for r in rows})
    withheld = await withheld_among(conn, ctx, triples)
    out: dict[Key, list[RowMapping]] = {}
    for r in rows:
        if (r["cluster_id"], r["namespace"], r["service_name"]) not in withheld:
            out.setdefault((r["namespace"], r["service_name"]), []).append(r)
    return out


def admission(
    key: Key,
    stored: Mapping[str, Any],
    held: Sequence[RowMapping],
    clusters: set[str],
) -> list[SliceChange | ImportChange]:
    """What each of `clusters`, let in to `key`, must hear (`importselection`): the
    ServiceImport (`stored`: its row as it is now) and its imported slices (`held`, from
    `keys_slices`), ADDED."""
    served = served_ports(stored["status"])
    items: list[SliceChange | ImportChange] = []
    for cluster in sorted(clusters):
        items.append(ImportChange(
            "ADDED", *key, stored["created_at"], stored["spec"], stored["status"],
            audience=cluster,
        ))
        for row in held:
            imported, view = importer_view(json.loads(row["spec"]), served.get(row["cluster_id"]))
            if imported:
                items.append(SliceChange(
                    "ADDED", row["cluster_id"], row["namespace"], row["name"],
                    row["created_at"], view, stamp=False, audience=cluster,
                ))
    return items


def exclusion(
    key: Key,
    stored: Mapping[str, Any],
    held: Sequence[RowMapping],
    clusters: set[str],
) -> list[SliceChange | ImportChange]:
    """What each of `clusters`, left out of `key`, must hear: a DELETED of each slice it
    held (`held`, from `keys_slices`), then of the ServiceImport (`stored`: its row)."""
    served = served_ports(stored["status"])
    items: list[SliceChange | ImportChange] = []
    for cluster in sorted(clusters):
        for row in held:
            _, view = importer_view(json.loads(row["spec"]), served.get(row["cluster_id"]))
            items.append(SliceChange(
                "DELETED", row["cluster_id"], row["namespace"], row["name"],
                row["created_at"], view, stamp=False, audience=cluster,
            ))
        items.append(ImportChange(
            "DELETED", *key, stored["created_at"], stored["spec"], stored["status"],
            audience=cluster,
        ))
    return items


# --- reading the feed --------------------------------------------------------------------


def namespace_filter(column: Any, patterns: Sequence[str]) -> Any:
    """`column` matches one of `patterns` (names, `*` globs: `shared.scope`), in SQL. A
    pattern holds only `[a-z0-9-*]`, so `*` → `%` is the whole translation to LIKE."""
    exact = [p for p in patterns if "*" not in p]
    globs = [p for p in patterns if "*" in p]
    parts = [column.in_(exact)] if exact else []
    parts += [column.like(p.replace("*", "%")) for p in globs]
    return or_(*parts) if parts else false()


def _not_excluded(cluster: str, namespace: Any, name: Any) -> Any:
    """The key (`namespace`, `name` columns) does not leave `cluster` out."""
    return ~exists().where(
        import_exclusions.c.cluster_id == cluster,
        import_exclusions.c.namespace == namespace,
        import_exclusions.c.name == name,
    )


@dataclass(frozen=True)
class ImportRow:
    """One retained import-feed change as read; decoded only when `event()` is called.

    `line()` is the change as one newline-delimited JSON watch event, built from the
    stored text without decoding it, so that a fan-out encodes each change once and
    hands the same bytes to every watcher.
    """

    revision: int
    cluster_id: str  # the source cluster of a slice; "" for a ServiceImport
    type: str
    kind: str
    text: str
    namespace: str = ""

    @property
    def key(self) -> str | None:
        """The fan-out's routing key: the namespace, since a cluster's import scope is a
        set of namespaces (`hub.store.fanout` indexes watches by it)."""
        return self.namespace

    def event(self) -> WatchEvent:
        obj: ServiceImport | EndpointSliceExport
        if self.kind == constants.KIND_IMPORT:
            obj = ServiceImport.model_validate_json(self.text)
        else:
            obj = EndpointSliceExport.model_validate_json(self.text)
        return WatchEvent(type=self.type, object=obj)  # type: ignore[arg-type]

    def line(self) -> bytes:
        return b'{"type":"' + self.type.encode() + b'","object":' + self.text.encode() + b"}\n"


ImportItem = ServiceImport | EndpointSliceExport


class ImportFeed:
    """Reads of the import feed: the history after a revision, the paged list, and the
    replica's one shared reader that feeds every import watch (`hub.store.fanout`: each
    change read and encoded once, its bytes shared by every agent's watch)."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._fanout: FeedFanout | None = None

    async def current_revision(self) -> int:
        async with self._ctx.read() as conn:
            return await read_current_revision(conn)

    async def excluded_at(self, cluster: str, revision: int) -> set[Key]:
        """The keys `cluster` was left out of at `revision` (`importselection`)."""
        return await excluded_at(self._ctx, cluster, revision)

    async def changes_since(self, *, revision: int, limit: int = 500) -> list[WatchEvent]:
        """`imports_since`, decoded: what a watch replays from the history."""
        return [row.event() for row in await self.imports_since(revision, limit)]

    @property
    def fanout(self) -> FeedFanout:
        if self._fanout is None:
            self._fanout = FeedFanout(
                notifier=self._ctx.notifier, read_page=self.imports_since, name="import-feed"
            )
        return self._fanout

    def subscribe(
        self,
        *,
        scope: Sequence[str] | None = None,
        limits: BufferLimits | None = None,
        on_overflow: Callable[[], object] | None = None,
    ) -> Subscription:
        """Receive every import change after `joined_at` as shared wire lines (the
        contract of `Feed.subscribe`), fleet-wide, or of the namespaces `scope` allows
        (a cluster's `spec.importNamespaces`): only those are handed to it."""
        return self.fanout.subscribe(None, scope=scope, limits=limits, on_overflow=on_overflow)

    async def close(self) -> None:
        if self._fanout is not None:
            await self._fanout.close()

    async def imports_since(self, revision: int, limit: int = 500) -> list[ImportRow]:
        """Every retained import-feed change after `revision`, oldest first, at most
        `limit` (ask again from the last one's revision for more). The same contract as
        the export history read (`Feed.rows_since`), so `hub.store.fanout` can page it.

        Gone when a change after `revision` has been pruned from the history.
        """
        check_history_read(revision, limit)
        query = (
            select(
                changes.c.revision,
                changes.c.cluster_id,
                changes.c.type,
                changes.c.kind,
                changes.c.object,
                changes.c.namespace,
            )
            .where(changes.c.revision > revision, changes.c.kind.in_(IMPORT_KINDS))
            .order_by(changes.c.revision)
            .limit(limit)
        )
        rows = await read_retained(
            self._ctx,
            query,
            revision=revision,
            relist="relist the imports and watch from the list's resourceVersion",
        )
        return [
            ImportRow(
                revision=int(r.revision),
                cluster_id=r.cluster_id,
                type=r.type,
                kind=r.kind,
                text=r.object,
                namespace=r.namespace,
            )
            for r in rows
        ]

    async def list_imports(
        self,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        namespaces: Sequence[str] | None = None,
        cluster: str | None = None,
    ) -> Page[ImportItem]:
        """Everything a cluster must import (the same for every cluster): each
        ServiceImport followed by the slices of its key, in (namespace, name, cluster,
        slice) order, each slice cut to what its source serves; slices a source serves
        none of the ports of are left out. A page at a time.

        `resource_version` is the revision read first: every change after it reaches a
        watch from it, and the rows read include every change up to it. ValueError on a
        malformed continue token or a limit below 1.

        `namespaces`: the importing cluster's `spec.importNamespaces` (names and `*`
        globs, docs/reference.md#scope-and-limits): only those namespaces' imports and slices are
        read (None: all). `cluster`: the importing cluster; the keys whose
        `mcsync.io/import-clusters` leaves it out are not read (`importselection`).
        """
        paging.check_limit(limit)
        after: tuple[str, ...] | None = None
        if continue_token is not None:
            after = paging.decode(_LIST_KIND, continue_token, width=4)
        imports_query = (
            select(service_imports)
            .where(service_imports.c.created_at.is_not(None))
            .order_by(service_imports.c.namespace, service_imports.c.name)
        )
        # Each slice with its key's import status, in one statement (one snapshot), so its
        # cut agrees with the lists it was cut by.
        slices_query = (
            select(endpoint_slices, service_imports.c.status)
            .select_from(
                endpoint_slices.join(
                    service_imports,
                    and_(
                        service_imports.c.namespace == endpoint_slices.c.namespace,
                        service_imports.c.name == endpoint_slices.c.service_name,
                    ),
                )
            )
            .order_by(
                endpoint_slices.c.namespace,
                endpoint_slices.c.service_name,
                endpoint_slices.c.cluster_id,
                endpoint_slices.c.name,
            )
        )
        if after is not None:
            ns, name, cluster, slice_name = after
            # A ServiceImport sorts as (ns, name, "", ""), before its own slices: whether
            # the last item was the import of (ns, name) or one of its slices, the next
            # import is a later key.
            imports_query = imports_query.where(
                tuple_(service_imports.c.namespace, service_imports.c.name) > tuple_(ns, name)
            )
            slices_query = slices_query.where(
                tuple_(
                    endpoint_slices.c.namespace,
                    endpoint_slices.c.service_name,
                    endpoint_slices.c.cluster_id,
                    endpoint_slices.c.name,
                )
                > tuple_(ns, name, cluster, slice_name)
            )
        if namespaces is not None:
            imports_query = imports_query.where(
                namespace_filter(service_imports.c.namespace, namespaces)
            )
            slices_query = slices_query.where(
                namespace_filter(endpoint_slices.c.namespace, namespaces)
            )
        if cluster is not None:
            imports_query = imports_query.where(
                _not_excluded(cluster, service_imports.c.namespace, service_imports.c.name)
            )
            slices_query = slices_query.where(
                _not_excluded(cluster, endpoint_slices.c.namespace, endpoint_slices.c.service_name)
            )
        if limit is not None:
            # Every slice the page can hold may be invisible, so slices are read in pages
            # until the merged page is full or they run out.
            imports_query = imports_query.limit(limit + 1)
        async with self._ctx.read() as conn:
            revision = await read_current_revision(conn)
            import_rows = (await conn.execute(imports_query)).mappings().all()
            withheld = {
                (c, ns, svc) for c, ns, svc in await conn.execute(select(endpoint_withdrawals))
            }
            merged = await self._merge(
                conn, import_rows, slices_query, limit=limit, withheld=withheld
            )
        page, token = paging.cut(merged, limit, _LIST_KIND, lambda m: m[0])
        return Page(
            items=[item for _, item in page],
            resource_version=str(revision),
            continue_token=token,
        )

    async def _merge(
        self,
        conn: AsyncConnection,
        import_rows: Sequence[RowMapping],
        slices_query: Any,
        *,
        limit: int | None,
        withheld: set[Triple],
    ) -> list[tuple[tuple[str, str, str, str], ImportItem]]:
        """The imports and the imported slices in list order, at least `limit + 1` of them
        when there are that many (all when `limit` is None); the slices of `withheld`
        exports are left out."""
        slices: list[tuple[tuple[str, str, str, str], ImportItem]] = []
        page = None if limit is None else limit + 1
        last: tuple[str, str, str, str] | None = None
        while True:
            query = slices_query
            if last is not None:
                query = query.where(
                    tuple_(
                        endpoint_slices.c.namespace,
                        endpoint_slices.c.service_name,
                        endpoint_slices.c.cluster_id,
                        endpoint_slices.c.name,
                    )
                    > tuple_(*last)
                )
            if page is not None:
                query = query.limit(page)
            rows = (await conn.execute(query)).mappings().all()
            for row in rows:
                sort_key = (row["namespace"], row["service_name"], row["cluster_id"], row["name"])
                last = sort_key
                if (row["cluster_id"], row["namespace"], row["service_name"]) in withheld:
                    continue
                served = served_ports(row["status"]).get(row["cluster_id"])
                imported, view = importer_view(json.loads(row["spec"]), served)
                if not imported:
                    continue
                item = EndpointSliceExport.model_validate_json(
                    slice_text(
                        namespace=row["namespace"],
                        name=row["name"],
                        resource_version=int(row["resource_version"]),
                        created_at=row["created_at"],
                        spec=view,
                    )
                )
                slices.append((sort_key, item))
            # The first `page` imports and the first `page` imported slices hold the
            # first `page` items of the list; slices left out (not imported) are read past.
            if page is None or len(rows) < page or len(slices) >= page:
                break
        imports: list[tuple[tuple[str, str, str, str], ImportItem]] = [
            (
                (row["namespace"], row["name"], "", ""),
                ServiceImport.model_validate_json(
                    import_text(
                        namespace=row["namespace"],
                        name=row["name"],
                        resource_version=int(row["resource_version"]),
                        created_at=row["created_at"],
                        spec_text=row["spec"],
                        status_text=row["status"],
                    )
                ),
            )
            for row in import_rows
        ]
        return sorted([*imports, *slices], key=lambda pair: pair[0])
