"""Benchmark: fleet scale (docs/reference.md#fleet-scale) — what one hub tier holds.

    python -m bench.fleet_scale --clusters 1000 [--replicas 2] [--heartbeat-interval 30]
                                [--changes 5] [--restart] [--units] [--sweep-clusters 10000]

**Per-unit costs** (`--units`, one hub process on PostgreSQL, its CPU read from `/proc`):
hub CPU per `GET /healthz` over kept-alive connections (the floor) and per heartbeat, both
closed-loop at the same concurrency and paced as a fleet sends them (each cluster beating
on its own jittered schedule); hub memory per idle import watch (RSS with `--unit-watches`
scoped watches open, minus before); hub CPU per event delivered to one watcher (slice
changes in one namespace watched by a tenth of the watches, the rest scoped elsewhere);
the staleness sweep's CPU at `--sweep-clusters` clusters (`bench.failover.sweep_cpu`).

**The fleet** (`--clusters N`): `--replicas` real hub processes (`bench.hubserver`) on one
PostgreSQL database, and N simulated member agents over real HTTP (`bench.fleetsim`: each
registers, heartbeats on the agent's schedule, holds and reads its export and import
watches, resumes them by the agent's rules, exports 10 Services with a slice each), played
by `--simulators` processes (`bench.fleetshard`; by default one per 2,000 clusters: a
process holds three sockets per agent, and its own loop's lag would count in the answer
times it measures). This process starts the hubs and the simulators, drives the phases and
polls the clusters list and `pg_stat_activity`.

Measured: the time until every export and slice is acknowledged and until every importing
cluster's watch holds every slice of its scope (converged); then `--changes` single
endpoint changes (a slice PUT carrying `spec.sourceObservedTime`, as the agent stamps it):
from that stamp to the change arriving on every importing cluster's watch — the hub's share
of `mcs_endpointslice_sync_latency_seconds` (an agent adds its own Kubernetes write); the
heartbeat answer time; each replica's peak RSS and CPU; new TCP connections per request;
whether any cluster was ever Stale (the clusters list, polled); and, over `--steady-seconds`
after convergence, what holding the fleet costs the tier, per cluster and second (its beats,
its watches' BOOKMARKs and re-opens: the figure docs/install.md sizes a tier by).

**Replica restart** (`--restart`): `kill -9` of one replica in steady state. Its agents'
watches break and resume on the other replica after the back-off: the reconnect rate
(watches re-opened per second), 410s and relists (none expected), slices withdrawn on any
watch (none), Stale clusters (none), and the time until every watch is open again and every
agent has had a heartbeat answered (steady state).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import signal
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, cast

import aiohttp

from bench.fleetshard import Simulators
from bench.fleetsim import (
    AGENT_VERSION,
    SERVICES,
    Fleet,
    Tier,
    Watch,
    export_body,
    namespace,
    progress,
    slice_of,
    stale_clusters,
    wait_until,
)
from bench.support import (
    HubProcess,
    base_parser,
    cpu_seconds,
    fresh_database,
    mib,
    peak_rss_bytes,
    percentiles,
    rss_bytes,
    write_result,
)
from member.heartbeat import HeartbeatLoop, VersionGate
from member.hubclient import HubClient
from shared.constants import HEARTBEAT_INTERVAL_DEFAULT_SECONDS

NAME = "fleet_scale"
CLUSTERS_PER_SIMULATOR = 2000  # the default share of one simulator process

_ACTIVITY = """
SELECT application_name, state, count(*) AS n,
       max(extract(epoch FROM now() - state_change)) AS longest
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
GROUP BY application_name, state
"""
_IDLE_IN_TRANSACTION = """
SELECT extract(epoch FROM now() - state_change) AS idle, application_name,
       extract(epoch FROM now() - xact_start) AS open, left(query, 160) AS query
FROM pg_stat_activity WHERE datname = current_database()
  AND state = 'idle in transaction' ORDER BY state_change LIMIT 1
"""


_STALE = """
SELECT count(*) FROM clusters
WHERE stale OR last_heartbeat < now() - make_interval(secs => $1)
"""


class Sampler:
    """Samples the fleet's Stale count every 5 s while the run lasts, and the database's
    sessions (`pg_stat_activity`): the most at once by application and state, and the
    longest a transaction sat idle (its last statement), the evidence that a transaction
    held its locks across something other than the database.

    On PostgreSQL the Stale count is read from the database itself (`_STALE`: recorded
    Stale by the sweep, or a last heartbeat older than the TTL, as the hub derives it,
    `hub.store.clusterstate`): the clusters list it would otherwise ask a replica for is
    10,000 records at full size, and answering it every 5 s took a sixth of that replica's
    CPU in a 10,000-cluster run."""

    def __init__(
        self,
        stale: Callable[[], Awaitable[int]],
        database_url: str | None = None,
        *,
        ttl: float,
    ) -> None:
        self.stale = stale
        self.ttl = ttl
        self.database_url = database_url
        self.stale_max = 0
        self._failed = False
        self.sessions_max: dict[str, int] = {}
        self.idle_in_transaction_max: dict[str, Any] = {"seconds": 0.0}
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        conn: Any = None
        if self.database_url is not None and self.database_url.startswith("postgres"):
            import asyncpg

            from hub.store.db import asyncpg_dsn

            with contextlib.suppress(Exception):
                conn = await asyncpg.connect(asyncpg_dsn(self.database_url))
        try:
            while True:
                try:
                    if conn is not None:
                        stale = int(await conn.fetchval(_STALE, float(self.ttl)))
                    else:
                        stale = await self.stale()
                    self.stale_max = max(self.stale_max, stale)
                except Exception as exc:  # a sample lost, said once; the run goes on
                    if not self._failed:
                        progress(f"the Stale count could not be read: {exc!r}")
                    self._failed = True
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await self._sample(conn)
                await asyncio.sleep(5)
        finally:
            if conn is not None:
                await conn.close()

    async def _sample(self, conn: Any) -> None:
        for row in await conn.fetch(_ACTIVITY):
            key = f"{row['application_name'] or '?'}/{row['state'] or '?'}"
            self.sessions_max[key] = max(self.sessions_max.get(key, 0), int(row["n"]))
        row = await conn.fetchrow(_IDLE_IN_TRANSACTION)
        if row is not None and float(row["idle"]) > self.idle_in_transaction_max["seconds"]:
            self.idle_in_transaction_max = {
                "seconds": round(float(row["idle"]), 2),
                "transaction_open_seconds": round(float(row["open"]), 2),
                "application": row["application_name"],
                "last_statement": row["query"],
            }
            if float(row["idle"]) > 2.0:
                progress(f"idle in transaction: {self.idle_in_transaction_max}")

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def replica_usage(hubs: Sequence[HubProcess], cpu_before: Sequence[float]) -> list[dict[str, Any]]:
    return [
        {
            "peak_rss_mib": mib(peak_rss_bytes(hub.pid)),
            "rss_mib": mib(rss_bytes(hub.pid)),
            "cpu_seconds": round(cpu_seconds(hub.pid) - before, 2),
        }
        for hub, before in zip(hubs, cpu_before, strict=True)
        if hub.process is not None and hub.process.poll() is None
    ]


async def poll_until(
    condition: Callable[[], Awaitable[bool]], *, seconds: float, every: float = 0.5
) -> float | None:
    """Seconds until `condition` (asked of the simulators) held; None if it never did."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if await condition():
            return time.monotonic() - started
        await asyncio.sleep(every)
    return None


class Admin:
    """The benchmark's own view of the tier: the clusters list, from a live replica."""

    def __init__(self, hubs: Sequence[HubProcess], token: str) -> None:
        self.hubs = hubs
        self.token = token
        self.down: set[int] = set()
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))

    async def stale(self) -> int:
        live = next(h for i, h in enumerate(self.hubs) if i not in self.down)
        return await stale_clusters(self.session, live.url, self.token)

    async def close(self) -> None:
        await self.session.close()


def simulators_for(args: Any) -> int:
    return args.simulators or max(1, math.ceil(args.clusters / CLUSTERS_PER_SIMULATOR))


async def run_fleet(args: Any, database_url: str, directory: Path) -> dict[str, Any]:
    # Each replica sized to hold every agent's connections once the other is killed (its 2
    # watches and its kept heartbeat connection, plus the shared write pools), as
    # docs/install.md "Sizing a hub tier" says to: at the default cap of 4,096 a survivor
    # of 3,000 agents evicted and refused connections in a loop.
    connections = max(4096, 3 * args.clusters + args.connections * args.replicas + 1024)
    extra = [
        "--cluster-ttl", str(args.ttl), "--history-limit", str(args.history_limit),
        "--max-connections", str(connections),
    ]  # fmt: skip
    hubs = [
        HubProcess(database_url, directory / f"hub-{i}", extra_args=extra)
        for i in range(args.replicas)
    ]
    hubs[0].start()  # migrates the database first
    for hub in hubs[1:]:
        hub.admin_token = hubs[0].admin_token
        hub.start()
    admin = Admin(hubs, hubs[0].admin_token)
    processes = simulators_for(args)
    result: dict[str, Any] = {
        "clusters": args.clusters,
        "replicas": args.replicas,
        "simulator_processes": processes,
    }
    simulators = await Simulators.start(
        processes=processes,
        clusters=args.clusters,
        urls=[h.url for h in hubs],
        heartbeat_interval=args.heartbeat_interval,
        connections=args.connections,
    )
    sampler: Sampler | None = None
    try:
        progress(f"registering {args.clusters} clusters ({processes} simulator processes)")
        t0 = time.perf_counter()
        await simulators.call("register", admin=admin.token)
        result["register_seconds"] = round(time.perf_counter() - t0, 1)
        await simulators.call("start")

        async def all_open() -> bool:
            return await simulators.total("watches_open") == 2 * args.clusters

        result["watches_open_seconds"] = await poll_until(
            all_open, seconds=args.converge_timeout if args.hold else 300
        )
        sampler = Sampler(admin.stale, database_url, ttl=args.ttl)
        sampler.start()
        cpu0 = [cpu_seconds(h.pid) for h in hubs]
        simulator0 = await simulators.total("cpu_seconds")
        progress(
            f"{await simulators.total('watches_open')} watches open; "
            + ("holding" if args.hold else "exporting")
        )
        t0 = time.perf_counter()

        async def report() -> None:
            while True:
                await asyncio.sleep(30)
                status = await simulators.call("status")

                def total(key: str, status: list[dict[str, Any]] = status) -> int:
                    return sum(s[key] for s in status)

                progress(
                    f"{total('acknowledged')} Services acknowledged, {total('converged')} "
                    f"clusters converged, {total('watches_open')} watches open, "
                    f"{total('watch_errors')} ERROR events, "
                    f"{total('refused_opens')} refused opens"
                )

        reporter = asyncio.create_task(report())
        if args.hold:
            # Registered, beating and watching, nothing exported: what the tier pays to
            # hold the fleet, measured in the steady state below.
            result["watches_open"] = await simulators.total("watches_open")
            reporter.cancel()
            result["exports"] = result["slices"] = 0
            result["converged_seconds"] = None
        else:
            await converge(simulators, hubs, args, result, cpu0, simulator0, t0)
            reporter.cancel()
        before = await simulators.call("status")
        cpu1 = [cpu_seconds(h.pid) for h in hubs]
        steady_from = time.monotonic()
        await asyncio.sleep(args.steady_seconds)
        steady_to = time.monotonic()
        after = await simulators.call("status")

        def grew(key: str) -> int:
            return sum(a[key] for a in after) - sum(b[key] for b in before)

        steady_replicas = replica_usage(hubs, cpu1)
        result["steady"] = {
            "seconds": args.steady_seconds,
            "heartbeats": grew("heartbeats"),
            "new_connections_per_request": round(grew("connections") / max(1, grew("requests")), 4),
            "replicas": steady_replicas,
            # What holding one cluster costs the tier (its beats, its two watches' BOOKMARKs
            # and re-opens), the per-cluster figure docs/install.md sizes a tier by.
            "hub_cpu_us_per_cluster_second": round(
                sum(r["cpu_seconds"] for r in steady_replicas)
                / max(args.steady_seconds, 1e-9)
                / max(args.clusters, 1)
                * 1e6,
                1,
            ),
        }
        if not args.hold:
            result["endpoint_change"] = await endpoint_changes(simulators, args.changes)
            progress(f"endpoint change: {result['endpoint_change']['change_to_every_importer']}")
        if args.restart and len(hubs) > 1:
            result["restart"] = await restart(simulators, hubs, admin, args)
        beats = await simulators.call("heartbeats")
        seconds = [d for b in beats for d in b["seconds"]]
        at = [t for b in beats for t in b["at"]]
        result["heartbeat_answer"] = percentiles(seconds)
        result["heartbeat_answer_steady"] = percentiles(
            [d for d, t in zip(seconds, at, strict=True) if steady_from <= t < steady_to]
        )
        status = await simulators.call("status")
        result["heartbeat_errors"] = sum(s["heartbeat_errors"] for s in status)
        result["stale_max"] = sampler.stale_max
        result["database_sessions_max"] = sampler.sessions_max
        result["idle_in_transaction_max"] = sampler.idle_in_transaction_max
        result["watch_error_events"] = sum(s["watch_errors"] for s in status)
        result["watch_opens_refused"] = sum(s["refused_opens"] for s in status)
        result["stale_at_end"] = await admin.stale()
        result["gone_410"] = sum(s["gone"] for s in status)
        result["withdrawn_slice_events"] = sum(s["withdrawn"] for s in status)
        result["replicas"] = replica_usage(hubs, [0.0] * len(hubs))
    finally:
        if sampler is not None:
            await sampler.stop()
        await simulators.stop()
        await admin.close()
        for hub in hubs:
            hub.stop()
    return result


async def converge(
    simulators: Simulators,
    hubs: Sequence[HubProcess],
    args: Any,
    result: dict[str, Any],
    cpu0: Sequence[float],
    simulator0: float,
    t0: float,
) -> None:
    """Every agent exports its Services and slices; until every importer holds every slice
    of its scope (module docstring)."""
    acknowledged = max(await simulators.call("export_all"))
    progress(f"exports acknowledged in {acknowledged:.1f}s; waiting for every importer")

    async def all_converged() -> bool:
        return await simulators.total("converged") == args.clusters

    converged = await poll_until(all_converged, seconds=args.converge_timeout)
    total = time.perf_counter() - t0
    result["exports"] = args.clusters * SERVICES
    result["slices"] = args.clusters * SERVICES
    result["exports_acknowledged_seconds"] = round(acknowledged, 1)
    result["converged_seconds"] = round(total, 1) if converged is not None else None
    result["converged_clusters"] = await simulators.total("converged")
    result["deliveries_expected"] = await simulators.total("deliveries_expected")
    result["replicas_during_convergence"] = replica_usage(hubs, cpu0)
    # The simulators' CPU says whether the answer times they measure include their own
    # event loops' lag (near a core each: they do).
    result["simulator_cpu_seconds_during_convergence"] = round(
        await simulators.total("cpu_seconds") - simulator0, 2
    )
    progress(f"converged in {total:.1f}s ({result['converged_clusters']}/{args.clusters})")


async def endpoint_changes(simulators: Simulators, count: int) -> dict[str, Any]:
    """`count` single endpoint changes of cluster 0's first slice; each from its stamp to
    its arrival on every importing cluster's watch, whichever simulator plays it."""
    latencies: list[float] = []
    missing = importers = 0
    for change in range(1, count + 1):
        importers = sum(await simulators.call("watch_for", change=change))
        stamp = await simulators.holding(0).call("put_change", change=change)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen = [t for share in await simulators.call("arrivals", change=change) for t in share]
            if all(t is not None for t in seen):
                break
            await asyncio.sleep(0.05)
        seen = [
            t
            for share in await simulators.call("arrivals", change=change, done=True)
            for t in share
        ]
        missing += sum(1 for t in seen if t is None)
        latencies += [t - stamp for t in seen if t is not None]
        await asyncio.sleep(1.0)
    return {
        "changes": count,
        "importers": importers,
        "missing": missing,
        "change_to_every_importer": percentiles(latencies),
    }


async def restart(
    simulators: Simulators, hubs: Sequence[HubProcess], admin: Admin, args: Any
) -> dict[str, Any]:
    """kill -9 of the last replica in steady state (module docstring)."""
    victim = len(hubs) - 1
    hub = hubs[victim]
    assert hub.process is not None
    on_victim = sum(await simulators.call("replica_down", victim=victim))
    admin.down.add(victim)
    killed = time.monotonic()
    os.kill(hub.pid, signal.SIGKILL)
    hub.process.wait()
    progress(f"killed replica {victim} ({on_victim} watches on it)")

    async def rejoined() -> bool:
        return all(await simulators.call("rejoined", killed=killed))

    async def beaten() -> bool:
        return all(await simulators.call("beaten", killed=killed))

    # Both from the kill (one after the other, the second would count from the first).
    back, steady = await asyncio.gather(
        poll_until(rejoined, seconds=120, every=0.1),
        poll_until(beaten, seconds=args.ttl + 60, every=0.5),
    )
    since = await simulators.call("since_kill")
    reopened = [t - killed for s in since for t in s["opens"]]
    per_second: dict[int, int] = {}
    for t in reopened:
        per_second[int(t)] = per_second.get(int(t), 0) + 1
    return {
        "watches_on_killed_replica": on_victim,
        "watches_reopened": len(reopened),
        "all_watches_open_seconds": back,
        "every_agent_heartbeat_answered_seconds": steady,
        "steady_state_seconds": None
        if back is None or steady is None
        else round(max(back, steady), 2),
        "reopen_seconds": percentiles(reopened),
        "reopens_per_second_max": max(per_second.values(), default=0),
        "gone_410": sum(s["gone"] for s in since),
        "withdrawn_slice_events": sum(s["withdrawn"] for s in since),
    }


# -- per-unit costs --------------------------------------------------------------------------


async def units(args: Any, database_url: str, directory: Path) -> dict[str, Any]:
    """Per-unit hub costs on one replica (module docstring)."""
    hub = HubProcess(database_url, directory / "units", extra_args=["--cluster-ttl", "90"])
    hub.start()
    out: dict[str, Any] = {}
    try:
        tier = Tier([hub.url])
        uargs = argparse_namespace(
            clusters=args.unit_clusters,
            heartbeat_interval=args.heartbeat_interval,
            connections=args.connections,
        )
        fleet = Fleet(uargs, tier)
        await fleet.start_sessions()
        await fleet.register(hub.admin_token)
        session = fleet.sessions[0]

        async def closed(kind: str, total: int, concurrency: int) -> dict[str, Any]:
            index = 0
            latencies: list[float] = []
            body = {"agentVersion": AGENT_VERSION, "importedServices": 100}

            async def worker() -> None:
                nonlocal index
                while index < total:
                    i = index
                    index += 1
                    agent = fleet.agents[i % len(fleet.agents)]
                    t = time.perf_counter()
                    if kind == "healthz":
                        async with session.get(hub.url + "/healthz") as r:
                            await r.read()
                    else:
                        async with session.post(
                            f"{hub.url}/api/v1/clusters/{agent.name}/heartbeat",
                            json=body,
                            headers={"Authorization": f"Bearer {agent.token}"},
                        ) as r:
                            await r.read()
                            assert r.status == 200, r.status
                    latencies.append(time.perf_counter() - t)

            c0, w0 = cpu_seconds(hub.pid), time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            c1, w1 = cpu_seconds(hub.pid), time.perf_counter()
            return {
                "requests": total,
                "concurrency": concurrency,
                "per_second": round(total / (w1 - w0), 1),
                "hub_cpu_ms_per_request": round((c1 - c0) / total * 1000, 3),
                "latency": percentiles(latencies),
            }

        await closed("healthz", 300, 8)
        await closed("heartbeat", 300, 8)  # warm-up
        rounds = []
        for _ in range(args.unit_rounds):
            h = await closed("healthz", args.unit_requests, args.unit_concurrency)
            b = await closed("heartbeat", args.unit_requests, args.unit_concurrency)
            rounds.append({"healthz": h, "heartbeat": b})
        out["closed_loop"] = rounds
        floor = statistics.median(r["healthz"]["hub_cpu_ms_per_request"] for r in rounds)
        beat = statistics.median(r["heartbeat"]["hub_cpu_ms_per_request"] for r in rounds)
        # Paced: every registered cluster beats on its own jittered schedule, at an interval
        # short enough that the run sees several beats each.
        for agent in fleet.agents:
            assert agent.beat is not None
            agent.beat = HeartbeatLoop(
                hub=cast(HubClient, None),
                interval=args.unit_paced_interval,
                gate=VersionGate(agent_version=AGENT_VERSION),
                rng=random.Random(agent.index),
            )

        async def paced(*, healthz: bool) -> dict[str, Any]:
            beats0 = len(fleet.counters.heartbeat_seconds)
            c0 = cpu_seconds(hub.pid)
            fleet.start_heartbeats(healthz=healthz)
            await asyncio.sleep(args.unit_paced_seconds)
            beats = len(fleet.counters.heartbeat_seconds) - beats0
            cpu = cpu_seconds(hub.pid) - c0
            for task in fleet._tasks:
                task.cancel()
            fleet._tasks.clear()
            await asyncio.sleep(1)
            return {
                "clusters": len(fleet.agents),
                "interval_seconds": args.unit_paced_interval,
                "requests": beats,
                "per_second": round(beats / args.unit_paced_seconds, 1),
                "hub_cpu_ms_per_request": round(cpu / max(1, beats) * 1000, 3),
                "answer": percentiles(fleet.counters.heartbeat_seconds[beats0:]),
            }

        # The floor first, at the same pace (`Fleet.start_heartbeats`), then the beats.
        out["paced_healthz"] = await paced(healthz=True)
        out["paced"] = await paced(healthz=False)
        paced_floor = out["paced_healthz"]["hub_cpu_ms_per_request"]
        out["heartbeat_cpu_ms"] = beat
        out["healthz_cpu_ms"] = floor
        out["heartbeat_target_ms"] = round(max(0.2, 1.5 * floor), 3)
        out["heartbeat_over_healthz"] = round(beat / floor, 2) if floor else None
        out["paced_heartbeat_target_ms"] = round(max(0.2, 1.5 * paced_floor), 3)
        out["paced_heartbeat_over_healthz"] = (
            round(out["paced"]["hub_cpu_ms_per_request"] / paced_floor, 2) if paced_floor else None
        )

        # Idle watches: memory per watch, then CPU per delivered event.
        # The opens themselves, all at once, as a lost replica's agents re-open on a
        # survivor: how fast one replica takes them and its CPU per open (the sizing of
        # a tier's survivors, docs/install.md).
        rss0 = rss_bytes(hub.pid)
        c0 = cpu_seconds(hub.pid)
        for agent in fleet.agents[: args.unit_watches]:
            agent.imports = Watch(agent, f"/api/v1/clusters/{agent.name}/imports", fleet.counters)
            fleet._tasks.append(asyncio.create_task(agent.imports.run(tier)))
        opened = await wait_until(
            lambda: (
                sum(1 for a in fleet.agents if a.imports and a.imports.open)
                == min(args.unit_watches, len(fleet.agents))
            ),
            seconds=120,
            every=0.05,
        )
        open_cpu = cpu_seconds(hub.pid) - c0
        await asyncio.sleep(3)
        watches = sum(1 for a in fleet.agents if a.imports and a.imports.open)
        out["idle_watch"] = {
            "watches": watches,
            "rss_before_mib": mib(rss0),
            "rss_after_mib": mib(rss_bytes(hub.pid)),
            "kib_per_watch": round((rss_bytes(hub.pid) - rss0) / max(1, watches) / 1024, 1),
            "all_open_seconds": None if opened is None else round(opened, 2),
            "opens_per_second": None if not opened else round(watches / opened, 1),
            "hub_cpu_ms_per_open": round(open_cpu / max(1, watches) * 1000, 3),
        }
        # Events: team 0's first cluster exports one Service and changes its slice; every
        # watch whose scope holds team-0 receives each change, the others nothing.
        source = fleet.agents[0]
        ns = namespace(0)
        status, _ = await fleet.request(
            source,
            "PUT",
            f"/api/v1/clusters/{source.name}/serviceexports/{ns}/svc-0",
            export_body(0, 0),
        )
        assert status in (200, 201), status
        receivers = [a for a in fleet.agents if a.imports and ns in a.scope]
        c0 = cpu_seconds(hub.pid)
        for change in range(1, args.unit_changes + 1):
            status, _ = await fleet.request(
                source,
                "PUT",
                f"/api/v1/clusters/{source.name}/endpointslices/{ns}/svc-0-{source.name}",
                slice_of(0, 0, change=change),
            )
            assert status in (200, 201), status
        await asyncio.sleep(2)
        cpu = cpu_seconds(hub.pid) - c0
        # The same changes with nobody watching: the write's own cost, to subtract.
        for agent in fleet.agents:
            if agent.imports is not None:
                agent.imports.close()
        for task in fleet._tasks:
            task.cancel()
        fleet._tasks.clear()
        await asyncio.sleep(2)
        c0 = cpu_seconds(hub.pid)
        for change in range(args.unit_changes + 1, 2 * args.unit_changes + 1):
            await fleet.request(
                source,
                "PUT",
                f"/api/v1/clusters/{source.name}/endpointslices/{ns}/svc-0-{source.name}",
                slice_of(0, 0, change=change),
            )
        await asyncio.sleep(2)
        alone = cpu_seconds(hub.pid) - c0
        deliveries = args.unit_changes * len(receivers)
        out["event_delivery"] = {
            "changes": args.unit_changes,
            "watches": watches,
            "receiving_watches": len(receivers),
            "hub_cpu_seconds_watched": round(cpu, 3),
            "hub_cpu_seconds_unwatched": round(alone, 3),
            "us_per_delivery": round((cpu - alone) / max(1, deliveries) * 1e6, 1),
        }
        await fleet.close()
    finally:
        hub.stop()
    return out


def argparse_namespace(**values: Any) -> Any:
    import argparse

    return argparse.Namespace(**values)


async def main_async(args: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mcsync-fleet-") as tmp:
        if args.units:
            async with fresh_database(args.backend) as url:
                progress("per-unit costs")
                result["units"] = await units(args, url, Path(tmp))
            if args.sweep_clusters:
                from bench.failover import sweep_cpu

                sweep_args = argparse_namespace(
                    sweep_clusters=args.sweep_clusters, services=20, sweeps=args.sweeps
                )
                async with fresh_database(args.backend) as url:
                    progress(f"sweep at {args.sweep_clusters} clusters")
                    result["sweep"] = await sweep_cpu(sweep_args, url)
        if args.clusters:
            async with fresh_database(args.backend) as url:
                result["fleet"] = await run_fleet(args, url, Path(tmp))
    return result


def target(result: dict[str, Any]) -> dict[str, Any]:
    """Each measured figure beside its target (docs/reference.md#fleet-scale), and whether
    every one was met."""
    checks: dict[str, bool] = {}
    unit = result.get("units")
    if unit:
        checks["heartbeat_cpu"] = unit["heartbeat_cpu_ms"] <= unit["heartbeat_target_ms"]
        # Paced beats against `GET /healthz` at the same pace, in the same run.
        checks["heartbeat_cpu_paced"] = (
            unit["paced"]["hub_cpu_ms_per_request"] <= unit["paced_heartbeat_target_ms"]
        )
        checks["idle_watch_kib"] = unit["idle_watch"]["kib_per_watch"] <= 32
        checks["delivery_us"] = unit["event_delivery"]["us_per_delivery"] <= 20
    sweep = result.get("sweep")
    if sweep:
        checks["sweep_cpu_ms"] = sweep["sweep_nothing_stale"]["cpu_ms_median"] <= 20
    fleet = result.get("fleet")
    if fleet:
        if "endpoint_change" in fleet:  # not with --hold: nothing exported
            checks["converged"] = fleet["converged_seconds"] is not None
            checks["endpoint_change_p99"] = (
                fleet["endpoint_change"]["change_to_every_importer"]["p99_ms"] < 2000
                and fleet["endpoint_change"]["missing"] == 0
            )
        else:
            checks["all_watches_open"] = fleet["watches_open"] == 2 * fleet["clusters"]
        checks["rss_per_replica"] = all(r["peak_rss_mib"] < 2048 for r in fleet["replicas"])
        checks["heartbeat_answer_p99"] = fleet["heartbeat_answer"]["p99_ms"] < 100
        checks["never_stale"] = fleet["stale_max"] == 0 and fleet["stale_at_end"] == 0
        checks["no_new_connection_per_heartbeat"] = (
            fleet["steady"]["new_connections_per_request"] < 0.01
        )
        restart_run = fleet.get("restart")
        if restart_run:
            checks["restart_no_410"] = restart_run["gone_410"] == 0
            checks["restart_nothing_withdrawn"] = restart_run["withdrawn_slice_events"] == 0
            checks["restart_steady_under_60s"] = (
                restart_run["steady_state_seconds"] is not None
                and restart_run["steady_state_seconds"] < 60
            )
    return {
        "heartbeat_cpu_ms": "<= max(0.2, 1.5 x GET /healthz)",
        "idle_watch_kib_at_most": 32,
        "us_per_delivery_at_most": 20,
        "sweep_cpu_ms_at_10000_at_most": 20,
        "converge_100000_exports_seconds_below": 120,
        "endpoint_change_p99_ms_below": 2000,
        "rss_per_replica_mib_below": 2048,
        "heartbeat_answer_p99_ms_below": 100,
        "restart_steady_seconds_below": 60,
        "checks": checks,
        "met": all(checks.values()),
    }


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument(
        "--simulators",
        type=int,
        default=0,
        help=f"simulator processes (default: one per {CLUSTERS_PER_SIMULATOR} clusters)",
    )
    parser.add_argument(
        "--heartbeat-interval", type=float, default=HEARTBEAT_INTERVAL_DEFAULT_SECONDS
    )
    parser.add_argument("--ttl", type=float, default=90.0)
    parser.add_argument("--history-limit", type=int, default=1_000_000)
    parser.add_argument(
        "--connections", type=int, default=128, help="client connections per replica"
    )
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--steady-seconds", type=float, default=30.0)
    parser.add_argument("--converge-timeout", type=float, default=600.0)
    parser.add_argument("--restart", action="store_true")
    parser.add_argument(
        "--hold",
        action="store_true",
        help="register, beat and watch, export nothing: what holding the fleet costs",
    )
    parser.add_argument("--units", action="store_true")
    parser.add_argument("--unit-clusters", type=int, default=1000)
    parser.add_argument("--unit-requests", type=int, default=3000)
    parser.add_argument("--unit-concurrency", type=int, default=32)
    parser.add_argument("--unit-rounds", type=int, default=2)
    parser.add_argument("--unit-paced-interval", type=float, default=5.0)
    parser.add_argument("--unit-paced-seconds", type=float, default=20.0)
    parser.add_argument("--unit-watches", type=int, default=1000)
    parser.add_argument("--unit-changes", type=int, default=50)
    parser.add_argument("--sweep-clusters", type=int, default=10000)
    parser.add_argument("--sweeps", type=int, default=50)
    args = parser.parse_args()
    if args.smoke:
        # The fleet at 1,000 clusters (10,000 exports, 2,000 watches) in two simulator
        # processes: the size at which CI keeps the whole path working, in about a minute.
        args.clusters, args.changes, args.steady_seconds = 1000, 2, 3.0
        args.simulators = 2
        args.unit_clusters, args.unit_requests, args.unit_rounds = 20, 100, 1
        args.unit_paced_seconds, args.unit_paced_interval = 2.0, 1.0
        args.unit_watches, args.unit_changes = 20, 5
        args.sweep_clusters = 0  # bench.failover's smoke runs the sweep
        # Beats every 10 s: the kill's steady state (every agent answered since) comes
        # within one interval, and 1,000 agents beat 100 times a second.
        args.heartbeat_interval, args.ttl = 10.0, 30.0
        args.restart = True
        args.units = True
    result = asyncio.run(main_async(args))
    result["target"] = target(result)
    write_result(NAME, args, result)


if __name__ == "__main__":
    main()
