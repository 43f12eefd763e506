"""Agent import benchmark (a): one source EndpointSlice change → its mirror written in every
importing cluster, and the Kubernetes writes that costs.

    python -m bench.import_latency [--clusters 10] [--services 200] [--changes 200] [--smoke]

`--clusters` emulated member clusters (threads of this process, `bench.fleet.Cluster`),
one real agent process each, one hub process on a fresh PostgreSQL database. Every
cluster has the same `--services` Services, each with its ServiceExport and one
EndpointSlice of 10 ready endpoints (the benchmark plays the EndpointSlice controller):
every key is exported by every cluster, so every cluster imports every key, with one
mirrored slice per source cluster (its own included, docs/reference.md#import-path).

After the fill (every cluster holds S ServiceImports, S derived Services and S x N
mirrored slices), `--changes` changes are made one at a time: a source slice of a
cluster (round robin) gets its first endpoint moved to a new pod IP, in the emulator;
the next change starts when that address is stored in a managed slice in all clusters.

Per change: from the source slice's update to the mirrored slice stored in the LAST
cluster (the headline), and per (change, cluster). The stopwatch is at the emulators'
stores (`bench.import_clusters.ImportStopwatch`), not the agents' clocks. Beside it, the
agents' own `mcsync_agent_import_lag_milliseconds{kind="EndpointSlice"}` (hub commit →
written; bucket bounds), so the remainder is the source agent's export and the hub.

The slowest changes are listed with their last cluster and the median cluster's time: one
late cluster is that importing agent (or its emulator) held up, all late the source's
export or the hub.

Writes: per (change, cluster) the EndpointSlice write requests the emulator served from
this change's start to the next's (the agents are the only HTTP writers of slices),
and the agents' `mcsync_agent_import_writes_total` over the change phase, by kind.

Targets: p99 < 1 s; exactly 1 EndpointSlice write per importing cluster per
change. The issue's size, 50 clusters x 200 Services, is 50 agent processes and 50
emulators: see docs/benchmarks.md for the size this machine runs.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fleet import (
    EXPORTS,
    Agent,
    Cluster,
    histogram_quantile,
    service_body,
    service_export_body,
    wait_until,
)
from bench.import_clusters import (
    ImportStopwatch,
    difference,
    import_writes,
    lag_histogram,
    moved_address,
    source_slice,
)
from bench.slices import address, progress
from bench.support import (
    HubProcess,
    base_parser,
    cpu_seconds,
    fresh_database_sync,
    mib,
    percentiles,
    rss_bytes,
    write_result,
)

NAME = "import_latency"
TARGET_P99_MS = 1000.0
ENDPOINTS = 10
SETTLE_SECONDS = 2.0  # after the last change, for late writes to be counted
GAP_SECONDS = 0.1  # between one change landing everywhere and the next
SLOWEST = 5  # changes listed with where their time went


def stop_all(agents: list[Agent]) -> None:
    for agent in agents:  # signal every agent first: they stop in parallel
        if agent.process is not None and agent.process.poll() is None:
            agent.process.terminate()
    for agent in agents:
        agent.stop()


def seed(cluster: Cluster, index: int, keys: list[tuple[str, str]]) -> None:
    """Each key's Service, its controller's EndpointSlice and its ServiceExport."""
    state = cluster.state
    for slot, (namespace, name) in enumerate(keys):
        service = state.create("services", namespace, service_body(name, namespace))
        addresses = [address(index, slot, e) for e in range(ENDPOINTS)]
        state.create("endpointslices", namespace, source_slice(service, addresses=addresses))
        state.create(EXPORTS, namespace, service_export_body(name, namespace))


def filled(stopwatch: ImportStopwatch, names: list[str], services: int) -> bool:
    want = {
        "serviceimports": services,
        "services": services,
        "endpointslices": services * len(names),
    }
    return all(stopwatch.held(name) == want for name in names)


def slowest(change: int, source: str, names: list[str], took: list[float]) -> dict[str, Any]:
    """Where one change's time went: its last cluster, and how far behind the others it
    was. One late cluster is that agent (or its emulator) held up; all of them late is
    the source agent's export or the hub."""
    order = sorted(range(len(took)), key=lambda i: took[i])
    return {
        "change": change,
        "source": source,
        "last_cluster": names[order[-1]],
        "last_ms": round(took[order[-1]] * 1000, 1),
        "second_last_ms": round(took[order[-2]] * 1000, 1) if len(took) > 1 else None,
        "median_cluster_ms": round(took[order[len(order) // 2]] * 1000, 1),
    }


def run(args: Any) -> dict[str, Any]:
    names = [f"member-{i}" for i in range(args.clusters)]
    keys = [(f"ns-{k % 10}", f"svc-{k}") for k in range(args.services)]
    stopwatch = ImportStopwatch()
    clusters: list[Cluster] = []
    agents: list[Agent] = []
    rng = random.Random(15)
    with fresh_database_sync(args.backend) as url, tempfile.TemporaryDirectory() as tmp:
        hub = HubProcess(url, Path(tmp) / "hub", extra_args=["--pool-size", "20"])
        hub.start()
        try:
            tokens = hub.register_all(names)
            for i, name in enumerate(names):
                cluster = Cluster(name, Path(tmp) / name).start(token=tokens[name])
                clusters.append(cluster)
                stopwatch.attach(name, cluster.state)
                seed(cluster, i, keys)
            progress(NAME, f"seeded {len(names)} clusters x {len(keys)} services")
            started = time.perf_counter()
            agents = [Agent(c, hub.url).start() for c in clusters]
            wait_until(
                lambda: all(a.ready() for a in agents), what="every agent ready",
                timeout=args.timeout,
            )  # fmt: skip
            wait_until(
                lambda: filled(stopwatch, names, len(keys)),
                what="every key imported in every cluster",
                timeout=args.timeout,
                interval=0.5,
            )
            fill = max(stopwatch.last_growth.values()) - started
            progress(NAME, f"filled in {fill:.1f}s; changing")
            # Let the fill's tail (status writes, heartbeats) pass before counting; what
            # the agents spend meanwhile is their idle cost (leases, heartbeats, watches).
            idle_cpu = sum(cpu_seconds(a.pid) for a in agents)
            time.sleep(args.quiet)
            idle_cores = (sum(cpu_seconds(a.pid) for a in agents) - idle_cpu) / args.quiet

            writes_before = import_writes(agents)
            lag_before = lag_histogram(agents, "EndpointSlice")
            cpu_before = {
                "hub": cpu_seconds(hub.pid),
                "agents": sum(cpu_seconds(a.pid) for a in agents),
                "benchmark_and_emulators": cpu_seconds(),
            }
            to_last: list[float] = []
            per_cluster: list[float] = []
            slow: list[dict[str, Any]] = []
            writes_per_cluster: list[int] = []
            missing = 0
            phase_started = time.perf_counter()
            previous = [c.state.writes("endpointslices") for c in clusters]
            for change in range(args.changes):
                if time.perf_counter() - phase_started > args.max_seconds:
                    break
                source = clusters[change % len(clusters)]
                namespace, name = keys[rng.randrange(len(keys))]
                body = source.state.get("endpointslices", namespace, f"{name}-abcde")
                assert body is not None
                moved = moved_address(change)
                body["endpoints"][0]["addresses"] = [moved]
                stopwatch.watch(moved)
                # The request log counts a write once it is answered, a moment after the
                # store's commit the stopwatch saw: let the previous change's writes in.
                time.sleep(GAP_SECONDS)
                now = [c.state.writes("endpointslices") for c in clusters]
                if change:
                    writes_per_cluster.extend(n - p for n, p in zip(now, previous, strict=True))
                previous = now
                sent = time.perf_counter()
                source.state.update("endpointslices", namespace, body)
                try:
                    wait_until(
                        lambda a=moved: stopwatch.landed_in(a, names) is not None,  # type: ignore[misc]
                        what=f"change {change} in every cluster",
                        timeout=args.change_timeout,
                        interval=0.005,
                    )
                except TimeoutError:
                    missing += 1
                    continue
                landed = stopwatch.landed_in(moved, names) or []
                to_last.append(max(landed) - sent)
                per_cluster.extend(t - sent for t in landed)
                slow.append(slowest(change, source.name, names, [t - sent for t in landed]))
            time.sleep(SETTLE_SECONDS)
            now = [c.state.writes("endpointslices") for c in clusters]
            writes_per_cluster.extend(n - p for n, p in zip(now, previous, strict=True))
            changes_made = len(to_last) + missing
            cpu = {
                "hub": cpu_seconds(hub.pid) - cpu_before["hub"],
                "agents": sum(cpu_seconds(a.pid) for a in agents) - cpu_before["agents"],
                "benchmark_and_emulators": cpu_seconds() - cpu_before["benchmark_and_emulators"],
            }
            writes = difference(import_writes(agents), writes_before)
            lag_after = lag_histogram(agents, "EndpointSlice")
            lag = {b: n - lag_before.get(b, 0.0) for b, n in lag_after.items()}
            agent_rss = [rss_bytes(a.pid) for a in agents]
            hub_rss = rss_bytes(hub.pid)
        finally:
            stop_all(agents)
            for cluster in clusters:
                cluster.stop()
            hub.stop()
    outside = percentiles(to_last)
    distribution: dict[str, int] = {}
    for n in writes_per_cluster:
        distribution[str(n)] = distribution.get(str(n), 0) + 1
    slice_writes = sum(v for k, v in writes.items() if k.startswith("EndpointSlice "))
    expected = changes_made * len(names)
    exactly_one = bool(writes_per_cluster) and all(n == 1 for n in writes_per_cluster)
    latency_met = bool(outside.get("p99_ms", 1e9) < TARGET_P99_MS) and missing == 0
    return {
        "clusters": len(names),
        "services": len(keys),
        "endpoints_per_slice": ENDPOINTS,
        "mirrored_slices_per_cluster": len(keys) * len(names),
        "fill_seconds": round(fill, 1),
        "changes": changes_made,
        "changes_not_landed_everywhere": missing,
        "source_change_to_last_cluster": outside,
        "source_change_to_each_cluster": percentiles(per_cluster),
        "slowest_changes": sorted(slow, key=lambda s: -s["last_ms"])[:SLOWEST],
        "agents_import_lag_endpointslice": {
            "p50_ms_upper_bound": histogram_quantile(lag, 0.50),
            "p99_ms_upper_bound": histogram_quantile(lag, 0.99),
            "count": lag.get(float("inf"), 0.0),
        },
        "endpointslice_writes_per_cluster_per_change": distribution,
        "agents_import_writes_during_changes": writes,
        "endpointslice_writes_per_change_per_cluster_mean": round(slice_writes / expected, 3)
        if expected
        else None,
        "cpu_seconds_during_changes": {k: round(v, 1) for k, v in cpu.items()},
        "agents_cpu_seconds_per_change": round(cpu["agents"] / changes_made, 3)
        if changes_made
        else None,
        "agents_idle_cores": round(idle_cores, 2),
        "agent_rss_mib": {
            "mean": mib(sum(agent_rss) // max(1, len(agent_rss))),
            "max": mib(max(agent_rss, default=0)),
        },
        "hub_rss_mib": mib(hub_rss),
        "benchmark_and_emulators_rss_mib": mib(rss_bytes()),
        "target": {
            "p99_ms_below": TARGET_P99_MS,
            "endpointslice_writes_per_cluster_per_change": 1,
            "p99_met": latency_met,
            "writes_met": exactly_one,
            "met": latency_met and exactly_one,
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--services", type=int, default=200, help="per cluster, all shared")
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="bound of the changes")
    parser.add_argument("--change-timeout", type=float, default=30.0, help="per change")
    parser.add_argument("--quiet", type=float, default=5.0, help="pause after the fill")
    parser.add_argument("--timeout", type=float, default=900.0, help="bound of every wait")
    args = parser.parse_args()
    if args.smoke:
        args.clusters, args.services, args.changes = 2, 4, 5
        args.quiet, args.timeout, args.change_timeout = 1.0, 60.0, 15.0
    write_result(NAME, args, run(args))


if __name__ == "__main__":
    main()
