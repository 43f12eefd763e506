"""One write transaction over a set of service keys: every change of an export (SPEC §3).

A PUT, a DELETE, an annotation patch, a sync batch, a cluster's withdrawal: each is a list
of `Mutation`s given to `write_exports` inside the caller's transaction (the caller has
locked the clusters, `locks.lock_clusters`). The plan, step by step:

1. **Lock** the keys, sorted (`locks.lock_keys`; the order is `locks`' docstring).
2. **Read** every export of those keys with ONE indexed query, and **plan** the mutations
   against them (`mutations.plan`): which are real, and each affected key's exports as
   they will be, in precedence order.
3. **Judge** each affected key (`verdicts`): every record written, and every other export
   whose condition now reads differently, takes a revision; the ServiceImports whose
   documents change are stored; the import feed learns what the write does to it
   (`importfeed.follow_exports`).
4. **Revisions**, LAST of the locks (`locks.take_revisions`): one per change, the import
   feed's first, so export records keep their transaction's newest revisions.
5. **Write each row once**, verdict and revision included (`ctx.rows`): the records, the
   change rows, the ServiceImports. The verdict is known before the insert, so no row is
   written and then stamped.

Cost is proportional to the number of keys written and the exports of those keys; no
statement scans the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import codec, importfeed
from hub.store.context import StoreContext
from hub.store.feed import ChangeRecord, insert_changes
from hub.store.locks import Key, lock_keys, take_revisions
from hub.store.mutations import Entry, Mutation, MutationResult, Plan, plan
from hub.store.tables import exports, service_imports
from hub.store.verdicts import Change, import_rows, judge_plan, verdict_changes
from shared.models import (
    Condition,
    InternalServiceExport,
    InternalServiceExportStatus,
    ObjectMeta,
)

__all__ = ["Mutation", "MutationResult", "WriteOutcome", "write_exports"]


@dataclass
class WriteOutcome:
    results: list[MutationResult]  # one per mutation, in their order
    newest_revision: int | None  # None when nothing was written


async def write_exports(
    conn: AsyncConnection,
    ctx: StoreContext,
    mutations: Sequence[Mutation],
    *,
    now: datetime,
    cluster_states: Mapping[str, str] | None = None,
    answer_records: bool = True,
) -> WriteOutcome:
    """Apply `mutations` (at most one per record) in the caller's transaction.

    `cluster_states` gives the answered records their cluster's state. With
    `answer_records=False` a changed record is answered without a model (a sync only
    counts its results, and a model per record was a tenth of its time).
    """
    if len({m.record_id for m in mutations}) != len(mutations):
        raise ValueError("a write may change each export only once")
    keys = sorted({m.key for m in mutations})
    before = await lock_keys(conn, ctx, keys)  # 1.
    stored = await _read_keys(conn, ctx, keys)  # 2.
    states = cluster_states or {}
    p = plan(mutations, stored, now=now, cluster_states=states, answer_records=answer_records)
    if not p.written:
        await ctx.rows.delete(conn, service_imports, p.empty)  # lock rows left for nothing
        return WriteOutcome(p.results, None)
    judged = judge_plan(ctx.instruments, p)  # 3.
    changes = verdict_changes(
        p, judged, now, order={m.record_id: i for i, m in enumerate(mutations)}
    )
    imports = import_rows(judged, before, now)
    feed = await importfeed.follow_exports(
        conn, ctx, written=p.written, before=before, upserts=imports, deletes=p.empty
    )
    newest = await take_revisions(conn, ctx, len(feed) + len(changes))  # 4.
    first = newest - len(changes) + 1
    feed_history, import_revisions, slice_stamps = feed.records(first - len(feed))
    history, records = _stamp(p, changes, first, answer_records)  # 5.
    await ctx.rows.delete(conn, exports, list(p.withdrawn))
    await ctx.rows.insert(conn, exports, records["insert"])
    await ctx.rows.update(conn, exports, records["update"])
    await ctx.rows.update(conn, exports, records["stamp"])
    await insert_changes(conn, ctx, [*feed_history, *history])
    await importfeed.stamp_slices(conn, ctx, slice_stamps)
    await ctx.rows.delete(conn, service_imports, p.empty)
    for row in imports:
        row["resource_version"] = import_revisions.get((row["namespace"], row["name"]), newest)
    await ctx.rows.upsert(conn, service_imports, imports)
    _answer(mutations, p, history, states)
    return WriteOutcome(p.results, newest)


async def _read_keys(
    conn: AsyncConnection, ctx: StoreContext, keys: Sequence[Key]
) -> Sequence[RowMapping]:
    """Every export of `keys` (`ix_exports_key_precedence`), the written records among them."""
    where = ctx.rows.where_in((exports.c.namespace, exports.c.name), keys)
    return (await conn.execute(select(exports).where(where))).mappings().all()


def _stamp(
    p: Plan, changes: Sequence[Change], first: int, answer_records: bool
) -> tuple[list[tuple[int, ChangeRecord]], dict[str, list[dict[str, Any]]]]:
    """Each change's revision, its change row, and its `exports` row to write, whole."""
    history: list[tuple[int, ChangeRecord]] = []
    records: dict[str, list[dict[str, Any]]] = {"insert": [], "update": [], "stamp": []}
    for rev, change in enumerate(changes, start=first):
        cid, ns, name = change.rid
        entry, condition = change.entry, change.condition
        if entry is None or condition is None:  # a withdrawal keeps the record's last state
            row = p.withdrawn[change.rid]
            gone = codec.export_model(row)
            gone.metadata.resource_version = str(rev)
            history.append((rev, ChangeRecord("DELETED", cid, ns, name, gone)))
            continue
        condition_text = codec.condition_to_text(condition)
        row_id = {"cluster_id": cid, "namespace": ns, "name": name}
        verdict = {
            "annotations": entry.annotations_text,
            "condition": condition_text,
            "conflict": condition.status == "True",
            "conflict_reasons": change.reasons,
            "resource_version": rev,
        }
        if entry.row is None:
            records["insert"].append(
                {**row_id, **(entry.columns or {}), **verdict, "created_at": entry.created_at}
            )
        elif entry.columns is not None:
            records["update"].append({**row_id, **entry.columns, **verdict})
        else:
            records["stamp"].append({**row_id, **verdict})
        answer = _model(entry, condition, rev) if answer_records else None
        # The change row's text from the texts at hand: the same bytes as dumping the
        # record's model (`codec.export_text`), without building it.
        text = codec.export_text(
            namespace=ns,
            name=name,
            resource_version=rev,
            created_at=entry.created_at,
            annotations_text=entry.annotations_text,
            spec_text=entry.spec_text,
            condition_text=condition_text,
        )
        history.append((rev, ChangeRecord(change.type, cid, ns, name, answer, text=text)))
    return history, records


def _model(entry: Entry, condition: Condition, rev: int) -> InternalServiceExport:
    return InternalServiceExport(
        metadata=ObjectMeta(
            name=entry.rid[2],
            namespace=entry.rid[1],
            resource_version=str(rev),
            creation_timestamp=entry.created_at,
            annotations=codec.annotations_from_text(entry.annotations_text),
        ),
        spec=entry.spec,
        status=InternalServiceExportStatus(conditions=[condition]),
    )


def _answer(
    mutations: Sequence[Mutation],
    p: Plan,
    history: Sequence[tuple[int, ChangeRecord]],
    states: Mapping[str, str],
) -> None:
    """Give each changed record's result its stored object, with its cluster's state."""
    stored = {(c.cluster_id, c.namespace, c.name): c.object for _, c in history}
    for m, result in zip(mutations, p.results, strict=True):
        obj = stored.get(m.record_id)
        if not result.changed or obj is None:
            continue
        state = states.get(m.cluster_id)
        if state is not None:
            # The answer's own status, the rest shared: the history's object (read by
            # the feed) must not carry a read-time state, and a deep copy of the whole
            # record was 15 % of a PUT's CPU (bench/put_throughput profile).
            status = obj.status.model_copy(update={"cluster_state": state})
            obj = obj.model_copy(update={"status": status})
        result.record = obj
