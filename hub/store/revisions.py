"""The change feed's write half: the one revision counter and the history rows a write
records (see `docs/reference.md#change-feeds`).

Every writer takes its revisions with one statement on the one counter row
(`allocate_revisions`, reached through `locks.take_revisions`) and then inserts one
history row per changed record (`change_rows`) in the same transaction:

    UPDATE revision SET value = value + k                      -- takes the counter's row lock
      RETURNING value, pg_notify('mcsync_changes', value)       -- NOTIFY delivered at commit
    INSERT INTO changes … (k rows, one per changed record)

Why the counter row decides the feed's order: its lock is held from the allocation to the
commit, so a transaction that takes revisions later also commits later — commits happen
in revision order. A reader that has read every change up to N therefore never sees a
commit with a revision ≤ N appear behind it, and "resume from N" is exact. Writers take
revisions as late as they can, after locking, reading, planning and judging
(`hub.store.writer`, `hub.store.endpointslices`), so that only the statements writing the
rows are serialised; taking them first would queue every key's writers behind each other
for the whole write. Those two writers take them in the very statement that writes their
rows (`locks.take_revisions_and_write`: the counter's UPDATE is that statement's first
part, and each row's revision is counted from 1 until then, a change row's text holding
`rows.PENDING_REVISION` where its revision goes), so the counter is held over that
statement and the COMMIT, not over one round trip more. On SQLite the whole transaction
holds the database's single writer lock anyway (BEGIN IMMEDIATE), so the order is
trivially the same.

History retention: the last `history_limit` revisions are kept. Pruning runs inside the
write whose allocation crosses a multiple of a step (so its cost is bounded and amortised)
and remembers the newest pruned revision in `revision.pruned_through`, which is how a
reader knows, exactly, whether a change after its revision was lost (`hub.store.feed`).

Why this is a module of its own: the transaction path (`hub.store.locks`, reached from
`hub.store.context.for_backend`) needs the counter, while the feed's readers
(`hub.store.feed`) need the store context to open read transactions. Kept in one module,
the two made the store's one import circle (context → locks → feed → context). This half
works on a connection it is handed and imports nothing of the read side or of the context,
as the apiserver keeps what writes revisions (`etcd3/store.go`) apart from what watches
them (`watcher.go`). `read_current_revision` is here too: a read of the counter row on a
connection the caller holds, which writers and readers alike use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import codec
from hub.store.rows import Write
from hub.store.tables import REVISION_ROW_ID, changes
from hub.store.tables import revision as revision_table
from shared import constants
from shared.models import InternalServiceExport


@dataclass(frozen=True)
class ChangeRecord:
    """One record's change in a write, before its revision is known."""

    type: str  # ADDED / MODIFIED / DELETED
    cluster_id: str
    namespace: str
    name: str
    # The record after the change (the last state for DELETED); None when `text` is given.
    object: InternalServiceExport | None
    # `codec.export_to_text(object)` when the writer has it already (`codec.export_text`).
    text: str | None = None
    # Which feed the row belongs to: InternalServiceExport rows make the per-cluster
    # export feed; ServiceImport and EndpointSliceExport rows the import feed
    # (`hub.store.importchanges`, which always gives `text`).
    kind: str = constants.KIND_EXPORT

    def __post_init__(self) -> None:
        if self.object is None and self.text is None:
            raise ValueError("a change needs its object or its text")

    def object_text(self) -> str:
        if self.text is not None:
            return self.text
        assert self.object is not None  # __post_init__
        return codec.export_to_text(self.object)


def prune_step(history_limit: int) -> int:
    """How often (in revisions) a write prunes: a tenth of the history, 1..1000."""
    return max(1, min(1000, history_limit // 10))


async def allocate_revisions(conn: AsyncConnection, *, count: int, history_limit: int) -> int:
    """Take `count` revisions; answer the newest. Call LAST in the write (see module doc).

    The statement as SQLAlchemy says it (SQLite); PostgreSQL's adds the NOTIFY and goes on
    the driver's connection (`locks.PostgresLocks.revisions`). Both then `prune_history`.
    """
    stmt = (
        update(revision_table)
        .where(revision_table.c.id == REVISION_ROW_ID)
        .values(value=revision_table.c.value + count)
        .returning(revision_table.c.value)
    )
    newest = int((await conn.execute(stmt)).scalar_one())
    await prune_history(conn, newest=newest, count=count, history_limit=history_limit)
    return newest


async def prune_history(
    conn: AsyncConnection, *, newest: int, count: int, history_limit: int
) -> None:
    """Drop the history older than the last `history_limit` revisions, when the `count`
    revisions just taken (up to `newest`) crossed a multiple of the pruning step."""
    step = prune_step(history_limit)
    if (newest - count) // step != newest // step and newest > history_limit:
        horizon = newest - history_limit
        await conn.execute(delete(changes).where(changes.c.revision <= horizon))
        # Only this transaction can move the watermark (it holds the counter row), and
        # horizons only grow, so a plain assignment keeps it monotonic.
        await conn.execute(
            update(revision_table)
            .where(revision_table.c.id == REVISION_ROW_ID)
            .values(pruned_through=horizon)
        )


def change_rows(records: Sequence[tuple[int, ChangeRecord]], *, pending: bool = False) -> Write:
    """The history rows of (revision, change) pairs, which the watch replays; written with
    the transaction's other rows in one `RowWriter.write`. `pending`: the revisions count
    from 1 and each text holds `PENDING_REVISION` (`locks.take_revisions_and_write`)."""
    rows = [
        {
            "revision": rev,
            "cluster_id": rec.cluster_id,
            "namespace": rec.namespace,
            "name": rec.name,
            "type": rec.type,
            "object": rec.object_text(),
            "kind": rec.kind,
        }
        for rev, rec in records
    ]
    if pending:
        return Write(
            "insert", changes, rows, relative=("revision",), spliced=(("object", "revision"),)
        )
    return Write("insert", changes, rows)


async def read_current_revision(conn: AsyncConnection) -> int:
    value = (
        await conn.execute(
            select(revision_table.c.value).where(revision_table.c.id == REVISION_ROW_ID)
        )
    ).scalar_one()
    return int(value)
