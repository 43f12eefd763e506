"""The change feed's read half: what a watch or a list reads of the one revision history
(see `docs/reference.md#change-feeds`).

The history is written by `hub.store.revisions` (one global revision counter, one row per
changed record, commits in revision order, pruning past `history_limit`); this module only
reads it, and is where a reader learns, exactly, whether a change after its revision was
lost (→ Gone, `read_retained`, shared with the import feed's reader `hub.store.importfeed`).

`Feed.changes_since` replays the retained history in revision order (a watch's replay, a
list's resume). `Feed.subscribe` hands a watch the live changes of its cluster from the
replica's one shared reader (`hub.store.fanout`), which the ChangeNotifier wakes on this
process's commits and, on PostgreSQL, on every replica's NOTIFY; a commit then costs one
history read and one encoding, not one of each per watch. `event_line` is the one wire form
of a watch event, used for the shared lines and for what a watch sends by itself (replay,
BOOKMARK, ERROR) alike.

Why the cut between writing and reading is here: the readers open their own read
transactions through the store context (`hub.store.context`), while the transaction path
(the context's locks, `hub.store.locks`) needs the revision counter. With both halves in
one module the store had an import circle (context → locks → feed → context); now the
write half imports nothing of this one, as the apiserver keeps `etcd3/store.go` (writes)
apart from `watcher.go` (watches).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Row, Select, select

from hub.store import codec
from hub.store.clusterstate import ClusterStates
from hub.store.context import StoreContext
from hub.store.errors import Gone
from hub.store.fanout import BufferLimits, FeedFanout, Subscription
from hub.store.revisions import read_current_revision
from hub.store.tables import REVISION_ROW_ID, changes, clusters
from hub.store.tables import revision as revision_table
from shared import constants
from shared.models import WatchEvent, to_wire


def event_line(event: WatchEvent) -> bytes:
    """A watch event as it goes on the wire: compact JSON and a newline (NDJSON).

    orjson, at a tenth of the stdlib's cost; what orjson refuses (see
    `codec.canonical_json`: nothing the API accepts) goes to the stdlib encoder.
    """
    wire = to_wire(event)
    try:
        return orjson.dumps(wire, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return (json.dumps(wire, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")


def check_history_read(revision: int, limit: int) -> None:
    """The arguments of a history read (`Feed.rows_since`, `ImportFeed.imports_since`)."""
    if revision < 0:
        raise ValueError(f"revision must be 0 or more, got {revision}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")


# The history's prune mark, as every history read reads it (built once: each watch's
# change costs the shared reader one of these reads).
_PRUNED_THROUGH = select(revision_table.c.pruned_through).where(
    revision_table.c.id == REVISION_ROW_ID
)


async def read_retained(
    ctx: StoreContext,
    query: Select[Any],
    *,
    revision: int,
    relist: str,
    parameters: dict[str, Any] | None = None,
) -> Sequence[Row[Any]]:
    """The rows of `query` (with its bound `parameters`), a read of the history after
    `revision`; Gone (advising `relist`) when a change after `revision` has been pruned.

    The prune mark is read AFTER the rows, in the same read transaction: a prune that
    committed in between makes us answer Gone (conservative), never a silently incomplete
    replay. Every history reader (the export and the import feed) goes through here.
    """
    async with ctx.read() as conn:
        rows = (await conn.execute(query, parameters)).all()
        pruned = (await conn.execute(_PRUNED_THROUGH)).scalar_one()
    if revision < pruned:
        raise Gone(
            f"revision {revision} is older than the retained history "
            f"(changes up to {pruned} were pruned); {relist}"
        )
    return rows


@dataclass(frozen=True)
class HistoryRow:
    """One retained change as read, decoded only when `event()` is called."""

    revision: int
    cluster_id: str
    type: str
    text: str
    state: str

    @property
    def key(self) -> str:
        """The fan-out routes a change to the watches of its cluster."""
        return self.cluster_id

    def event(self) -> WatchEvent:
        return WatchEvent(
            type=self.type,  # type: ignore[arg-type]
            object=codec.export_from_text(self.text, cluster_state=self.state),
        )

    def line(self) -> bytes:
        """The event's wire line from the stored text, without a model: the text is the
        record's wire JSON (`codec.export_to_text`) less the read-time cluster state,
        spliced in here. The same JSON value as `event_line(self.event())`, keys sorted;
        parsing and validating each change into a model to dump it again was the watch
        fan-out's main cost (157,000 events in bench 5)."""
        obj = orjson.loads(self.text)
        obj.setdefault("status", {})["clusterState"] = self.state
        return orjson.dumps({"type": self.type, "object": obj}, option=orjson.OPT_APPEND_NEWLINE)


class Feed:
    """Readers of the change feed."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._fanout: FeedFanout | None = None

    async def current_revision(self) -> int:
        async with self._ctx.read() as conn:
            return await read_current_revision(conn)

    async def changes_since(
        self, *, revision: int, cluster_id: str | None = None, limit: int = 500
    ) -> list[WatchEvent]:
        """Every retained change after `revision` (of one cluster, when given), oldest first.

        At most `limit` events; ask again from the last one's resourceVersion for more.
        Raises Gone when a change after `revision` has been pruned from the history.
        """
        rows = await self.rows_since(revision=revision, cluster_id=cluster_id, limit=limit)
        return [row.event() for row in rows]

    async def rows_since(
        self, *, revision: int, cluster_id: str | None = None, limit: int = 500
    ) -> list[HistoryRow]:
        """`changes_since`, undecoded: each change's cluster and revision, decoded on demand
        (the shared reader decodes only the changes somebody watches)."""
        check_history_read(revision, limit)
        query = (
            select(
                changes.c.revision,
                changes.c.cluster_id,
                changes.c.type,
                changes.c.object,
                clusters.c.last_heartbeat,
            )
            .select_from(changes.outerjoin(clusters, clusters.c.name == changes.c.cluster_id))
            .where(changes.c.revision > revision)
            # The export feed only: the import feed's rows share the history.
            .where(changes.c.kind == constants.KIND_EXPORT)
            .order_by(changes.c.revision)
            .limit(limit)
        )
        if cluster_id is not None:
            query = query.where(changes.c.cluster_id == cluster_id)
        rows = await read_retained(
            self._ctx,
            query,
            revision=revision,
            relist="relist and watch from the list's resourceVersion",
        )
        states = ClusterStates(self._ctx.cluster_ttl)
        return [
            HistoryRow(
                revision=int(row.revision),
                cluster_id=row.cluster_id,
                type=row.type,
                text=row.object,
                state=states.of_export(row.last_heartbeat),
            )
            for row in rows
        ]

    # --- the shared reader (hub.store.fanout) -----------------------------------------

    @property
    def fanout(self) -> FeedFanout:
        if self._fanout is None:

            async def read_page(revision: int, limit: int) -> list[HistoryRow]:
                return await self.rows_since(revision=revision, limit=limit)

            self._fanout = FeedFanout(
                notifier=self._ctx.notifier, read_page=read_page, name="export-feed"
            )
        return self._fanout

    def subscribe(
        self,
        cluster_id: str | None,
        *,
        limits: BufferLimits | None = None,
        on_overflow: Callable[[], object] | None = None,
    ) -> Subscription:
        """Receive the changes of `cluster_id` (None: all) after `joined_at` in memory, as
        shared wire lines, from this replica's one shared history reader; ended (its
        `overflowed` set) when it falls `limits` behind (see `hub.store.fanout`)."""
        return self.fanout.subscribe(cluster_id, limits=limits, on_overflow=on_overflow)

    async def close(self) -> None:
        if self._fanout is not None:
            await self._fanout.close()

    def known_revision(self) -> int:
        """The newest committed revision this process knows of (no I/O; the feed-lag
        metric compares the watches' positions with it, and a watch from a revision at or
        below it is not ahead of the hub, `hub.api.params.watch_options`)."""
        return self._ctx.notifier.known
