"""Benchmark 9: fan-out — one slice change reaching 1,000 import-feed watchers.

    python -m bench.import_fanout [--watchers 1000] [--changes 50] [--smoke]

`--watchers` clusters are registered, each exporting one Service with one slice of 10
endpoints (`bench.slices.Fleet`, through the sync API), and each opens its import-feed
watch (`GET /api/v1/clusters/{c}/imports?watch=true`), one streaming HTTP connection per
cluster on loopback (aiohttp in this process, as `bench.scale`'s watchers). Then
`--changes` slice changes are sent one at a time: a PUT moving a pod IP, then a wait until
every watcher has that revision (bounded), then the next.

Per change: the time from the PUT's answer until the LAST watcher had the event (the
headline; a delivery that beats the answer counts 0), the same from the moment the PUT
was sent, and per (change, watcher) delivery. The hub's RSS before the watches open,
with them open, and its peak; its CPU per event (user + system from /proc/<pid>/stat
over the change phase, divided by the changes: each is one event fanned out to every
watcher), and per delivery. The watchers' own CPU (this process) is reported beside it:
every arrival is stamped as its line is read, and the client reads 1,000 sockets on one
core, so part of the last watcher's delay is the client's own queue.

Target: p99 for one change to reach every watcher < 1 s.
"""

from __future__ import annotations

import asyncio
import random
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.slices import (
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
    rss_bytes,
    write_result,
)

NAME = "import_fanout"
TARGET_SECONDS = 1.0
WAIT_PER_CHANGE = 15.0  # bound of the wait for every watcher to have one change
PAUSE = 0.2  # between changes, so each is measured alone


def raise_open_files(wanted: int) -> None:
    """One socket per watcher: raise the soft limit of open files toward the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))


async def run(args: Any) -> dict[str, Any]:
    raise_open_files(args.watchers + 512)
    fleet = Fleet(clusters=args.watchers, services=1, endpoints=10)
    rng = random.Random(9)
    async with fresh_database(args.backend) as url:
        with tempfile.TemporaryDirectory(prefix="mcsync-bench-") as tmp:
            hub = HubProcess(url, Path(tmp), extra_args=["--pool-size", "20"])
            with hub:
                async with watch_session() as session:
                    filled = await fleet.fill(hub, session, concurrency=8)
                    progress(NAME, f"filled: {filled}")
                    rss_before = rss_bytes(hub.pid)
                    watchers = [ImportWatcher(n, fleet.tokens[n]) for n in fleet.names]
                    t0 = time.perf_counter()
                    tasks = await open_watchers(watchers, hub.url, seconds=300)
                    opened_seconds = time.perf_counter() - t0
                    progress(NAME, f"{len(watchers)} watches open in {opened_seconds:.1f}s")
                    try:
                        await asyncio.sleep(2.0)
                        rss_open = rss_bytes(hub.pid)
                        load_average = machine()["load_average"]
                        reach_all: list[float] = []
                        sent_to_all: list[float] = []
                        deliveries: list[float] = []
                        early = incomplete = 0
                        cpu0, client0 = cpu_seconds(hub.pid), cpu_seconds()
                        current: dict[int, dict[str, Any]] = {}
                        for change in range(args.changes):
                            cluster = rng.randrange(fleet.clusters)
                            body = moved(current.get(cluster) or fleet.slice(cluster, 0), change)
                            current[cluster] = body
                            meta = body["metadata"]
                            path = (
                                f"/api/v1/clusters/{cluster_name(cluster)}/endpointslices/"
                                f"{meta['namespace']}/{meta['name']}"
                            )
                            sent = time.perf_counter()
                            async with session.put(
                                hub.url + path, json=body, headers=fleet.headers(cluster)
                            ) as answer:
                                payload = await answer.json(content_type=None)
                                answered = time.perf_counter()
                            if answer.status != 200:
                                raise RuntimeError(f"PUT {path}: {answer.status} {payload}")
                            rv = int(payload["metadata"]["resourceVersion"])
                            await all_reached(watchers, rv, seconds=WAIT_PER_CHANGE)
                            arrivals = [w.arrivals.get(rv) for w in watchers]
                            got = [a for a in arrivals if a is not None]
                            early += sum(1 for a in got if a < answered)
                            deliveries.extend(max(0.0, a - answered) for a in got)
                            if len(got) == len(watchers):
                                reach_all.append(max(0.0, max(got) - answered))
                                sent_to_all.append(max(got) - sent)
                            else:
                                incomplete += 1
                            await asyncio.sleep(PAUSE)
                        hub_cpu = cpu_seconds(hub.pid) - cpu0
                        client_cpu = cpu_seconds() - client0
                        rss_after = rss_bytes(hub.pid)
                        broken = [w.error for w in watchers if w.error]
                    finally:
                        await close_watchers(tasks)
                hub_peak = peak_rss_bytes(hub.pid)
    summary = percentiles(reach_all)
    p99 = summary.get("p99_ms")
    per_event = hub_cpu / args.changes if args.changes else None
    return {
        "watchers": len(watchers),
        "changes": args.changes,
        "fill": filled,
        "watches_opened_seconds": round(opened_seconds, 1),
        "load_average": load_average,
        "answer_to_last_watcher": summary,
        "answer_to_each_watcher": percentiles(deliveries),
        "put_sent_to_last_watcher": percentiles(sent_to_all),
        "events_before_answer": early,
        "changes_not_reaching_all": incomplete,
        "watch_errors": broken[:3],
        "hub_rss_mib_before_watches": mib(rss_before),
        "hub_rss_mib_watches_open": mib(rss_open),
        "hub_rss_mib_after_changes": mib(rss_after),
        "hub_rss_kib_per_watch": round((rss_open - rss_before) / 1024 / len(watchers), 1),
        "hub_peak_rss_mib": mib(hub_peak),
        "hub_cpu_ms_per_event": round(per_event * 1000, 2) if per_event is not None else None,
        "hub_cpu_us_per_delivery": round(per_event / len(watchers) * 1e6, 1)
        if per_event is not None
        else None,
        "client_cpu_ms_per_event": round(client_cpu / args.changes * 1000, 2)
        if args.changes
        else None,
        "target": {
            "p99_to_all_seconds_below": TARGET_SECONDS,
            "met": p99 is not None and incomplete == 0 and p99 < TARGET_SECONDS * 1000,
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=50)
    args = parser.parse_args()
    if args.backend != "postgresql":
        parser.error("import_fanout runs on PostgreSQL (the issue's setting)")
    if args.smoke:
        args.watchers, args.changes = 20, 5
    write_result(NAME, args, asyncio.run(run(args)))


if __name__ == "__main__":
    main()
