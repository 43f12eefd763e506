"""Benchmark 6: one agent with 10,000 Services + ServiceExports — RSS, CPU, startup repair.

    python -m bench.agent_scale [--services 10000] [--smoke]

One emulated cluster (a thread of this process) holds `--services` Services, each with its
ServiceExport; one real agent process (`python -m member`), one hub process.

1. cold start: the agent starts on a cluster the hub knows nothing of. Timed until every
   ServiceExport carries a Conflict condition (stored in the emulator) and the agent's
   queue is empty; the agent's CPU seconds and peak RSS over that phase.
2. restart: the agent is stopped and started again; the startup repair compares the
   hub's set with the cluster's (docs/reference.md#export-path). Timed until ready and the queue is
   empty after at least one reconcile per key. During that repair one fresh ServiceExport is
   created, and the time until its Conflict condition is written is taken: the reference says
   a repair of 10,000 exports must not delay a fresh change by more than a few seconds.
   The agent's RSS is also taken when it turns ready: every cache full after its initial
   list, before the repair's reconciles.
3. idle: RSS after the repair, with 10,000 objects of each kind in the informer caches.

Target (issue): agent RSS under 150 MB.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fleet import (
    EXPORTS,
    Agent,
    Cluster,
    ConditionStopwatch,
    service_body,
    service_export_body,
    wait_until,
)
from bench.support import (
    HubProcess,
    base_parser,
    cpu_seconds,
    fresh_database_sync,
    mib,
    peak_rss_bytes,
    percentiles,
    rss_bytes,
    write_result,
)

NAME = "agent_scale"
TARGET_RSS_MIB = 150.0
CLUSTER = "member-big"


def run(args: Any) -> dict[str, Any]:
    keys = [(f"team-{j % 20}", f"svc-{j}") for j in range(args.services)]
    stopwatch = ConditionStopwatch()
    with fresh_database_sync(args.backend) as url, tempfile.TemporaryDirectory() as tmp:
        hub = HubProcess(url, Path(tmp) / "hub")
        hub.start()
        cluster: Cluster | None = None
        agent: Agent | None = None
        try:
            tokens = hub.register_all([CLUSTER])
            cluster = Cluster(CLUSTER, Path(tmp) / CLUSTER, history=8 * args.services + 1000)
            cluster.start(token=tokens[CLUSTER])
            stopwatch.attach(CLUSTER, cluster.state)
            seeded = time.perf_counter()
            for namespace, name in keys:
                cluster.state.create("services", namespace, service_body(name, namespace))
                cluster.state.create(EXPORTS, namespace, service_export_body(name, namespace))
            seed_seconds = time.perf_counter() - seeded

            # -- 1. cold start: everything is new to the hub ---------------------------------
            agent = Agent(cluster, hub.url, workers=args.workers)
            for namespace, name in keys:
                stopwatch.mark_created(CLUSTER, namespace, name)
            agent.start()
            cold = wait_until(
                lambda: (
                    stopwatch.pending() == 0
                    and agent is not None
                    and agent.settled(reconciles=len(keys))
                ),
                what="every export judged and written back",
                timeout=args.timeout,
                interval=0.5,
            )
            cold_cpu = cpu_seconds(agent.pid)
            cold_peak = peak_rss_bytes(agent.pid)
            verdicts = percentiles(stopwatch.durations())

            # -- 2. restart: the startup repair, with one fresh change during it ----------------
            agent.stop()
            agent = Agent(cluster, hub.url, workers=args.workers)
            started = time.perf_counter()
            agent.start()
            ready = wait_until(agent.ready, what="agent ready", timeout=args.timeout, interval=0.05)
            # Every cache full, the repair not yet run: the initial lists' own footprint.
            ready_rss = rss_bytes(agent.pid)
            fresh_ns, fresh_name = "team-fresh", "svc-fresh"
            cluster.state.create("services", fresh_ns, service_body(fresh_name, fresh_ns))
            stopwatch.mark_created(CLUSTER, fresh_ns, fresh_name)
            cluster.state.create(EXPORTS, fresh_ns, service_export_body(fresh_name, fresh_ns))
            wait_until(
                lambda: stopwatch.pending() == 0,
                what="the fresh export's verdict",
                timeout=args.timeout,
                interval=0.02,
            )
            fresh = (
                stopwatch.written[CLUSTER, fresh_ns, fresh_name]
                - stopwatch.created[CLUSTER, fresh_ns, fresh_name]
            )
            wait_until(
                lambda: agent is not None and agent.settled(reconciles=len(keys)),
                what="startup repair done",
                timeout=args.timeout,
                interval=0.5,
            )
            repair = time.perf_counter() - started
            repair_cpu = cpu_seconds(agent.pid)
            repair_peak = peak_rss_bytes(agent.pid)

            # -- 3. idle with full caches ----------------------------------------------------------
            time.sleep(args.idle)
            idle_rss = rss_bytes(agent.pid)
            idle_cpu = cpu_seconds(agent.pid) - repair_cpu
        finally:
            if agent is not None:
                agent.stop()
            if cluster is not None:
                cluster.stop()
            hub.stop()
    peak = max(cold_peak, repair_peak)
    return {
        "services": args.services,
        "agent_workers": args.workers,
        "seed_seconds": round(seed_seconds, 1),
        "cold_start": {
            "seconds_until_all_written_back": round(cold, 1),
            "verdict_since_agent_start": verdicts,
            "agent_cpu_seconds": round(cold_cpu, 1),
            "agent_peak_rss_mib": mib(cold_peak),
        },
        "restart_repair": {
            "seconds_until_ready": round(ready, 2),
            "seconds_until_repaired": round(repair, 1),
            "agent_cpu_seconds": round(repair_cpu, 1),
            "agent_peak_rss_mib": mib(repair_peak),
            "agent_rss_when_ready_mib": mib(ready_rss),
            "fresh_change_during_repair_ms": round(fresh * 1000, 1),
        },
        "idle": {
            "seconds": args.idle,
            "agent_rss_mib": mib(idle_rss),
            "agent_cpu_seconds": round(idle_cpu, 2),
        },
        "agent_peak_rss_mib": mib(peak),
        "target": {"rss_mib_below": TARGET_RSS_MIB, "met": mib(peak) < TARGET_RSS_MIB},
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=4, help="the agent's --workers")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds idle before RSS")
    parser.add_argument("--timeout", type=float, default=900.0, help="bound of every wait")
    args = parser.parse_args()
    if args.smoke:
        args.services, args.idle, args.timeout = 20, 0.5, 90.0
    write_result(NAME, args, run(args))


if __name__ == "__main__":
    main()
