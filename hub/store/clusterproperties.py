"""Cluster properties: each cluster's reported ClusterProperty objects, and the feed of
their changes that every member reads (docs/reference.md#cluster-properties).

A cluster's properties are kept beside its registration (`clusters.properties`, canonical
JSON; NULL until its agent reports). Cluster selection in every importing cluster reads
the properties of the clusters it imports from, so each change is also recorded in the
one revision history (`changes`, kind `ClusterProperties`, `cluster_id` the cluster) by the
transaction that stores it, like every other change: the fleet-properties feed
(`GET …/clusters/{c}/fleetproperties`, list then watch) is that history read with its own
filter, pushed through one shared reader per replica (`hub.store.fanout`). A change of
one cluster's properties is thus one write and one event per watching agent — never a
rewrite of the ServiceImports it exports.

A report equal to what is stored writes nothing (agents re-read their properties on every
heartbeat; only a change reaches the hub as a PUT, and a repeated one costs one read).
Deregistering a cluster records its properties' DELETED (`deleted_change`), so members
forget it.

Lock order (`hub.store.locks`): the cluster's row is updated first (step 1), the revision
counter taken last (step 3); no key is locked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import codec
from hub.store.clusterrow import lock_reporting_cluster
from hub.store.context import StoreContext
from hub.store.fanout import BufferLimits, FeedFanout, Subscription
from hub.store.feed import check_history_read, read_retained
from hub.store.importchanges import ImportChanges, admission, exclusion, keys_slices
from hub.store.importselection import judge_cluster
from hub.store.locks import lock_selection_exclusive, take_revisions
from hub.store.revisions import ChangeRecord, change_rows, read_current_revision
from hub.store.sharedreader import SharedReader
from hub.store.tables import changes, clusters, service_imports
from shared import constants
from shared.models import (
    ClusterProperties,
    ClusterPropertiesMeta,
    ClusterPropertiesSpec,
    WatchEvent,
)
from shared.timefmt import format_millis, utcnow

__all__ = [
    "ClusterPropertiesStore",
    "PropertiesRow",
    "deleted_change",
    "properties_text",
    "stored_properties",
]


def stored_properties(text: str | None) -> dict[str, str] | None:
    """A `clusters.properties` value as a dict; None when the cluster never reported."""
    return None if text is None else dict(json.loads(text))


def properties_text(
    cluster: str, properties: Mapping[str, str], *, resource_version: int, changed_at: Any = None
) -> str:
    """The canonical JSON of a `ClusterProperties` object (as `to_wire` gives it)."""
    metadata: dict[str, Any] = {"name": cluster, "resourceVersion": str(resource_version)}
    if changed_at is not None:
        metadata["annotations"] = {constants.ANNOTATION_CHANGED_AT: format_millis(changed_at)}
    return codec.canonical_json(
        {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND_CLUSTER_PROPERTIES,
            "metadata": metadata,
            "spec": {"properties": dict(properties)},
        }
    )


def deleted_change(cluster: str, stored: str | None) -> ChangeRecord | None:
    """The history row that tells members a deregistered cluster's properties are gone
    (None: it never reported); written with `record_changes`."""
    if stored is None:
        return None
    return _record("DELETED", cluster, stored_properties(stored) or {})


def _record(kind: str, cluster: str, properties: Mapping[str, str]) -> ChangeRecord:
    # The text holds the properties alone until the revision is known (`stamped`).
    return ChangeRecord(
        kind,
        cluster,
        "",
        cluster,
        None,
        codec.canonical_json(dict(properties)),
        constants.KIND_CLUSTER_PROPERTIES,
    )


def stamped(records: list[ChangeRecord], first: int) -> list[tuple[int, ChangeRecord]]:
    """(revision, record) pairs from `first` on, each record's text the whole object."""
    changed_at = utcnow()
    out: list[tuple[int, ChangeRecord]] = []
    for offset, record in enumerate(records):
        rev = first + offset
        text = properties_text(
            record.cluster_id,
            json.loads(record.object_text()),
            resource_version=rev,
            changed_at=changed_at,
        )
        out.append(
            (
                rev,
                ChangeRecord(
                    record.type,
                    record.cluster_id,
                    "",
                    record.name,
                    None,
                    text,
                    constants.KIND_CLUSTER_PROPERTIES,
                ),
            )
        )
    return out


@dataclass(frozen=True)
class PropertiesRow:
    """One retained properties change as read (the fan-out's `FeedRow`)."""

    revision: int
    cluster_id: str
    type: str
    text: str

    @property
    def key(self) -> str | None:
        """Every member reads every cluster's properties: one routing key for all."""
        return None

    def event(self) -> WatchEvent:
        return WatchEvent(
            type=self.type,  # type: ignore[arg-type]
            object=ClusterProperties.model_validate_json(self.text),
        )

    def line(self) -> bytes:
        return b'{"type":"' + self.type.encode() + b'","object":' + self.text.encode() + b"}\n"


class ClusterPropertiesStore:
    """Stores reported properties and reads their feed (list, history, shared reader)."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._reader = SharedReader(ctx, self.rows_since, name="properties-feed")

    async def put(self, cluster: str, properties: Mapping[str, str]) -> bool:
        """Replace `cluster`'s properties (validated by the caller's model); True when they
        changed (one history row recorded), False when equal to what is stored. NotFound
        when the cluster is not registered."""
        text = codec.canonical_json(dict(properties))
        newest: int | None = None
        async with self._ctx.write() as conn:
            row = await lock_reporting_cluster(conn, self._ctx, cluster, clusters.c.properties)
            if row[0] == text:
                return False
            await conn.execute(
                update(clusters).where(clusters.c.name == cluster).values(properties=text)
            )
            record = _record("ADDED" if row[0] is None else "MODIFIED", cluster, properties)
            feed = await self._selection(conn, cluster, properties)
            newest = await record_changes(conn, self._ctx, [record], feed)
        if newest is not None:
            self._ctx.notifier.committed(newest)
        return True

    async def _selection(
        self, conn: AsyncConnection, cluster: str, properties: Mapping[str, str]
    ) -> ImportChanges:
        """The keys whose `mcsync.io/import-clusters` now leaves `cluster` out or lets it
        in, and what its import feed must hear of each (`hub.store.importselection`)."""
        await lock_selection_exclusive(conn, self._ctx)
        left, admitted = await judge_cluster(conn, self._ctx, cluster, properties)
        feed = ImportChanges()
        keys = sorted(left | admitted)
        if not keys:
            return feed
        found = await self._ctx.rows.select_in(
            conn, service_imports, ("namespace", "name"), keys
        )
        rows = {(r["namespace"], r["name"]): r for r in found if r["created_at"] is not None}
        held = await keys_slices(conn, self._ctx, sorted(rows))
        for key in keys:
            row = rows.get(key)
            if row is None:
                continue
            flip = exclusion if key in left else admission
            feed.items.extend(flip(key, row, held.get(key, []), {cluster}))
        return feed

    async def current_revision(self) -> int:
        async with self._ctx.read() as conn:
            return await read_current_revision(conn)

    async def list_all(self) -> tuple[list[ClusterProperties], str]:
        """Every cluster's reported properties (clusters that never reported are left
        out), by name, and the revision to watch from: read first, so every change after
        it reaches a watch from it."""
        async with self._ctx.read() as conn:
            revision = await read_current_revision(conn)
            rows = (
                await conn.execute(
                    select(clusters.c.name, clusters.c.properties)
                    .where(clusters.c.properties.is_not(None), clusters.c.deleting.is_(False))
                    .order_by(clusters.c.name)
                )
            ).all()
        items = [
            ClusterProperties(
                metadata=ClusterPropertiesMeta(name=name, resource_version=str(revision)),
                spec=ClusterPropertiesSpec(properties=stored_properties(text) or {}),
            )
            for name, text in rows
        ]
        return items, str(revision)

    async def rows_since(self, revision: int, limit: int = 500) -> list[PropertiesRow]:
        """Every retained properties change after `revision`, oldest first, at most
        `limit`; Gone when a change after `revision` was pruned."""
        check_history_read(revision, limit)
        query = (
            select(changes.c.revision, changes.c.cluster_id, changes.c.type, changes.c.object)
            .where(
                changes.c.revision > revision,
                changes.c.kind == constants.KIND_CLUSTER_PROPERTIES,
            )
            .order_by(changes.c.revision)
            .limit(limit)
        )
        rows = await read_retained(
            self._ctx,
            query,
            revision=revision,
            relist="relist the fleet's cluster properties and watch from the list's "
            "resourceVersion",
        )
        return [
            PropertiesRow(int(r.revision), r.cluster_id, r.type, r.object) for r in rows
        ]

    async def changes_since(self, *, revision: int, limit: int = 500) -> list[WatchEvent]:
        return [row.event() for row in await self.rows_since(revision, limit)]

    @property
    def fanout(self) -> FeedFanout:
        return self._reader.get()

    def subscribe(
        self,
        *,
        limits: BufferLimits | None = None,
        on_overflow: Callable[[], object] | None = None,
    ) -> Subscription:
        return self.fanout.subscribe(None, limits=limits, on_overflow=on_overflow)

    async def close(self) -> None:
        await self._reader.close()


async def record_changes(
    conn: AsyncConnection,
    ctx: StoreContext,
    records: list[ChangeRecord],
    feed: ImportChanges | None = None,
) -> int | None:
    """Take revisions (LAST) for `records` (and the import feed's `feed`, first) and
    write their history rows; the newest."""
    count = len(records) + (len(feed) if feed is not None else 0)
    if not count:
        return None
    newest = await take_revisions(conn, ctx, count)
    first = newest - count + 1
    history: list[tuple[int, ChangeRecord]] = []
    if feed is not None and len(feed):
        history, _, _ = feed.records(first)
        first += len(feed)
    history += stamped(records, first)
    await ctx.rows.write(conn, [change_rows(history)])
    return newest

