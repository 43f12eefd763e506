"""Benchmark 7: endpoint churn — slice changes at a fixed rate, seen on every cluster's feed.

    python -m bench.endpoint_churn [--clusters 50] [--services 200] [--endpoints 10]
                                   [--rate 100] [--seconds 30] [--smoke]

The fleet (`bench.slices.Fleet`) is filled through the API first: every cluster exports
its Services and sends one slice of `--endpoints` endpoints per Service. Then every
cluster opens its import-feed watch (`GET /api/v1/clusters/{c}/imports?watch=true`, one
streaming HTTP client each, as its agent would), and slice changes are sent at `--rate`
per second fleet-wide for `--seconds` (open loop: change i is sent at t0 + i/rate
whatever the answers of the ones before, so a slow hub builds a queue instead of slowing
the load): each a PUT of one random cluster's random slice with a pod IP moved.

Latency: from the moment the PUT's answer arrived (its body names the change's revision)
to the moment that revision's event arrived on each watcher, for every (change, watcher)
pair. The hub may send an event before its PUT's answer reaches the client; those pairs
count as 0 and are reported (`before_answer`). Also the PUT's own latency, the achieved
rate, and the hub's CPU per change (user + system from /proc/<pid>/stat over the churn,
including the fan-out to every watcher). The watchers and the load generator share one
process, and the machine's two cores with the hub: the load average is in the JSON.

Target: p99 from the PUT's answer to the event on all watchers < 250 ms.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.slices import (
    DatabaseWaits,
    Fleet,
    ImportWatcher,
    all_reached,
    close_watchers,
    cluster_name,
    moved,
    open_watchers,
    progress,
    watch_session,
)
from bench.support import (
    HubProcess,
    base_parser,
    cpu_seconds,
    fresh_database,
    machine,
    mib,
    peak_rss_bytes,
    percentiles,
    write_result,
)

NAME = "endpoint_churn"
TARGET_P99_MS = 250.0
DRAIN_SECONDS = 10.0  # how long events may still arrive after the last answer


async def churn(
    fleet: Fleet,
    hub: HubProcess,
    session: aiohttp.ClientSession,
    *,
    rate: float,
    seconds: float,
) -> tuple[list[tuple[int, float, float]], int]:
    """Send slice changes at `rate`/s for `seconds`; answers (revision, sent, answered) of
    each change that succeeded, and the count of failures."""
    rng = random.Random(14)
    total = int(rate * seconds)
    done: list[tuple[int, float, float]] = []
    failures = 0
    changes = 0
    current: dict[tuple[int, int], dict[str, Any]] = {}

    async def change(index: int) -> None:
        nonlocal failures, changes
        cluster, slot = rng.randrange(fleet.clusters), rng.randrange(fleet.services)
        body = moved(current.get((cluster, slot)) or fleet.slice(cluster, slot), changes)
        changes += 1
        current[cluster, slot] = body
        meta = body["metadata"]
        url = (
            f"{hub.url}/api/v1/clusters/{cluster_name(cluster)}/endpointslices/"
            f"{meta['namespace']}/{meta['name']}"
        )
        sent = time.perf_counter()
        try:
            async with session.put(url, json=body, headers=fleet.headers(cluster)) as answer:
                payload = await answer.json(content_type=None)
                answered = time.perf_counter()
                if answer.status != 200:
                    raise RuntimeError(f"{answer.status}: {payload}")
            done.append((int(payload["metadata"]["resourceVersion"]), sent, answered))
        except (aiohttp.ClientError, RuntimeError, KeyError, ValueError) as exc:
            failures += 1
            if failures <= 3:
                progress(NAME, f"change {index} failed: {exc!r}")

    started = time.perf_counter()
    tasks: list[asyncio.Task[None]] = []
    for index in range(total):
        delay = started + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(change(index)))
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=seconds + 60)
    return done, failures


def deliveries(
    changes: list[tuple[int, float, float]], watchers: list[ImportWatcher]
) -> tuple[list[float], int, int, list[float]]:
    """Per (change, watcher): seconds from the answer to the arrival (0 when it came first);
    the count that came first, the count that never came, and per change the time until
    the last watcher had it."""
    latencies: list[float] = []
    early = missing = 0
    reach_all: list[float] = []
    for rv, _sent, answered in changes:
        last = 0.0
        complete = True
        for w in watchers:
            at = w.arrivals.get(rv)
            if at is None:
                missing += 1
                complete = False
                continue
            delay = at - answered
            if delay < 0:
                early += 1
                delay = 0.0
            latencies.append(delay)
            last = max(last, delay)
        if complete:
            reach_all.append(last)
    return latencies, early, missing, reach_all


async def run(args: Any) -> dict[str, Any]:
    fleet = Fleet(clusters=args.clusters, services=args.services, endpoints=args.endpoints)
    async with fresh_database(args.backend) as url:
        with tempfile.TemporaryDirectory(prefix="mcsync-bench-") as tmp:
            hub = HubProcess(url, Path(tmp), extra_args=["--pool-size", "20"])
            with hub:
                async with watch_session() as session:
                    filled = await fleet.fill(hub, session)
                    progress(NAME, f"filled: {filled}")
                    watchers = [ImportWatcher(n, fleet.tokens[n]) for n in fleet.names]
                    tasks = await open_watchers(watchers, hub.url, seconds=120)
                    progress(NAME, f"{len(watchers)} watches open; churning")
                    try:
                        await asyncio.sleep(1.0)  # let the watches settle
                        load_before = machine()["load_average"]
                        waits = DatabaseWaits(url)
                        waits.start()
                        cpu0, t0 = cpu_seconds(hub.pid), time.perf_counter()
                        changes, failures = await churn(
                            fleet, hub, session, rate=args.rate, seconds=args.seconds
                        )
                        churn_seconds = time.perf_counter() - t0
                        hub_cpu = cpu_seconds(hub.pid) - cpu0
                        database_waits = await waits.stop()
                        newest = max((rv for rv, _, _ in changes), default=0)
                        await all_reached(watchers, newest, seconds=DRAIN_SECONDS)
                        broken = [w.error for w in watchers if w.error]
                    finally:
                        await close_watchers(tasks)
                hub_peak = peak_rss_bytes(hub.pid)
    latencies, early, missing, reach_all = deliveries(changes, watchers)
    put_latency = percentiles([answered - sent for _, sent, answered in changes])
    by_rv = {rv: sent for rv, sent, _ in changes}
    sent_to_event = [
        at - by_rv[rv] for w in watchers for rv, at in w.arrivals.items() if rv in by_rv
    ]
    summary = percentiles(latencies)
    p99 = summary.get("p99_ms")
    return {
        "clusters": args.clusters,
        "services_per_cluster": args.services,
        "endpoints_per_slice": args.endpoints,
        "slices_stored": args.clusters * args.services,
        "service_keys": fleet.keys,
        "fill": filled,
        "rate_asked_per_second": args.rate,
        "changes": len(changes),
        "change_failures": failures,
        "churn_seconds_until_last_answer": round(churn_seconds, 1),
        "rate_achieved_per_second": round(len(changes) / churn_seconds, 1),
        "load_average_at_start": load_before,
        "watchers": len(watchers),
        "watch_errors": broken[:3],
        "put_latency": put_latency,
        "answer_to_event": summary,
        "answer_to_event_reaches_all": percentiles(reach_all),
        "put_sent_to_event": percentiles(sent_to_event),
        "events_before_answer": early,
        "events_missing": missing,
        "hub_cpu_seconds": round(hub_cpu, 2),
        "hub_cpu_ms_per_change": round(hub_cpu / len(changes) * 1000, 2) if changes else None,
        "hub_cpu_share_of_one_core": round(hub_cpu / churn_seconds, 2),
        "hub_peak_rss_mib": mib(hub_peak),
        "database_sessions_during_churn": database_waits,
        "target": {
            "p99_answer_to_event_ms_below": TARGET_P99_MS,
            "met": p99 is not None and missing == 0 and p99 < TARGET_P99_MS,
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--services", type=int, default=200, help="exports per cluster")
    parser.add_argument("--endpoints", type=int, default=10, help="per slice")
    parser.add_argument("--rate", type=float, default=100.0, help="slice changes per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to churn")
    args = parser.parse_args()
    if args.backend != "postgresql":
        parser.error("endpoint_churn runs on PostgreSQL (the issue's setting)")
    if args.smoke:
        args.clusters, args.services, args.endpoints, args.rate, args.seconds = 5, 10, 3, 20, 3
    write_result(NAME, args, asyncio.run(run(args)))


if __name__ == "__main__":
    main()
