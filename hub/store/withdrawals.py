"""Failover and blast radius, the hub's half (docs/reference.md#failover): while a cluster is
`Stale`, the import feed withholds its EndpointSliceExports, so that no importing cluster sends it
traffic; its export records, verdicts and ServiceImports stay exactly as they were.

**What is withheld.** A cluster is Stale when its last heartbeat is older than the TTL
(`clusterstate`). Its export (cluster, namespace, Service) is withheld when all of:

* fewer than `--stale-panic-fraction` of the clusters that ever sent a heartbeat are Stale
  (the panic threshold: a hub that cannot hear most of the fleet suspects itself, as the
  node lifecycle controller's unhealthy-zone rule and Envoy's panic threshold do);
* some cluster that is not Stale has an EndpointSliceExport of that Service with at least
  one READY endpoint (fail open per service: withdrawing the last ready endpoints of a
  Service would black-hole it, which is worse than sending some traffic to a cluster that
  may be gone; a live cluster whose endpoints are all `ready: false` serves no one,
  `has_ready_endpoint`).

**How.** A withheld export has a row in `endpoint_withdrawals`; its slices go out of the
import feed as DELETED events and out of the import list (`importfeed` skips them), and
come back as ADDED events when the row goes. Deleting, not rewriting them not-ready, is
docs/decisions.md's choice. Every row is written and removed under its key's lock
(`locks.lock_keys`) in the transaction that records those events, and every writer of the
feed (`importchanges.follow_exports`, `endpointslices.write_slices`) reads the rows of its
keys under the same locks: a slice written while its export is withheld is recorded as
DELETED, a withheld export's slices are not re-sent when the import's ports change, and an
export withdrawn takes its row along.

**Who decides, once.** Two writers, each transition recorded exactly once:

* the **sweep** (`sweep`), which every hub replica runs every second: a read-only pass
  compares what should be withheld with what is (the Stale or recorded-Stale clusters,
  as the database filters them, the count of clusters ever heard from, the rows of
  `endpoint_withdrawals`; the slices of Stale clusters only when there are some), and only
  when they differ opens a write transaction. There it takes the fleet-wide sweep lock
  (`KeyLocks.sweep`: on PostgreSQL a transaction advisory lock that another replica's
  sweep does not wait for — it is doing the same work), locks the Stale clusters' rows
  `FOR UPDATE` (step 1 of `locks`' order: a heartbeat or a write of such a cluster waits,
  or has committed and is read), decides again from what it reads under the locks,
  records the transitions in `clusters.stale`, locks the keys (step 2), reads the rows of
  `endpoint_withdrawals` again under them and writes only the difference;
* the **heartbeat** of a cluster that has withheld exports (`give_back_cluster`, called
  by `ClusterStore.beat` in the heartbeat's own transaction after locking the cluster's
  row): its endpoints come back at once, not at the next sweep.

A second replica finding the work done reads no difference and writes nothing, so one
transition is one set of events on SQLite and on PostgreSQL with any number of replicas.

Cost: the common sweep (no cluster Stale, nothing withheld) is three reads of one row or
none, whatever the fleet's size (the database compares the heartbeats with the cutoff: a
sweep at 1,000 clusters that read them all spent ~6 ms of hub CPU turning rows into
objects); a write transaction, its locks and its events cost in proportion to the exports
that change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store.context import StoreContext
from hub.store.importchanges import ImportChanges, SliceChange, triples_filter, withheld_among
from hub.store.importview import Key, Triple, importer_view, served_ports
from hub.store.locks import lock_keys, take_revisions
from hub.store.revisions import change_rows
from hub.store.rows import Write
from hub.store.tables import clusters, endpoint_slices, endpoint_withdrawals
from shared.timefmt import utcnow

DEFAULT_STALE_PANIC_FRACTION = 0.5
# How the canonical JSON of a slice without endpoints reads (`codec.canonical_json`:
# compact, keys sorted; `endpoints` is always written). No string of a slice can hold a
# double quote, so the text test cannot match inside a value.
_NO_ENDPOINTS = '%"endpoints":[]%'
# How a not-ready endpoint's condition reads in the same canonical text.
_NOT_READY = '"ready":false'


def check_panic_fraction(value: float) -> float:
    """`value` when it is a fraction in (0, 1]; ValueError naming the setting otherwise."""
    if not 0 < value <= 1:
        raise ValueError(f"stale_panic_fraction must be in (0, 1], got {value}")
    return value


# --- the decision ------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterRow:
    last_heartbeat: datetime | None
    stale: bool  # as recorded (`clusters.stale`)


@dataclass(frozen=True)
class FleetState:
    """The fleet as one sweep sees it: which clusters are Stale, and whether that is so
    many that the hub withholds nothing (`panic`)."""

    stale: frozenset[str]
    heartbeated: int  # clusters that ever sent a heartbeat (not being deleted)
    panic: bool


def fleet_state(
    rows: Mapping[str, ClusterRow], *, heard: int, cutoff: datetime, panic_fraction: float
) -> FleetState:
    """Which of `rows` are Stale (their last heartbeat before `cutoff`, now less the TTL),
    and whether more than `panic_fraction` of the `heard` clusters that ever sent a
    heartbeat are (docs/reference.md#failover's panic threshold)."""
    stale = frozenset(
        name
        for name, row in rows.items()
        if row.last_heartbeat is not None and row.last_heartbeat < cutoff
    )
    return FleetState(stale=stale, heartbeated=heard, panic=len(stale) > panic_fraction * heard)


@dataclass
class Plan:
    """What one sweep would change: the transitions to record and the exports to withhold
    or give back."""

    fleet: FleetState
    clusters: Mapping[str, ClusterRow]
    mark_stale: list[str] = field(default_factory=list)
    clear_stale: list[str] = field(default_factory=list)
    withhold: set[Triple] = field(default_factory=set)
    give_back: set[Triple] = field(default_factory=set)
    withheld: int = 0  # exports withheld before the change

    @property
    def changes(self) -> bool:
        return bool(self.mark_stale or self.clear_stale or self.withhold or self.give_back)


async def _read_clusters(
    conn: AsyncConnection,
    ctx: StoreContext,
    *,
    cutoff: datetime,
    names: Sequence[str] | None = None,
) -> dict[str, ClusterRow]:
    """The clusters not being deleted that are Stale (heard before `cutoff`) or recorded
    so, as the database filters them: a sweep of a healthy fleet reads no row of it. With
    `names`: those clusters, whatever their state, locked FOR UPDATE in name order."""
    query = (
        select(clusters.c.name, clusters.c.last_heartbeat, clusters.c.stale)
        .where(clusters.c.deleting.is_(False))
        .order_by(clusters.c.name)
    )
    if names is None:
        query = query.where(or_(clusters.c.stale.is_(True), clusters.c.last_heartbeat < cutoff))
    else:
        query = ctx.locks.exclusive(query.where(clusters.c.name.in_(names)), of=clusters)
    return {
        str(name): ClusterRow(last_heartbeat, bool(stale))
        for name, last_heartbeat, stale in await conn.execute(query)
    }


async def _heard(conn: AsyncConnection) -> int:
    """How many clusters (not being deleted) ever sent a heartbeat."""
    query = select(func.count(clusters.c.last_heartbeat)).where(clusters.c.deleting.is_(False))
    return int((await conn.execute(query)).scalar_one() or 0)


async def _registered(conn: AsyncConnection, names: set[str]) -> set[str]:
    """Which of `names` are registered and not being deleted."""
    if not names:
        return set()
    query = select(clusters.c.name).where(
        clusters.c.name.in_(sorted(names)), clusters.c.deleting.is_(False)
    )
    return {str(name) for (name,) in await conn.execute(query)}


async def withheld_rows(conn: AsyncConnection) -> set[Triple]:
    """Every export the import feed withholds now."""
    return {(c, ns, svc) for c, ns, svc in await conn.execute(select(endpoint_withdrawals))}


async def _should_withhold(
    conn: AsyncConnection, ctx: StoreContext, fleet: FleetState
) -> set[Triple]:
    """The exports to withhold for `fleet`: every Stale cluster's exports with slices whose
    Service has endpoints in a cluster that is not Stale; none in a panic."""
    if fleet.panic or not fleet.stale:
        return set()
    stale = sorted(fleet.stale)
    candidates = {
        (c, ns, svc)
        for c, ns, svc in await conn.execute(
            select(
                endpoint_slices.c.cluster_id,
                endpoint_slices.c.namespace,
                endpoint_slices.c.service_name,
            )
            .where(endpoint_slices.c.cluster_id.in_(stale))
            .distinct()
        )
    }
    if not candidates:
        return set()
    keys = sorted({(ns, svc) for _, ns, svc in candidates})
    elsewhere = select(
        endpoint_slices.c.namespace, endpoint_slices.c.service_name, endpoint_slices.c.spec
    ).where(
        ctx.rows.where_in((endpoint_slices.c.namespace, endpoint_slices.c.service_name), keys),
        endpoint_slices.c.cluster_id.not_in(stale),
        endpoint_slices.c.spec.not_like(_NO_ENDPOINTS),
    )
    alive: set[Key] = set()
    for ns, svc, spec in await conn.execute(elsewhere):
        if (ns, svc) not in alive and has_ready_endpoint(spec):
            alive.add((ns, svc))
    return {t for t in candidates if (t[1], t[2]) in alive}


def has_ready_endpoint(spec_text: str) -> bool:
    """Whether a stored slice (canonical JSON of its spec) has an endpoint that is ready,
    as Kubernetes reads `conditions.ready`: unset counts as ready, only `false` does not.

    Fail open counts only READY endpoints elsewhere (docs/reference.md#failover): a live
    cluster whose endpoints are all not ready — a crash-looping Deployment — serves no
    one, and withdrawing the Stale cluster's ready endpoints in its favour would leave
    the Service none. A slice whose text holds no `"ready":false` has a ready endpoint
    (its endpoints are not empty: the query left those out) and is not parsed."""
    if _NOT_READY not in spec_text:
        return True
    endpoints = json.loads(spec_text).get("endpoints") or []
    return any((e.get("conditions") or {}).get("ready") is not False for e in endpoints)


async def _plan(conn: AsyncConnection, ctx: StoreContext, *, now: datetime, lock: bool) -> Plan:
    """What a sweep at `now` changes. `lock`: hold the rows it decides by (the Stale and
    recorded-Stale clusters, FOR UPDATE) and read the rest after them."""
    cutoff = now - ctx.cluster_ttl
    rows = await _read_clusters(conn, ctx, cutoff=cutoff)
    if lock and rows:
        # Read again under the locks: a heartbeat committed meanwhile is seen (or waits).
        rows = await _read_clusters(conn, ctx, cutoff=cutoff, names=sorted(rows))
    heard = await _heard(conn)
    fleet = fleet_state(rows, heard=heard, cutoff=cutoff, panic_fraction=ctx.stale_panic_fraction)
    current = await withheld_rows(conn)
    wanted = await _should_withhold(conn, ctx, fleet)
    returning = current - wanted
    # A row of a cluster being deregistered goes with its exports, never given back.
    alive = await _registered(conn, {c for c, _, _ in returning})
    return Plan(
        fleet=fleet,
        clusters=rows,
        mark_stale=sorted(n for n in fleet.stale if not rows[n].stale),
        clear_stale=sorted(n for n, r in rows.items() if r.stale and n not in fleet.stale),
        withhold=wanted - current,
        give_back={t for t in returning if t[0] in alive},
        withheld=len(current),
    )


# --- the events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    """What one transaction withheld and gave back, and the newest revision it took."""

    withheld: int = 0  # exports
    given_back: int = 0
    events: int = 0
    newest_revision: int | None = None


async def apply(
    conn: AsyncConnection, ctx: StoreContext, *, withhold: set[Triple], give_back: set[Triple]
) -> Applied:
    """Withhold and give back those exports in the caller's transaction (the clusters
    already locked, step 1): lock their keys, read the rows again under the locks, and
    record a DELETED (withheld) or ADDED (given back) event for each of their slices
    that importers see. Exports without slices are not withheld (nothing to withhold)."""
    triples = withhold | give_back
    if not triples:
        return Applied()
    keys = sorted({(ns, svc) for _, ns, svc in triples})
    locked = await lock_keys(conn, ctx, keys)  # step 2
    present = await withheld_among(conn, ctx, sorted(triples))
    withhold = withhold - present
    give_back = give_back & present
    served = {
        key: served_ports(row["status"] if row["created_at"] else None)
        for key, row in locked.items()
    }
    feed = ImportChanges()
    with_slices: set[Triple] = set()
    moving = sorted(withhold | give_back)
    if moving:
        query = (
            select(endpoint_slices)
            .where(triples_filter(ctx, moving))
            .order_by(
                endpoint_slices.c.namespace,
                endpoint_slices.c.service_name,
                endpoint_slices.c.cluster_id,
                endpoint_slices.c.name,
            )
        )
        for row in (await conn.execute(query)).mappings():
            triple = (row["cluster_id"], row["namespace"], row["service_name"])
            key = (row["namespace"], row["service_name"])
            imported, view = importer_view(
                json.loads(row["spec"]), served.get(key, {}).get(row["cluster_id"])
            )
            withholding = triple in withhold
            if withholding:
                with_slices.add(triple)
            if not imported:
                continue
            feed.items.append(
                SliceChange(
                    "DELETED" if withholding else "ADDED",
                    row["cluster_id"],
                    row["namespace"],
                    row["name"],
                    row["created_at"],
                    view,
                    stamp=not withholding,
                )
            )
    withhold &= with_slices
    newest: int | None = None
    writes = [
        Write("insert", endpoint_withdrawals, [_row(t) for t in sorted(withhold)]),
        Write.delete(endpoint_withdrawals, sorted(give_back)),
    ]
    if feed.items:
        newest = await take_revisions(conn, ctx, len(feed))  # step 3, LAST
        history, _, stamps = feed.records(newest - len(feed) + 1)
        writes += [change_rows(history), Write("update", endpoint_slices, stamps)]
    await ctx.rows.write(conn, writes)
    return Applied(
        withheld=len(withhold),
        given_back=len(give_back),
        events=len(feed),
        newest_revision=newest,
    )


def _row(triple: Triple) -> dict[str, Any]:
    cluster_id, namespace, service_name = triple
    return {"cluster_id": cluster_id, "namespace": namespace, "service_name": service_name}


async def give_back_cluster(conn: AsyncConnection, ctx: StoreContext, cluster_id: str) -> Applied:
    """Give back everything withheld of `cluster_id`, whose heartbeat the caller is
    recording (its row locked FOR UPDATE): its endpoints come back at once."""
    query = select(endpoint_withdrawals).where(endpoint_withdrawals.c.cluster_id == cluster_id)
    withheld = {(c, ns, svc) for c, ns, svc in await conn.execute(query)}
    return await apply(conn, ctx, withhold=set(), give_back=withheld)


# --- the sweep -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepResult:
    """One sweep: the fleet as it saw it, and what it changed (nothing when `wrote` is
    False: no difference, or another replica's sweep held the lock)."""

    fleet: FleetState
    wrote: bool = False
    applied: Applied = field(default_factory=Applied)
    marked_stale: int = 0


async def sweep(ctx: StoreContext, *, now: datetime | None = None) -> SweepResult:
    """Record the Stale transitions up to `now` (default: the present) and withhold or give
    back what they change (module docstring)."""
    at = now or utcnow()
    async with ctx.read() as conn:
        plan = await _plan(conn, ctx, now=at, lock=False)
    if not plan.changes:
        return SweepResult(fleet=plan.fleet)
    async with ctx.write() as conn:
        if not await ctx.locks.sweep(conn):
            return SweepResult(fleet=plan.fleet)  # another replica is sweeping
        plan = await _plan(conn, ctx, now=at, lock=True)
        if not plan.changes:
            return SweepResult(fleet=plan.fleet)
        for names, value in ((plan.mark_stale, True), (plan.clear_stale, False)):
            if names:
                await conn.execute(
                    update(clusters).where(clusters.c.name.in_(names)).values(stale=value)
                )
        applied = await apply(conn, ctx, withhold=plan.withhold, give_back=plan.give_back)
    if applied.newest_revision is not None:
        ctx.notifier.committed(applied.newest_revision)
    return SweepResult(
        fleet=plan.fleet, wrote=True, applied=applied, marked_stale=len(plan.mark_stale)
    )


@dataclass(frozen=True)
class WithdrawalSummary:
    """The fleet-wide numbers of the metrics (read from the database: every replica
    reports the same)."""

    stale_clusters: int
    heartbeated_clusters: int
    panic: bool
    clusters_withdrawn: int
    endpointslices_withdrawn: int


async def summary(ctx: StoreContext) -> WithdrawalSummary:
    """Stale clusters as recorded, whether that is a panic, and what is withheld now."""
    async with ctx.read() as conn:
        heard, stale = (
            await conn.execute(
                select(
                    func.count(clusters.c.last_heartbeat),
                    func.count().filter(clusters.c.stale.is_(True)),
                ).where(clusters.c.deleting.is_(False))
            )
        ).one()
        withdrawn_clusters = (
            await conn.execute(select(func.count(func.distinct(endpoint_withdrawals.c.cluster_id))))
        ).scalar_one()
        withdrawn_slices = (
            await conn.execute(
                select(func.count()).select_from(
                    endpoint_slices.join(
                        endpoint_withdrawals,
                        (endpoint_withdrawals.c.cluster_id == endpoint_slices.c.cluster_id)
                        & (endpoint_withdrawals.c.namespace == endpoint_slices.c.namespace)
                        & (endpoint_withdrawals.c.service_name == endpoint_slices.c.service_name),
                    )
                )
            )
        ).scalar_one()
    heard, stale = int(heard or 0), int(stale or 0)
    return WithdrawalSummary(
        stale_clusters=stale,
        heartbeated_clusters=heard,
        panic=stale > ctx.stale_panic_fraction * heard,
        clusters_withdrawn=int(withdrawn_clusters or 0),
        endpointslices_withdrawn=int(withdrawn_slices or 0),
    )


class Withdrawals:
    """The store's face for docs/reference.md#failover: the sweep every replica runs, and the
    metrics' numbers."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx

    async def sweep(self, *, now: datetime | None = None) -> SweepResult:
        """One staleness sweep (`sweep`)."""
        return await sweep(self._ctx, now=now)

    async def summary(self) -> WithdrawalSummary:
        return await summary(self._ctx)
