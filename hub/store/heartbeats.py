"""Heartbeats in group commits: the beats that arrive together share one transaction.

Every member cluster beats several times per TTL (at least three, `member.heartbeat`), so
at fleet scale heartbeats are most of what a hub replica is asked: 10,000 clusters at the
agents' 30 s interval are ~330 beats a second across the tier. A beat recorded on its own
is two transactions — the member-token lookup (`tokens`), then an UPDATE and a read of the
cluster's withheld endpoints — eight round trips, many times a `GET /healthz` (figures in
docs/benchmarks.md, fleet scale). The statements are cheap; the per-transaction Python
around them (pool checkout and its ping, BEGIN, COMMIT, SQLAlchemy's per-statement work)
is the cost, paid once per beat.

`HeartbeatBatcher` queues each beat and commits whatever is queued together, however many
beats it carries (the `batch.GroupCommit` machinery: a batch is what arrived while the
previous one was in the database, after the wait below). On SQLite that is one
transaction of three statements:

1. lock the beating clusters' rows, sorted by name (step 1 of the store's lock order,
   `locks`), reading each one's token hash and pending allowance. The lock is `FOR NO KEY
   UPDATE` (`KeyLocks.beat`), which the writes' `FOR KEY SHARE` does not conflict with: a
   write of the cluster's exports or slices, however long it takes to commit, never holds
   up its beat (docs/reference.md#fleet-scale: a cluster that keeps beating is never
   judged Stale because its own writes are slow). A row another transaction holds `FOR
   UPDATE` (the staleness sweep, a delete, a scope patch) is skipped, not waited for, and
   its beat goes into the next batch: one such wait must not hold up the beats of every
   other cluster;
2. one UPDATE of all of them (an executemany: last heartbeat, agent version, import counts,
   held withdrawal, the one-shot allowance taken, the invalid-export report when sent);
3. the withheld endpoints of those clusters, usually none; a Stale cluster's are given
   back in this same transaction (`withdrawals.apply`, keys locked in one sorted run).

On PostgreSQL the three are one statement (`_BEAT`), run as a transaction of its own: no
BEGIN, no COMMIT, one round trip after the pool's checkout where there were five. On a
busy hub every round trip of a batch waits for a turn of the replica's event loop, and
the batch's beats wait for all of them (docs/benchmarks.md §16, fourth round). The
statement locks the rows as step 1 does, checks each beat's token against the row it
locked, and UPDATEs the beats that pass; the beats of a cluster recorded Stale (or with
exports withheld) are left out of it and recorded, with their endpoints given back, by
the transaction above, run for them alone: giving back takes key locks and a revision,
which one statement cannot take after its own row lock (a cluster comes back once; its
other beats take the one statement). A beat whose row another transaction holds is left
for the next batch, as on SQLite; after `PATIENCE` batches it is given the transaction,
which waits for the row.

Unlike the export writes, a heartbeat batch waits a moment (`LINGER_SECONDS`) before it
forms: beats arrive one by one, spread over the interval by the agents' jitter, and
without the wait a replica taking 170 beats a second commits them one per transaction
again. Nothing waits on a beat's answer but its agent's next sleep, and 50 ms is
nothing against a TTL of 90 s; an export's writer, by contrast, waits for its verdict.

A beat may carry the member token's hash (`Beat.token_hash`): then it is recorded only if
that is the cluster's own token, and the beat's answer is None when it is not (nothing was
written for it). This is what lets the route answer an in-order heartbeat without the
separate token lookup (`hub.api.routes.clusters`); a refused beat goes the long way round,
which words the 401, 403 or 404.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select, update

from hub.store import codec
from hub.store.batch import GroupCommit
from hub.store.context import StoreContext
from hub.store.errors import NotFound
from hub.store.invalidexports import stored_report
from hub.store.tables import clusters, endpoint_withdrawals
from hub.store.withdrawals import apply
from shared.models import Heartbeat, to_wire
from shared.timefmt import utcnow

MAX_BEATS_PER_BATCH = 100
PATIENCE = 3
"""Batches a beat skips its held row in before it waits for it."""
LINGER_SECONDS = 0.05
"""How long a heartbeat batch gathers beats before it commits (module docstring)."""


@dataclass(frozen=True)
class HeartbeatOutcome:
    """A recorded heartbeat (the cluster is `Ready` by it): whether its answer hands the
    agent the admin's one-shot allowance (consumed by this heartbeat)."""

    withdrawal_allowed: bool
    # Exports whose endpoints this heartbeat gave back to the import feed
    # (docs/reference.md#failover).
    given_back: int = 0


@dataclass(frozen=True)
class Beat:
    """One heartbeat to record. `token_hash`: record it only if this is the cluster's
    member token (its sha256); None when the caller has authenticated it already."""

    cluster: str
    beat: Heartbeat
    token_hash: str | None = None
    # Wait for the cluster's row if another transaction holds it (see `HeartbeatBatcher`).
    patient: bool = False

    @property
    def record_id(self) -> Hashable:
        return self.cluster


class _Busy:
    """A beat left for the next batch: its cluster's row was held by another transaction."""


BUSY = _Busy()


class HeartbeatBatcher(GroupCommit[Beat, "HeartbeatOutcome | _Busy | None"]):
    """Group commit of heartbeats (module docstring). A beat's answer is its outcome; None
    when its `token_hash` is not its cluster's token (nothing recorded); `NotFound` when
    an authenticated beat's cluster is not registered (or is being deleted)."""

    def __init__(
        self,
        ctx: StoreContext,
        *,
        max_batch: int = MAX_BEATS_PER_BATCH,
        linger: float = LINGER_SECONDS,
    ) -> None:
        super().__init__(ctx, max_batch=max_batch, name="mcsync-heartbeat-batcher")
        self._linger = linger
        # On PostgreSQL a batch is one statement in an implicit transaction (`_BEAT`).
        self._one_statement = ctx.backend == "postgresql"

    async def write(self, mutation: Beat) -> HeartbeatOutcome | None:  # type: ignore[override]
        """Record one beat (see the class doc); a beat whose cluster row another
        transaction held goes into the next batch."""
        for _ in range(PATIENCE):
            answer = await super().write(mutation)
            if not isinstance(answer, _Busy):
                return answer
        answer = await super().write(dataclasses.replace(mutation, patient=True))
        assert not isinstance(answer, _Busy)
        return answer

    async def _run(self) -> None:
        if self._linger > 0:
            await asyncio.sleep(self._linger)  # let the beats of the next moment join
        await super()._run()

    async def commit(
        self, mutations: Sequence[Beat]
    ) -> Sequence[HeartbeatOutcome | _Busy | Exception | None]:
        if self._one_statement:
            return await self._commit_in_one_statement(mutations)
        return await self._commit_in_transaction(mutations)

    async def _commit_in_one_statement(
        self, mutations: Sequence[Beat]
    ) -> Sequence[HeartbeatOutcome | _Busy | Exception | None]:
        """PostgreSQL: the batch as one statement in an implicit transaction (`_BEAT`,
        module docstring); the few beats it leaves to a transaction of their own (a
        cluster recorded Stale, a patient beat whose row is held) go through
        `_commit_in_transaction`, as every beat does on SQLite."""
        now = utcnow()
        held = [m.beat.withdrawal_held for m in mutations]
        reports = [m.beat.invalid_exports for m in mutations]
        async with self._ctx.statement() as driver:
            rows = await driver.fetch(
                _BEAT,
                [m.cluster for m in mutations],
                [m.token_hash for m in mutations],
                [m.beat.agent_version for m in mutations],
                [m.beat.imported_services for m in mutations],
                [m.beat.imported_endpoints for m in mutations],
                [None if h is None else codec.canonical_json(to_wire(h)) for h in held],
                [r is not None for r in reports],
                [None if r is None else stored_report(r) for r in reports],
                now,
            )
        found = {r["name"]: r for r in rows}
        answers: list[HeartbeatOutcome | _Busy | Exception | None] = []
        again: list[int] = []  # beats left to a transaction: their answers come from it
        for index, m in enumerate(mutations):
            row = found[m.cluster]
            if row["recorded"]:
                answers.append(HeartbeatOutcome(withdrawal_allowed=bool(row["allowance"])))
                continue
            answers.append(None)
            if row["locked"]:
                if row["matched"]:
                    # Recorded Stale or with exports withheld: the beat gives them back
                    # in its own transaction, under its row's lock (module docstring).
                    again.append(index)
                # else: not the cluster's token, and nothing was written (None).
            elif row["present"]:
                if m.patient:
                    again.append(index)  # waits for its row there, as it would here
                else:
                    answers[index] = BUSY
            elif m.token_hash is None:
                answers[index] = NotFound(f"cluster {m.cluster!r} is not registered")
        if again:
            redone = await self._commit_in_transaction([mutations[i] for i in again])
            for index, answer in zip(again, redone, strict=True):
                answers[index] = answer
        return answers

    async def _commit_in_transaction(
        self, mutations: Sequence[Beat]
    ) -> Sequence[HeartbeatOutcome | _Busy | Exception | None]:
        """The batch in one transaction of three statements (module docstring)."""
        now = utcnow()
        names = sorted({m.cluster for m in mutations})
        recorded: dict[str, HeartbeatOutcome] = {}
        busy: set[str] = set()
        newest: int | None = None
        async with self._ctx.write() as conn:
            query = (
                select(
                    clusters.c.name,
                    clusters.c.token_hash,
                    clusters.c.previous_token_hash,
                    clusters.c.withdrawal_allowed,
                    clusters.c.sync_withdrawal_held,
                )
                .where(clusters.c.name.in_(names), clusters.c.deleting.is_(False))
                .order_by(clusters.c.name)
            )
            free = self._ctx.locks.beat(query, of=clusters, skip_locked=True)
            rows = {r.name: r for r in await conn.execute(free)}
            if len(rows) < len(names):
                # Left out: not registered, or held by another transaction (a write of the
                # cluster's exports): those beats wait for the next batch, not this one.
                missing = [n for n in names if n not in rows]
                present = select(clusters.c.name).where(
                    clusters.c.name.in_(missing), clusters.c.deleting.is_(False)
                )
                busy = {n for (n,) in await conn.execute(present)}
                # A beat that found its row held in several batches in a row waits for it
                # now, in this batch (a cluster whose writes never pause must still beat).
                waiting = sorted(busy & {m.cluster for m in mutations if m.patient})
                if waiting:
                    query = query.where(clusters.c.name.in_(waiting))
                    wait = self._ctx.locks.beat(query, of=clusters, skip_locked=False)
                    for r in await conn.execute(wait):
                        rows[r.name] = r
                        busy.discard(r.name)
            plain: list[dict[str, Any]] = []
            reporting: list[dict[str, Any]] = []
            matched: dict[str, bool] = {}  # cluster -> its answer hands over the allowance
            # Beats that presented a rotated cluster's NEW token: the agent has it, so the
            # previous one is retired now, as any other request with it would (`tokens`).
            retiring: list[str] = []
            for m in mutations:
                row = rows.get(m.cluster)
                if m.cluster in busy:
                    continue
                if row is None or (
                    m.token_hash is not None
                    and not hmac.compare_digest(str(row.token_hash), m.token_hash)
                ):
                    continue
                if m.token_hash is not None and row.previous_token_hash is not None:
                    retiring.append(m.cluster)
                beat = m.beat
                held = beat.withdrawal_held
                # The row is locked until commit: this takes the allowance exactly once.
                matched[m.cluster] = held is not None and bool(row.withdrawal_allowed)
                values: dict[str, Any] = {
                    "b_name": m.cluster,
                    "b_at": now,
                    "b_version": beat.agent_version,
                    "b_services": beat.imported_services,
                    "b_endpoints": beat.imported_endpoints,
                    "b_held": None if held is None else codec.canonical_json(to_wire(held)),
                    # Taken by a beat that reports a hold; lapsed by one that reports
                    # none, unless the hub's own hold of a sync (`syncguard`) is left for
                    # it: an allowance is for the hold current when it was given.
                    "b_allowed": bool(row.withdrawal_allowed)
                    and held is None
                    and row.sync_withdrawal_held is not None,
                }
                if beat.invalid_exports is None:
                    # docs/reference.md#flags: kept when the beat carries no list
                    plain.append(values)
                else:
                    values["b_invalid"] = stored_report(beat.invalid_exports)
                    reporting.append(values)
            if retiring:
                await conn.execute(
                    update(clusters)
                    .where(clusters.c.name.in_(sorted(set(retiring))))
                    .values(previous_token_hash=None, previous_token_expires=None)
                )
            if plain:
                await conn.execute(_UPDATE, plain)
            if reporting:
                await conn.execute(
                    _UPDATE.values(invalid_exports=bindparam("b_invalid")), reporting
                )
            if matched:
                withheld_rows = await conn.execute(
                    select(
                        endpoint_withdrawals.c.cluster_id,
                        endpoint_withdrawals.c.namespace,
                        endpoint_withdrawals.c.service_name,
                    ).where(endpoint_withdrawals.c.cluster_id.in_(sorted(matched)))
                )
                withheld = {(c, ns, svc) for c, ns, svc in withheld_rows}
                back: Counter[str] = Counter()
                if withheld:
                    applied = await apply(conn, self._ctx, withhold=set(), give_back=withheld)
                    newest = applied.newest_revision
                    back.update(c for c, _, _ in withheld)
                for name, allowance in matched.items():
                    recorded[name] = HeartbeatOutcome(
                        withdrawal_allowed=allowance, given_back=back[name]
                    )
        if newest is not None:
            self._ctx.notifier.committed(newest)
        answers: list[HeartbeatOutcome | _Busy | Exception | None] = []
        for m in mutations:
            outcome = recorded.get(m.cluster)
            if m.cluster in busy:
                answers.append(BUSY)
            elif outcome is not None:
                answers.append(outcome)
            elif m.token_hash is not None:
                answers.append(None)
            else:
                answers.append(NotFound(f"cluster {m.cluster!r} is not registered"))
        return answers


# One statement for every beat of a batch (executemany); `b_` parameters, since a bind
# parameter may not share a column's name in an UPDATE's SET.
_UPDATE = (
    update(clusters)
    .where(clusters.c.name == bindparam("b_name"))
    .values(
        last_heartbeat=bindparam("b_at"),
        agent_version=bindparam("b_version"),
        imported_services=bindparam("b_services"),
        imported_endpoints=bindparam("b_endpoints"),
        stale=False,
        withdrawal_held=bindparam("b_held"),
        withdrawal_allowed=bindparam("b_allowed"),
    )
)


# PostgreSQL: a whole batch in one statement, an implicit transaction of its own (one round
# trip where BEGIN, the lock, the UPDATE, the withheld read and COMMIT were five). The
# beats are arrays ($1-$8, one element per beat, one beat per cluster); $9 is the time.
#
# * `locked`: the beating clusters' rows as `KeyLocks.beat` takes them (FOR NO KEY UPDATE,
#   SKIP LOCKED: a row another transaction holds is left out, not waited for), each
#   with what the beat is checked against. A row that changed after the statement's
#   snapshot is locked and answered as its newest version, as a lock in its own statement
#   would be.
# * `recorded`: the UPDATE of the beats whose token is their cluster's (the sha256 hex
#   digests compared; a beat with no digest was authenticated already). A beat that
#   presents the new token of a rotated cluster retires the previous one (`tokens`).
#   Left out, and answered from a transaction of their own: the clusters recorded Stale
#   or with exports withheld, whose beat gives those back (`withdrawals.apply`), which one
#   statement cannot do under its lock. Withheld rows are written only by the sweep, in
#   the transaction that records their cluster Stale under the cluster's row lock, so a
#   row locked here that is not `stale` has none but those this snapshot sees, which
#   the NOT EXISTS reads.
# * the answer, per beat: recorded (with the allowance it took), locked (its row was
#   taken) and matched (its token is the cluster's), and for a row not taken whether
#   the cluster is registered at all (`present`: then another transaction holds it).
_BEAT = """
WITH beat AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
                $6::text[], $7::boolean[], $8::text[])
        AS b(name, token_hash, agent_version, services, endpoints, held, reports, invalid)
),
locked AS MATERIALIZED (
    SELECT name, token_hash, previous_token_hash, withdrawal_allowed,
           sync_withdrawal_held, stale
    FROM clusters
    WHERE name = ANY($1::text[]) AND NOT deleting
    ORDER BY name
    FOR NO KEY UPDATE SKIP LOCKED
),
recorded AS (
    UPDATE clusters AS c SET
        last_heartbeat = $9,
        agent_version = b.agent_version,
        imported_services = b.services,
        imported_endpoints = b.endpoints,
        stale = false,
        withdrawal_held = b.held,
        withdrawal_allowed = l.withdrawal_allowed AND b.held IS NULL
            AND l.sync_withdrawal_held IS NOT NULL,
        invalid_exports = CASE WHEN b.reports THEN b.invalid ELSE c.invalid_exports END,
        previous_token_hash = CASE WHEN b.token_hash IS NULL THEN c.previous_token_hash END,
        previous_token_expires = CASE
            WHEN b.token_hash IS NULL OR c.previous_token_hash IS NULL
            THEN c.previous_token_expires END
    FROM beat AS b JOIN locked AS l ON l.name = b.name
    WHERE c.name = b.name
      AND (b.token_hash IS NULL OR l.token_hash = b.token_hash)
      AND NOT l.stale
      AND NOT EXISTS (SELECT 1 FROM endpoint_withdrawals AS w WHERE w.cluster_id = b.name)
    RETURNING c.name, b.held IS NOT NULL AND l.withdrawal_allowed AS allowance
)
SELECT b.name,
       r.name IS NOT NULL AS recorded,
       r.allowance,
       l.name IS NOT NULL AS locked,
       (b.token_hash IS NULL OR l.token_hash = b.token_hash) AS matched,
       CASE WHEN l.name IS NULL THEN EXISTS (
           SELECT 1 FROM clusters AS p WHERE p.name = b.name AND NOT p.deleting
       ) END AS present
FROM beat AS b
LEFT JOIN locked AS l ON l.name = b.name
LEFT JOIN recorded AS r ON r.name = b.name
"""
