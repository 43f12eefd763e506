"""Benchmark 5: 1,000 clusters of 100 exports through the sync API, with a live watch each.

    python -m bench.scale [--clusters 1000] [--exports 100] [--concurrency 16] [--smoke]

Every cluster is registered and opens its watch (`?watch=true`) first, as its agent
would; then every cluster PUTs its full state (`PUT …/serviceexports`), `--concurrency`
at a time. Each cluster exports `--exports` of K = clusters x exports / 5 service keys,
so a key is exported by about five clusters; every tenth cluster exposes another port,
so a good share of keys conflict and verdicts change while the fleet fills.

Convergence time: from the first sync until every watch has received its cluster's last
change (its newest resourceVersion once every sync has answered, read by listing).
Also: the time until every sync answered, the hub's peak RSS (VmHWM), the database size.
The sync throughput ceiling is `bench.sync_throughput`'s; this one is about scale.

Target (issue): convergence under 60 s.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.support import (
    HubProcess,
    base_parser,
    created_at,
    database_size_bytes,
    export_wire,
    fresh_database,
    mib,
    peak_rss_bytes,
    percentiles,
    rss_bytes,
    write_result,
)

NAME = "scale"


def progress(message: str) -> None:
    print(f"[scale] {message}", file=sys.stderr, flush=True)


TARGET_SECONDS = 60.0
SHARING = 5  # clusters per service key
MAX_ATTEMPTS = 30  # per sync, on 503
MAX_RELISTS = 50  # per watcher


async def list_exports(
    session: aiohttp.ClientSession, url: str, token: str, hub: HubProcess
) -> list[dict[str, Any]]:
    """One cluster's exports. A pooled connection the hub closed while it sat idle (a
    long sync phase outlasts uvicorn's keep-alive) is reset on reuse: retry on a new one."""
    for attempt in range(3):
        try:
            async with session.get(url, headers={"Authorization": f"Bearer {token}"}) as answer:
                items: list[dict[str, Any]] = (await answer.json())["items"]
                return items
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
            progress(f"list {url}: {exc!r} (attempt {attempt + 1}); hub log:\n{hub.log_tail(20)}")
    raise RuntimeError(f"list {url}: the hub kept resetting the connection")


class Watcher:
    """One cluster's view of its exports, kept the way an agent keeps it: watch, and on a
    410 (fell behind the hub's retained history) relist and watch on from the list.

    `arrivals` holds (resourceVersion, arrival time) of every event, and of every relist
    (at the list's resourceVersion, which covers every item in it)."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.arrivals: list[tuple[int, float]] = []
        self.events = 0
        self.relists = 0
        self.opened = asyncio.Event()
        self.error: str | None = None

    async def run(self, session: aiohttp.ClientSession, url: str, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        since: str | None = None
        try:
            for _ in range(MAX_RELISTS + 1):
                params = {"watch": "true", "timeoutSeconds": "3600"}
                if since is not None:
                    params["resourceVersion"] = since
                gone = await self._watch(session, url, params, headers)
                if not gone:
                    return
                self.relists += 1
                async with session.get(url, headers=headers) as answer:
                    listed = await answer.json()
                since = listed["metadata"]["resourceVersion"]
                self.arrivals.append((int(since), time.perf_counter()))
            self.error = f"more than {MAX_RELISTS} relists"
        except (aiohttp.ClientError, asyncio.CancelledError) as exc:
            if not isinstance(exc, asyncio.CancelledError):
                self.error = repr(exc)
        finally:
            self.opened.set()

    async def _watch(
        self,
        session: aiohttp.ClientSession,
        url: str,
        params: dict[str, str],
        headers: dict[str, str],
    ) -> bool:
        """Follow one watch stream; True when it ended in 410 Gone (relist)."""
        async with session.get(url, params=params, headers=headers) as answer:
            if answer.status == 410:
                return True
            if answer.status != 200:
                self.error = f"{answer.status}: {await answer.text()}"
                return False
            self.opened.set()
            async for line in answer.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "BOOKMARK":
                    continue
                if event.get("type") == "ERROR":
                    if (event.get("object") or {}).get("code") == 410:
                        return True
                    self.error = f"ERROR event: {event.get('object')}"
                    return False
                rv = int(event["object"]["metadata"]["resourceVersion"])
                self.arrivals.append((rv, time.perf_counter()))
                self.events += 1
        return False

    def reached(self, rv: int) -> float | None:
        for seen, at in self.arrivals:
            if seen >= rv:
                return at
        return None


def cluster_body(index: int, name: str, *, exports: int, keys: int) -> bytes:
    port = 8080 if index % 10 == 9 else 80
    items = []
    for j in range(exports):
        k = (index * exports // SHARING + j) % keys
        items.append(
            export_wire(name, f"ns-{k % 100}", f"svc-{k}", port=port, created=created_at(index))
        )
    return json.dumps(
        {
            "apiVersion": "mcsync.io/v1alpha1",
            "kind": "InternalServiceExportList",
            "metadata": {},
            "items": items,
        }
    ).encode()


async def run(args: Any) -> dict[str, Any]:
    names = [f"member-{i}" for i in range(args.clusters)]
    keys = max(1, args.clusters * args.exports // SHARING)
    async with fresh_database(args.backend) as url:
        with tempfile.TemporaryDirectory(prefix="mcsync-bench-") as tmp:
            hub = HubProcess(url, Path(tmp), extra_args=["--pool-size", "20"])
            with hub:
                started_register = time.perf_counter()
                tokens = await asyncio.to_thread(hub.register_all, names)
                register_seconds = time.perf_counter() - started_register
                progress(f"registered {len(names)} clusters in {register_seconds:.1f}s")
                connector = aiohttp.TCPConnector(limit=0)
                timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
                async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
                    base = f"{hub.url}/api/v1/clusters"
                    watchers = [Watcher(n) for n in names]
                    tasks = [
                        asyncio.create_task(
                            w.run(session, f"{base}/{w.cluster}/serviceexports", tokens[w.cluster])
                        )
                        for w in watchers
                    ]
                    await asyncio.wait_for(
                        asyncio.gather(*(w.opened.wait() for w in watchers)), args.timeout
                    )
                    progress("every watch open")
                    broken = [w for w in watchers if w.error]
                    if broken:
                        raise RuntimeError(f"{len(broken)} watches failed: {broken[0].error}")
                    bodies = [
                        cluster_body(i, n, exports=args.exports, keys=keys)
                        for i, n in enumerate(names)
                    ]
                    gate = asyncio.Semaphore(args.concurrency)
                    sync_latencies: list[float] = []

                    unavailable = 0

                    async def sync(i: int) -> None:
                        # A client retries a 503 after its Retry-After, as the agent does;
                        # the count of 503s is part of the result.
                        nonlocal unavailable
                        headers = {
                            "Authorization": f"Bearer {tokens[names[i]]}",
                            "Content-Type": "application/json",
                        }
                        async with gate:
                            t0 = time.perf_counter()
                            for _ in range(MAX_ATTEMPTS):
                                async with session.put(
                                    f"{base}/{names[i]}/serviceexports",
                                    data=bodies[i],
                                    headers=headers,
                                ) as answer:
                                    text = await answer.text()
                                    retry_after = answer.headers.get("Retry-After", "1")
                                if answer.status == 200:
                                    break
                                if answer.status != 503:
                                    raise RuntimeError(
                                        f"sync {names[i]}: {answer.status} {text}\n"
                                        f"{hub.log_tail(80)}"
                                    )
                                unavailable += 1
                                await asyncio.sleep(min(5.0, float(retry_after)))
                            else:
                                raise RuntimeError(f"sync {names[i]}: 503 {MAX_ATTEMPTS} times")
                            sync_latencies.append(time.perf_counter() - t0)

                    t0 = time.perf_counter()
                    await asyncio.wait_for(
                        asyncio.gather(*(sync(i) for i in range(len(names)))), args.timeout
                    )
                    synced = time.perf_counter() - t0
                    progress(f"every sync answered after {synced:.1f}s")
                    # Every cluster's newest change, now that nothing more will change.
                    targets: dict[str, int] = {}
                    for name in names:
                        items = await list_exports(
                            session, f"{base}/{name}/serviceexports", tokens[name], hub
                        )
                        targets[name] = max(int(x["metadata"]["resourceVersion"]) for x in items)
                    deadline = time.perf_counter() + args.timeout
                    while time.perf_counter() < deadline:
                        if all(w.reached(targets[w.cluster]) is not None for w in watchers):
                            break
                        await asyncio.sleep(0.2)
                    arrivals = [w.reached(targets[w.cluster]) for w in watchers]
                    missing = sum(1 for a in arrivals if a is None)
                    converged = max(a for a in arrivals if a is not None) - t0
                    events = sum(w.events for w in watchers)
                    relists = sum(w.relists for w in watchers)
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                hub_rss = rss_bytes(hub.pid)
                hub_peak = peak_rss_bytes(hub.pid)
            size = await database_size_bytes(url)
    return {
        "clusters": args.clusters,
        "exports_per_cluster": args.exports,
        "exports": args.clusters * args.exports,
        "service_keys": keys,
        "sync_concurrency": args.concurrency,
        "register_seconds": round(register_seconds, 1),
        "all_synced_seconds": round(synced, 1),
        "convergence_seconds": round(converged, 1),
        "watches_not_converged": missing,
        "watch_events": events,
        "sync_503_answers": unavailable,
        "watch_relists_after_410": relists,
        "sync_latency": percentiles(sync_latencies),
        "exports_per_second": round(args.clusters * args.exports / synced, 1),
        "hub_rss_mib": mib(hub_rss),
        "hub_peak_rss_mib": mib(hub_peak),
        "database_mib": mib(size),
        "target": {
            "convergence_seconds_below": TARGET_SECONDS,
            "met": missing == 0 and converged < TARGET_SECONDS,
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--exports", type=int, default=100, help="per cluster")
    parser.add_argument("--concurrency", type=int, default=16, help="syncs at once")
    parser.add_argument("--timeout", type=float, default=1200.0, help="bound of every wait")
    args = parser.parse_args()
    if args.smoke:
        args.clusters, args.exports, args.concurrency, args.timeout = 6, 10, 3, 60.0
    write_result(NAME, args, asyncio.run(run(args)))


if __name__ == "__main__":
    main()
