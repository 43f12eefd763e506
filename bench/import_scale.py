"""Agent import benchmark (b): one agent importing 10,000 Services x 10 endpoints — RSS, cold
start, and a fresh change during the startup repair.

    python -m bench.import_scale [--services 10000] [--sources 25] [--smoke]

Only the importing agent runs. The fleet it imports is made on the hub directly, through
the real sync API, as `--sources` other clusters' exports and slices (`bench.slices.Fleet`,
one exporter per key here: `--services` keys, each with one slice of 10 endpoints). The
importing cluster is one emulator (a thread of this process) holding the namespaces, and
nothing else; one real agent process (`python -m member`), one hub process on a fresh
PostgreSQL database.

1. cold start: the agent starts on the empty cluster. Timed until the emulator stores
   all `--services` ServiceImports, derived Services and mirrored slices (the stopwatch is
   the store's commit, `bench.import_clusters.ImportStopwatch`). As soon as the agent is
   ready (its import running), one fresh change is made on the hub: a source slice's PUT
   moving a pod IP; timed from the PUT sent until the mirrored slice carrying the new IP
   is stored.
2. restart: the agent is stopped and started again over the full cluster; its startup
   repair queues every key (docs/reference.md#import-path) and must rewrite nothing. The same fresh
   change is made when it turns ready, and timed; then until the import queues are empty after a
   reconcile per key. The import writes of the repair are counted (target: only the
   fresh change's).
3. idle: RSS after the repair, every cache full.

Targets: agent RSS < 200 MB; cold start < 60 s; a fresh change during the
startup repair lands in < 2 s.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.fleet import Agent, Cluster, wait_until
from bench.import_clusters import IMPORT_KINDS, ImportStopwatch, difference, import_writes
from bench.slices import Fleet, cluster_name, moved, progress, watch_session
from bench.support import (
    HubProcess,
    base_parser,
    cpu_seconds,
    fresh_database_sync,
    mib,
    peak_rss_bytes,
    rss_bytes,
    write_result,
)

NAME = "import_scale"
IMPORTER = "importer"
ENDPOINTS = 10
NAMESPACES = 100
IMPORT_QUEUES = ("serviceimport", "derivedservice", "mirroredslices")
TARGET_RSS_MIB = 200.0
TARGET_COLD_SECONDS = 60.0
TARGET_FRESH_MS = 2000.0


class OwnKeys(Fleet):
    """`Fleet` with one exporter per key: cluster c's slot j is key c x services + j."""

    @property
    def keys(self) -> int:
        return self.clusters * self.services

    def key(self, cluster: int, slot: int) -> tuple[str, str]:
        k = cluster * self.services + slot
        return f"ns-{k % NAMESPACES}", f"svc-{k}"


def fill_hub(fleet: Fleet, hub: HubProcess) -> dict[str, float]:
    async def go() -> dict[str, float]:
        async with watch_session() as session:
            return await fleet.fill(hub, session)

    return asyncio.run(go())


def repaired(agent: Agent, keys: int) -> bool:
    """Every import queue empty, after at least one reconcile per key in each."""
    samples = agent.samples()

    def value(metric: str, label: str, name: str) -> float:
        return next(
            (v for n, labels, v in samples if n == metric and labels.get(label) == name), 0.0
        )

    return all(
        value("workqueue_depth", "name", q) == 0
        and value("mcsync_agent_reconcile_duration_seconds_count", "controller", q) >= keys
        for q in IMPORT_QUEUES
    )


class FreshChange:
    """One source slice moved on the hub, and the time until its mirror holds the move."""

    def __init__(self, fleet: Fleet, hub: HubProcess, stopwatch: ImportStopwatch) -> None:
        self.fleet, self.hub, self.stopwatch = fleet, hub, stopwatch
        self.made = 0

    def make(self, *, timeout: float) -> float:
        """Make the change; answers seconds from the PUT's send to the mirror stored."""
        cluster, slot = self.made % self.fleet.clusters, self.fleet.services - 1
        body = moved(self.fleet.slice(cluster, slot), 10_000 + self.made)
        self.made += 1
        new_address = body["spec"]["endpoints"][0]["addresses"][0]
        self.stopwatch.watch(new_address)
        meta = body["metadata"]
        url = (
            f"{self.hub.url}/api/v1/clusters/{cluster_name(cluster)}/endpointslices/"
            f"{meta['namespace']}/{meta['name']}"
        )
        sent = time.perf_counter()
        answer = httpx.put(url, json=body, headers=self.fleet.headers(cluster), timeout=30)
        if answer.status_code != 200:
            raise RuntimeError(f"PUT {url}: {answer.status_code} {answer.text[:300]}")
        wait_until(
            lambda: self.stopwatch.landed_in(new_address, [IMPORTER]) is not None,
            what="the fresh change's mirrored slice",
            timeout=timeout,
            interval=0.01,
        )
        landed = self.stopwatch.landed_in(new_address, [IMPORTER]) or [sent]
        return landed[0] - sent


def run(args: Any) -> dict[str, Any]:
    per_source = -(-args.services // args.sources)
    fleet = OwnKeys(clusters=args.sources, services=per_source, endpoints=ENDPOINTS)
    total = fleet.keys
    want = dict.fromkeys(IMPORT_KINDS, total)
    stopwatch = ImportStopwatch()
    with fresh_database_sync(args.backend) as url, tempfile.TemporaryDirectory() as tmp:
        hub = HubProcess(url, Path(tmp) / "hub", extra_args=["--pool-size", "20"])
        hub.start()
        cluster: Cluster | None = None
        agent: Agent | None = None
        try:
            fill = fill_hub(fleet, hub)
            progress(NAME, f"hub holds {total} keys from {args.sources} clusters: {fill}")
            tokens = hub.register_all([IMPORTER])
            cluster = Cluster(IMPORTER, Path(tmp) / IMPORTER, history=8 * total + 1000)
            cluster.start(token=tokens[IMPORTER])
            for n in range(NAMESPACES):
                cluster.state.create_namespace(f"ns-{n}")
            stopwatch.attach(IMPORTER, cluster.state)
            fresh = FreshChange(fleet, hub, stopwatch)

            # -- 1. cold start on an empty cluster ------------------------------------------
            agent = Agent(cluster, hub.url, workers=args.workers)
            others_cpu = cpu_seconds(hub.pid), cpu_seconds()
            started = time.perf_counter()
            agent.start()
            cold_ready = wait_until(
                agent.ready, what="agent ready", timeout=args.timeout, interval=0.05
            )
            held_at_fresh = stopwatch.held(IMPORTER)
            cold_fresh = fresh.make(timeout=args.timeout)
            wait_until(
                lambda: stopwatch.held(IMPORTER) == want,
                what="everything imported",
                timeout=args.timeout,
                interval=0.25,
            )
            cold = stopwatch.last_growth[IMPORTER] - started
            progress(NAME, f"cold start imported {total} keys in {cold:.1f}s")
            wait_until(
                lambda: agent is not None and repaired(agent, total),
                what="import queues empty after the cold start",
                timeout=args.timeout,
                interval=0.5,
            )
            cold_cpu = cpu_seconds(agent.pid)
            cold_hub_cpu = cpu_seconds(hub.pid) - others_cpu[0]
            cold_emulator_cpu = cpu_seconds() - others_cpu[1]
            cold_peak = peak_rss_bytes(agent.pid)
            cold_writes = import_writes([agent])

            # -- 2. restart: the startup repair, with a fresh change during it -----------------
            agent.stop()
            agent = Agent(cluster, hub.url, workers=args.workers)
            started = time.perf_counter()
            agent.start()
            ready = wait_until(agent.ready, what="agent ready", timeout=args.timeout, interval=0.05)
            ready_rss = rss_bytes(agent.pid)
            repair_fresh = fresh.make(timeout=args.timeout)
            wait_until(
                lambda: agent is not None and repaired(agent, total),
                what="startup repair done",
                timeout=args.timeout,
                interval=0.5,
            )
            repair = time.perf_counter() - started
            repair_cpu = cpu_seconds(agent.pid)
            repair_peak = peak_rss_bytes(agent.pid)
            repair_writes = import_writes([agent])
            held_after_repair = stopwatch.held(IMPORTER)

            # -- 3. idle with full caches ----------------------------------------------------------
            time.sleep(args.idle)
            idle_rss = rss_bytes(agent.pid)
        finally:
            if agent is not None:
                agent.stop()
            if cluster is not None:
                cluster.stop()
            hub.stop()
    peak = max(cold_peak, repair_peak)
    fresh_worst = max(cold_fresh, repair_fresh) * 1000
    met = {
        "rss": mib(peak) < TARGET_RSS_MIB,
        "cold_start": cold < TARGET_COLD_SECONDS,
        "fresh_change": fresh_worst < TARGET_FRESH_MS,
    }
    return {
        "imported_services": total,
        "source_clusters": args.sources,
        "endpoints_per_service": ENDPOINTS,
        "agent_workers": args.workers,
        "hub_fill": fill,
        "cold_start": {
            "seconds_until_ready": round(cold_ready, 2),
            "seconds_until_all_imported": round(cold, 1),
            "held_when_fresh_change_made": held_at_fresh,
            "fresh_change_ms": round(cold_fresh * 1000, 1),
            "agent_cpu_seconds": round(cold_cpu, 1),
            "hub_cpu_seconds": round(cold_hub_cpu, 1),
            "benchmark_and_emulator_cpu_seconds": round(cold_emulator_cpu, 1),
            "agent_peak_rss_mib": mib(cold_peak),
            "import_writes": difference(cold_writes, {}),
            "import_writes_per_key": round(sum(cold_writes.values()) / total, 2),
        },
        "restart_repair": {
            "seconds_until_ready": round(ready, 2),
            "seconds_until_repaired": round(repair, 1),
            "fresh_change_ms": round(repair_fresh * 1000, 1),
            "agent_cpu_seconds": round(repair_cpu, 1),
            "agent_peak_rss_mib": mib(repair_peak),
            "agent_rss_when_ready_mib": mib(ready_rss),
            "import_writes": difference(repair_writes, {}),
            "held_after_repair": held_after_repair,
        },
        "idle": {"seconds": args.idle, "agent_rss_mib": mib(idle_rss)},
        "agent_peak_rss_mib": mib(peak),
        "target": {
            "rss_mib_below": TARGET_RSS_MIB,
            "cold_start_seconds_below": TARGET_COLD_SECONDS,
            "fresh_change_ms_below": TARGET_FRESH_MS,
            "each_met": met,
            "met": all(met.values()),
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=10_000, help="imported keys")
    parser.add_argument(
        "--sources", type=int, default=25, help="clusters exporting them (a sync body is ≤ 1 MiB)"
    )
    parser.add_argument("--workers", type=int, default=4, help="the agent's --workers")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds idle before RSS")
    parser.add_argument("--timeout", type=float, default=900.0, help="bound of every wait")
    args = parser.parse_args()
    if args.smoke:
        args.services, args.sources, args.idle, args.timeout = 20, 2, 0.5, 60.0
    write_result(NAME, args, run(args))


if __name__ == "__main__":
    main()
