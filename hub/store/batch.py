"""Group commit: single writes (an export, a slice) that arrive together share one write
transaction.

A PUT of one export costs the hub about a dozen statements (lock the cluster, lock the
key, read, write, judge, stamp, history, revision counter) and each statement costs
about as much Python as the statement's SQL: with 64 agents writing at once, the hub
spent ~8 ms of CPU per PUT on statement overhead and round trips (bench/put_throughput).
Every writer also ends on the same revision-counter row (`revisions.allocate_revisions`), so
concurrent write transactions already ran one after another; running them *as one*
costs no concurrency.

So `WriteBatcher` queues each single-export mutation and one drain task at a time takes
everything queued (up to `max_batch`) into one `write_exports` call. The queue, the drain,
the batch-forming and the failure isolation below are `GroupCommit`'s, and each kind of
single write supplies only its transaction (`GroupCommit.commit`): exports here,
EndpointSliceExports in `endpointslices.SliceBatcher` (a slice PUT is the same dozen
statements ending on the same revision row; at 100 slice changes/s, one transaction each,
32 of the pool's 40 sessions queued on that row, docs/benchmarks.md §7). With one writer
the batch is that writer alone and nothing waits: there is no timer, a batch forms only
from requests that arrived while the previous one was in the database. Each mutation
still gets its own revision, verdict and change row; the judge sees each key's exports
in precedence order exactly as before (docs/reference.md#conflicts), since `write_exports` locks and
judges key by key inside the one transaction.

What one writer must not do to another:

* A cluster that is not registered (or is being deleted) fails only its own mutations
  (`NotFound`); the others commit. Likewise any failure a kind's `commit` can tell
  apart per mutation (a slice of a Service its cluster does not export: `Conflict`).
* Two mutations of the same record never share a batch (the writers refuse that):
  the later one waits for the next batch, so a record's writes commit in arrival order.
* A batch that fails for any reason but an unreachable database is retried one mutation
  per transaction, so one bad write fails alone. `DatabaseUnavailable` fails the whole
  batch at once: every member would meet the same outage (each answers 503, retried).
* The drain runs in its own task, so a caller that goes away (client disconnect →
  cancellation) cannot cut a transaction that carries other callers' writes.

Lock order stays the store-wide one: clusters (sorted, FOR KEY SHARE), keys (sorted), the
revision counter last — so batches cannot deadlock with each other, with syncs, or with
a cluster delete.
"""

from __future__ import annotations

import abc
import asyncio
import contextvars
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from opentelemetry import trace

from hub.store.clusterstate import ClusterStates
from hub.store.context import StoreContext
from hub.store.drain import Drain, answer_slot
from hub.store.errors import DatabaseUnavailable, Forbidden, NotFound
from hub.store.locks import lock_clusters
from hub.store.usage import EXPORTS, Allowance, scope_refusal
from hub.store.writer import Mutation, MutationResult, write_exports
from shared.timefmt import utcnow

DEFAULT_MAX_BATCH = 256
BATCH_SPAN = "write batch"


class Batchable(Protocol):
    """A single write: `record_id` names what it changes (one per batch)."""

    @property
    def record_id(self) -> Hashable: ...


M = TypeVar("M", bound=Batchable)
R = TypeVar("R")


@dataclass
class _Pending(Generic[M, R]):
    mutation: M
    done: asyncio.Future[R] = field(repr=False)
    # The caller's context (its request span, its log fields): a batch runs in its first
    # member's, and links the others' spans (see `_commit_in_context`).
    context: contextvars.Context = field(repr=False, default_factory=contextvars.copy_context)
    span: trace.SpanContext = field(
        repr=False, default_factory=lambda: trace.get_current_span().get_span_context()
    )


class ClusterNotRegistered(NotFound):
    """The mutation's cluster is not registered, or is being deleted."""


class GroupCommit(abc.ABC, Generic[M, R]):
    """Queues single writes of one kind and commits them in shared transactions."""

    def __init__(self, ctx: StoreContext, *, max_batch: int = DEFAULT_MAX_BATCH, name: str) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self._ctx = ctx
        self._max_batch = max_batch
        self._queue: deque[_Pending[M, R]] = deque()
        self._drain = Drain(self._run, name=name)
        self.batches = 0  # transactions committed or tried (tests and benchmarks read it)

    @abc.abstractmethod
    async def commit(self, mutations: Sequence[M]) -> Sequence[R | Exception]:
        """Apply `mutations` (at most one per record) in one transaction and announce its
        revisions (`notifier.committed`); answers each mutation's result, or the error
        that fails it alone. Raising fails the batch, which is then tried one by one."""

    def observe(self, size: int) -> None:
        """Report a batch's size (a kind that has a metric for it overrides this)."""

    async def write(self, mutation: M) -> R:
        """Apply one mutation; answers when its transaction has committed.

        Raises whatever failed this mutation alone, or `DatabaseUnavailable`.
        """
        done: asyncio.Future[R] = answer_slot()
        self._queue.append(_Pending(mutation, done))
        self._drain.kick()  # each batch then runs in its first member's context
        # A cancelled caller cancels only `done`: the drain task, not the caller, carries
        # the write, which goes on regardless (and skips answering a cancelled future).
        return await done

    async def close(self) -> None:
        """Wait for the writes already queued (the app is shutting down)."""
        await self._drain.close()

    async def _run(self) -> None:
        while self._queue:
            batch = self._take()
            try:
                await self._commit_in_context(batch)
            except DatabaseUnavailable as exc:
                _fail(batch, exc)
            except Exception as exc:  # isolate the culprit: see the module doc
                if len(batch) == 1:
                    _fail(batch, exc)
                    continue
                for one in batch:
                    try:
                        await self._commit_in_context([one])
                    except Exception as single:
                        _fail([one], single)

    def _take(self) -> list[_Pending[M, R]]:
        """The next batch: queue order, at most one mutation per record."""
        batch: list[_Pending[M, R]] = []
        seen: set[Hashable] = set()
        deferred: list[_Pending[M, R]] = []
        while self._queue and len(batch) < self._max_batch:
            pending = self._queue.popleft()
            if pending.mutation.record_id in seen:
                deferred.append(pending)
                continue
            seen.add(pending.mutation.record_id)
            batch.append(pending)
        self._queue.extendleft(reversed(deferred))
        return batch

    async def _commit_in_context(self, batch: list[_Pending[M, R]]) -> None:
        """Commit `batch` in its first member's context, so a lone write's conflict
        resolution stays a span under its own request (docs/reference.md#observability) and logs
        carry its fields; a shared batch adds a span linking every member's request."""
        first = batch[0].context
        if len(batch) == 1:
            await asyncio.create_task(self._commit(batch), context=first.copy())
            return
        links = [trace.Link(p.span) for p in batch if p.span.is_valid]

        async def traced() -> None:
            with self._ctx.instruments.tracer.start_as_current_span(
                BATCH_SPAN, links=links, attributes={"mcsync.batch_size": len(batch)}
            ):
                await self._commit(batch)

        await asyncio.create_task(traced(), context=first.copy())

    async def _commit(self, batch: list[_Pending[M, R]]) -> None:
        self.batches += 1
        self.observe(len(batch))
        outcomes = await self.commit([p.mutation for p in batch])
        for pending, outcome in zip(batch, outcomes, strict=True):
            if pending.done.done():
                continue
            if isinstance(outcome, Exception):
                pending.done.set_exception(outcome)
            else:
                pending.done.set_result(outcome)


class WriteBatcher(GroupCommit[Mutation, MutationResult]):
    """Single-export PUTs, DELETEs and annotation patches, committed together through
    `write_exports`.

    The answered record carries its cluster's state (Pending/Ready/Stale) as of the
    write, like every record the store answers. A mutation fails alone with
    `ClusterNotRegistered`, or the error `write_exports` refused it with
    (`MutationResult.error`: a patch's NotFound or Conflict).
    """

    def __init__(self, ctx: StoreContext, *, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        super().__init__(ctx, max_batch=max_batch, name="mcsync-write-batcher")

    def observe(self, size: int) -> None:
        self._ctx.instruments.write_batch_size(size)

    async def commit(self, mutations: Sequence[Mutation]) -> Sequence[MutationResult | Exception]:
        now = utcnow()
        async with self._ctx.write() as conn:
            registered = await lock_clusters(conn, self._ctx, [m.cluster_id for m in mutations])
            at_now = ClusterStates(self._ctx.cluster_ttl, now)
            states = {n: at_now.of_export(r["last_heartbeat"]) for n, r in registered.items()}
            refused = _out_of_scope(mutations, registered)
            accepted = [
                m for m in mutations if m.cluster_id in registered and m.record_id not in refused
            ]
            quota = Allowance(EXPORTS, self._ctx.quotas.exports, registered)
            outcome = (
                await write_exports(
                    conn, self._ctx, accepted, now=now, cluster_states=states, quota=quota
                )
                if accepted
                else None
            )
        if outcome is not None and outcome.newest_revision is not None:
            self._ctx.notifier.committed(outcome.newest_revision)
        results = iter(outcome.results if outcome is not None else ())
        answers: list[MutationResult | Exception] = []
        for m in mutations:
            if m.cluster_id not in registered:
                answers.append(ClusterNotRegistered(f"cluster {m.cluster_id!r} is not registered"))
                continue
            if m.record_id in refused:
                answers.append(refused[m.record_id])
                continue
            result = next(results)
            answers.append(result.error if result.error is not None else result)
        return answers


def _out_of_scope(
    mutations: Sequence[Mutation], registered: Mapping[str, Mapping[Any, Any]]
) -> dict[Hashable, Forbidden]:
    """The PUTs and annotation patches outside their cluster's `spec.exportNamespaces`
    (docs/reference.md#scope-and-limits), each with its refusal; withdrawals always pass
    (a member may always take back what it has, even after the admin narrowed its
    scope)."""
    refused: dict[Hashable, Forbidden] = {}
    for m in mutations:
        row = registered.get(m.cluster_id)
        if row is None or (m.spec is None and m.patch is None):
            continue
        refusal = scope_refusal(
            m.cluster_id, m.namespace, row["export_namespaces"], what=f"Service {m.name!r}"
        )
        if refusal is not None:
            refused[m.record_id] = refusal
    return refused


def _fail(batch: Sequence[_Pending[M, R]], exc: BaseException) -> None:
    for pending in batch:
        if not pending.done.done():
            pending.done.set_exception(exc)
