"""One write transaction over a set of service keys: every change of an export
(docs/reference.md#conflicts).

A PUT, a DELETE, an annotation patch, a sync batch, a cluster's withdrawal: each is a list
of `Mutation`s given to `write_exports` inside the caller's transaction (the caller has
locked the clusters, `locks.lock_clusters`). The plan, step by step:

1. **Lock** the keys (`locks.lock_keys`; the order is `locks`' docstring).
2. **Read** the keys' ServiceImports and every export of those keys with ONE statement
   (`RowWriter.select_many`), and **plan** the mutations against them (`mutations.plan`):
   which are real, and each affected key's exports as they will be, in precedence order.
3. **Judge** each affected key (`verdicts`): every record written, and every other export
   whose condition now reads differently, takes a revision; the ServiceImports whose
   documents change are stored; the import feed learns what the write does to it
   (`importchanges.follow_exports`).
4. **Revisions**, LAST of the locks: one per change, the import feed's first, so export
   records keep their transaction's newest revisions; and in the same statement
   (`locks.take_revisions_and_write`)
5. **each row written once**, verdict and revision included (`stamps` builds them with
   the revisions counted from 1, the statement adds the counter's value): the records,
   the change rows, the ServiceImports. The verdict is known before the insert, so no
   row is written and then stamped.

From the clusters' lock to COMMIT that is five round trips on PostgreSQL (clusters, keys,
the read, the revisions with the rows, COMMIT), the revision counter held over the last
two (docs/benchmarks.md, fleet scale; `bench.write_round_trips` counts them).

Cost is proportional to the number of keys written and the exports of those keys; no
statement scans the table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import importchanges, stamps
from hub.store.context import StoreContext
from hub.store.errors import StoreError
from hub.store.locks import Key, lock_keys, take_revisions_and_write
from hub.store.mutations import Mutation, MutationResult, plan
from hub.store.revisions import change_rows
from hub.store.rows import Write
from hub.store.tables import endpoint_slices, exports, service_imports
from hub.store.usage import Allowance, usage_write
from hub.store.verdicts import import_rows, judge_plan, verdict_changes

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
    quota: Allowance | None = None,
) -> WriteOutcome:
    """Apply `mutations` (at most one per record) in the caller's transaction.

    `cluster_states` gives the answered records their cluster's state. With
    `answer_records=False` a changed record is answered without a model (a sync only
    counts its results). `quota`: what each cluster may still create; a create past it
    is refused alone (`MutationResult.error`, docs/reference.md#scope-and-limits). Every write keeps
    the clusters' counts of exports and slices (`hub.store.usage`).
    """
    if len({m.record_id for m in mutations}) != len(mutations):
        raise ValueError("a write may change each export only once")
    keys = sorted({m.key for m in mutations})
    await lock_keys(conn, ctx, keys, read=False)  # 1.
    stored_imports, stored = await _read_keys(conn, ctx, keys)  # 2.
    before = {(r["namespace"], r["name"]): r for r in stored_imports}
    states = cluster_states or {}
    refused = _over_quota(mutations, stored, quota) if quota is not None else {}
    live = [m for i, m in enumerate(mutations) if i not in refused] if refused else mutations
    p = plan(live, stored, now=now, cluster_states=states, answer_records=answer_records)
    if refused:
        p.results = _with_refusals(p.results, refused, len(mutations))
    if not p.written:
        await ctx.rows.delete(conn, service_imports, p.empty)  # an older hub's lock rows
        return WriteOutcome(p.results, None)
    judged = judge_plan(ctx.instruments, p)  # 3.
    changes = verdict_changes(p, judged, now, order={m.record_id: i for i, m in enumerate(live)})
    imports = import_rows(judged, before, now)
    feed = await importchanges.follow_exports(
        conn, ctx, written=p.written, before=before, upserts=imports, deletes=p.empty
    )
    # 4. and 5.: revisions counted from 1 (the import feed's first) until they are taken,
    # by the one statement that writes the rows with them on PostgreSQL
    count = len(feed) + len(changes)
    feed_history, import_revisions, slice_stamps = feed.records(1, pending=True)
    rows = stamps.stamp(p, changes, len(feed) + 1, answer_records=answer_records, pending=True)
    for row in imports:
        row["resource_version"] = import_revisions.get((row["namespace"], row["name"]), count)
    later = ("resource_version",)
    newest = await take_revisions_and_write(
        conn,
        ctx,
        count,
        [
            Write.delete(exports, list(p.withdrawn)),
            Write("insert", exports, rows.inserts, relative=later),
            Write("update", exports, rows.updates, relative=later),
            Write("update", exports, rows.stamps, relative=later),
            change_rows([*feed_history, *rows.history], pending=True),
            Write("update", endpoint_slices, slice_stamps, relative=later),
            Write.delete(service_imports, p.empty),
            Write("upsert", service_imports, imports, relative=later),
            _usage(p.written, feed.deleted_slices),
        ],
    )
    stamps.settle(rows.history, newest - count)
    stamps.answer(mutations, p, rows.history, states)  # p.results: one per mutation
    return WriteOutcome(p.results, newest)


def _over_quota(
    mutations: Sequence[Mutation], stored: Sequence[Mapping[str, Any]], quota: Allowance
) -> dict[int, StoreError]:
    """The creates (by position) that `quota` refuses; the others are counted in it."""
    present = {(r["cluster_id"], r["namespace"], r["name"]) for r in stored}
    refused: dict[int, StoreError] = {}
    for index, m in enumerate(mutations):
        if m.spec is None or m.patch is not None or m.record_id in present:
            continue
        refusal = quota.take(m.cluster_id)
        if refusal is not None:
            refused[index] = refusal
    return refused


def _with_refusals(
    results: Sequence[MutationResult], refused: Mapping[int, StoreError], total: int
) -> list[MutationResult]:
    """`results` of the mutations written, with the refused ones back in their places."""
    written = iter(results)
    return [
        MutationResult(None, existed=False, changed=False, error=refused[index])
        if index in refused
        else next(written)
        for index in range(total)
    ]


def _usage(written: Mapping[tuple[str, str, str], str], slices: Counter[str]) -> Write:
    """The clusters' counts after the write: +1 per export created, -1 per export and
    slice deleted."""
    exports_delta: Counter[str] = Counter()
    for (cluster_id, _, _), change in written.items():
        if change == "ADDED":
            exports_delta[cluster_id] += 1
        elif change == "DELETED":
            exports_delta[cluster_id] -= 1
    return usage_write(exports_delta, Counter({c: -n for c, n in slices.items()}))


async def _read_keys(
    conn: AsyncConnection, ctx: StoreContext, keys: Sequence[Key]
) -> tuple[Sequence[Mapping[Any, Any]], Sequence[Mapping[Any, Any]]]:
    """Under the keys' locks, in one read (`RowWriter.select_many`): their ServiceImport
    rows, and every export of them (`ix_exports_key_precedence`), the written records
    among them. Each round trip after the first lock is one the write holds its locks
    over (docs/benchmarks.md, fleet scale)."""
    imports, stored = await ctx.rows.select_many(
        conn,
        [
            (service_imports, ("namespace", "name"), keys),
            (exports, ("namespace", "name"), keys),
        ],
    )
    return imports, stored
