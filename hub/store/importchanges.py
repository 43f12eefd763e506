"""The import feed's write half: what a write records of ServiceImport and
EndpointSliceExport changes in the one revision history (see
`docs/reference.md#import-path` and `docs/reference.md#change-feeds`).

Every write that changes a ServiceImport or an EndpointSliceExport records that change
here, inside its own transaction, with a revision from the one global sequence (taken LAST,
as `hub.store.revisions` explains), in the `changes` table with the row's `kind`. So the
import feed needs no second sequence and no second history: it is the same history read
with another filter (`hub.store.importfeed`), and the export feed reads it without these
rows.

Each EndpointSliceExport is recorded as an importing cluster must see it
(`hub.store.importview`): its ports cut to those its source cluster serves in the import;
a slice not imported at all has its change recorded as DELETED, so an importer holding an
older, visible form of it drops it. Cutting at write time, once, rather than per watcher
is what lets every agent of the fleet receive the same bytes.

A write that changes a key's per-port cluster lists changes what some slices look like to
importers although the slices themselves did not change: those slices are recorded again
(re-sent) in the same transaction, each only when its cut form actually differs.
Withdrawing an export withdraws its cluster's slices of that key in the same transaction.

While a cluster is Stale its exports may be withheld (`hub.store.withdrawals`, which
records the events of withholding and giving back): a withheld export's slices are not
imported (a write of one is recorded as DELETED) and are not re-sent when the import's
ports change. Each writer reads the rows of `endpoint_withdrawals` of its keys under the
keys' locks (`withheld_among`). `mcsync.io/import-clusters` (`hub.store.importselection`)
adds rows for one cluster's feed alone (`admission`, `exclusion`: the audience markers).

Within one transaction the import feed's changes take revisions before the transaction's
export changes (`ImportChanges` is allocated first): a slice deletion, then the
ServiceImport, then the slices re-sent or written. Export records keep the newest revisions
of their transaction, as before this feed existed.

Why the cut is here: this half runs on the connection of a write transaction under the
keys' locks and imports nothing of the read half (`hub.store.importfeed`, which opens its
own read transactions and pages the history for watches), as the apiserver keeps
`etcd3/store.go` apart from `watcher.go`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store.context import StoreContext
from hub.store.importselection import judge_key
from hub.store.importview import (
    Key,
    Triple,
    import_text,
    importer_view,
    served_ports,
    slice_text,
)
from hub.store.locks import KeyRow
from hub.store.revisions import ChangeRecord
from hub.store.rows import PENDING_REVISION
from hub.store.tables import endpoint_slices, endpoint_withdrawals
from shared import constants
from shared.timefmt import utcnow

# The `cluster_id` of a ServiceImport's change row: it belongs to every cluster, and to no
# cluster's export feed (no cluster can be named "").
FLEET = ""


def _change_type(before: bool | None, after: bool) -> str:
    """The event of a slice whose imported state goes from `before` (None: absent)."""
    if not after:
        return "DELETED"
    return "MODIFIED" if before else "ADDED"


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
        self, first: int, *, pending: bool = False
    ) -> tuple[list[tuple[int, ChangeRecord]], dict[Key, int], list[dict[str, Any]]]:
        """With revisions from `first` on: the history rows, each ServiceImport's revision,
        and the `endpoint_slices` rows to update with theirs (re-sent slices). Each row carries the
        time of this write (`mcsync.io/changed-at`): the transaction commits right after.

        `pending`: the revisions are not taken yet (`locks.take_revisions_and_write`):
        `first` counts from 1 and each text holds `PENDING_REVISION` where its revision
        goes (write the rows with `change_rows(…, pending=True)` and `relative` stamps)."""
        changed_at = utcnow()
        history: list[tuple[int, ChangeRecord]] = []
        import_revisions: dict[Key, int] = {}
        stamps: dict[Triple, dict[str, Any]] = {}
        for offset, item in enumerate(self.items):
            rev = first + offset
            shown: int | str = PENDING_REVISION if pending else rev
            if isinstance(item, ImportChange):
                text = import_text(
                    namespace=item.namespace,
                    name=item.name,
                    resource_version=shown,
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
                    resource_version=shown,
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
