"""What the endpoint benchmarks share: a fleet exporting Services and their EndpointSlices,
slice bodies as an agent sends them, and import-feed watchers with a stopwatch.

* `Fleet` registers clusters on a `HubProcess` and fills it through the real API, the way
  agents would after a start: each cluster's full state of exports (`PUT
  …/serviceexports`), then of slices (`PUT …/endpointslices`), a few clusters at a time.
  Cluster i exports `services` of K = clusters x services / SHARING service keys (as in
  `bench.scale`), so each key is exported by about SHARING clusters, and sends one slice
  of `endpoints` endpoints per exported Service.
* `slice_wire` is one EndpointSliceExport body; `moved` gives the same slice with its
  first endpoint's address changed (a pod rescheduled), so every change is a real change
  and takes a revision.
* `ImportWatcher` holds one `GET /api/v1/clusters/{c}/imports?watch=true` stream open on
  a raw socket and records when each resourceVersion arrived, stamped as the bytes are
  handed over, before they are parsed (why raw: its class docstring).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from bench.support import HubProcess, created_at, export_wire

SHARING = 5  # clusters per service key, as in bench.scale
SLICE_PORTS = [{"name": "http", "protocol": "TCP", "port": 8080}]  # serves the export's `http`
MAX_ATTEMPTS = 30  # per sync, on 503


def progress(name: str, message: str) -> None:
    print(f"[{name}] {message}", file=sys.stderr, flush=True)


def cluster_name(index: int) -> str:
    return f"member-{index}"


def slice_name(service: str) -> str:
    return f"{service}-abcde"


def address(cluster: int, service: int, endpoint: int) -> str:
    """A pod IP unique per (cluster, service slot, endpoint) for up to 250 clusters."""
    return f"10.{cluster % 250}.{service % 250}.{endpoint + 1}"


def slice_wire(
    namespace: str,
    service: str,
    *,
    addresses: Sequence[str],
    name: str | None = None,
    source_resource_version: str = "1",
) -> dict[str, Any]:
    """An EndpointSliceExport as an agent sends it: one ready endpoint per address."""
    return {
        "apiVersion": "mcsync.io/v1alpha1",
        "kind": "EndpointSliceExport",
        "metadata": {"name": name or slice_name(service), "namespace": namespace},
        "spec": {
            "serviceName": service,
            "addressType": "IPv4",
            "ports": SLICE_PORTS,
            "endpoints": [
                {
                    "addresses": [a],
                    "conditions": {"ready": True, "serving": True, "terminating": False},
                    "hostname": f"pod-{i}",
                    "zone": f"zone-{i % 3}",
                }
                for i, a in enumerate(addresses)
            ],
            "sourceResourceVersion": source_resource_version,
        },
    }


def moved(body: dict[str, Any], change: int) -> dict[str, Any]:
    """`body` with its first endpoint moved to a new pod IP (unique per `change`)."""
    spec = body["spec"]
    endpoints = [dict(e) for e in spec["endpoints"]]
    endpoints[0]["addresses"] = [f"10.251.{(change // 250) % 250}.{change % 250 + 1}"]
    return {
        **body,
        "spec": {**spec, "endpoints": endpoints, "sourceResourceVersion": str(change + 2)},
    }


@dataclass
class Fleet:
    """`clusters` clusters, each exporting `services` Services with one slice each."""

    clusters: int
    services: int
    endpoints: int
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def keys(self) -> int:
        return max(1, self.clusters * self.services // SHARING)

    @property
    def names(self) -> list[str]:
        return [cluster_name(i) for i in range(self.clusters)]

    def key(self, cluster: int, slot: int) -> tuple[str, str]:
        """(namespace, Service) of cluster `cluster`'s `slot`-th export."""
        k = (cluster * self.services // SHARING + slot) % self.keys
        return f"ns-{k % 100}", f"svc-{k}"

    def exports_body(self, cluster: int) -> bytes:
        name = cluster_name(cluster)
        items = [
            export_wire(name, ns, svc, created=created_at(cluster))
            for ns, svc in (self.key(cluster, j) for j in range(self.services))
        ]
        return _list_body("InternalServiceExportList", items)

    def slice(self, cluster: int, slot: int) -> dict[str, Any]:
        ns, svc = self.key(cluster, slot)
        return slice_wire(
            ns, svc, addresses=[address(cluster, slot, e) for e in range(self.endpoints)]
        )

    def slices_body(self, cluster: int) -> bytes:
        items = [self.slice(cluster, j) for j in range(self.services)]
        return _list_body("EndpointSliceExportList", items)

    def headers(self, cluster: int) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.tokens[cluster_name(cluster)]}",
            "Content-Type": "application/json",
        }

    async def fill(
        self,
        hub: HubProcess,
        session: aiohttp.ClientSession,
        *,
        concurrency: int = 4,
        slices: bool = True,
    ) -> dict[str, float]:
        """Register every cluster, then sync its exports and (unless `slices` is False) its
        slices; answers the seconds each step took."""
        t0 = time.perf_counter()
        self.tokens = await asyncio.to_thread(hub.register_all, self.names)
        registered = time.perf_counter() - t0
        gate = asyncio.Semaphore(concurrency)
        base = f"{hub.url}/api/v1/clusters"

        async def sync(cluster: int, what: str, body: bytes) -> None:
            url = f"{base}/{cluster_name(cluster)}/{what}"
            async with gate:
                for _ in range(MAX_ATTEMPTS):
                    async with session.put(url, data=body, headers=self.headers(cluster)) as a:
                        text = await a.text()
                        retry_after = float(a.headers.get("Retry-After", "1"))
                    if a.status == 200:
                        return
                    if a.status != 503:
                        raise RuntimeError(f"sync {url}: {a.status} {text[:500]}")
                    await asyncio.sleep(min(5.0, retry_after))
                raise RuntimeError(f"sync {url}: 503 {MAX_ATTEMPTS} times")

        if self.services:
            t1 = time.perf_counter()
            await asyncio.gather(
                *(sync(i, "serviceexports", self.exports_body(i)) for i in range(self.clusters))
            )
            t2 = time.perf_counter()
            if slices:
                await asyncio.gather(
                    *(sync(i, "endpointslices", self.slices_body(i)) for i in range(self.clusters))
                )
            t3 = time.perf_counter()
        else:
            t1 = t2 = t3 = time.perf_counter()
        return {
            "register_seconds": round(registered, 1),
            "exports_sync_seconds": round(t2 - t1, 1),
            "slices_sync_seconds": round(t3 - t2, 1),
        }


def _list_body(kind: str, items: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {"apiVersion": "mcsync.io/v1alpha1", "kind": kind, "metadata": {}, "items": items}
    ).encode()


_RESOURCE_VERSION = re.compile(rb'"resourceVersion":\s*"(\d+)"')
_TYPE = re.compile(rb'"type":\s*"([A-Z]+)"')


class ImportWatcher(asyncio.Protocol):
    """One cluster's import-feed watch on a raw loopback socket, recording
    (resourceVersion → arrival time).

    A plain `asyncio.Protocol`, not an HTTP client library: a thousand of these share one
    core with the load generator, and an arrival is stamped when its bytes are handed
    over, before any parsing; what is parsed is only the event's type and
    resourceVersion, by pattern (one event per line, its metadata's resourceVersion the
    only key of that exact name; the chunked framing's size lines match neither pattern).
    Opened without a resourceVersion (the hub starts it at its current revision), as an
    agent that just listed would; `opened` is set once the hub answered 200.
    """

    def __init__(self, cluster: str, token: str) -> None:
        self.cluster = cluster
        self.token = token
        self.arrivals: dict[int, float] = {}
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self.events = 0
        self.opened = asyncio.Event()
        self.error: str | None = None
        self._head: bytes | None = b""  # None once the response head was read
        self._buffer = b""
        self._closed: asyncio.Future[None] | None = None
        self._transport: asyncio.Transport | None = None

    async def run(self, base_url: str) -> None:
        """Hold the watch open until it ends or this task is cancelled."""
        loop = asyncio.get_running_loop()
        parts = urlsplit(base_url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        self._closed = loop.create_future()
        try:
            transport, _ = await loop.create_connection(lambda: self, host, port)
            request = (
                f"GET /api/v1/clusters/{self.cluster}/imports?watch=true&timeoutSeconds=3600 "
                f"HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {self.token}\r\n"
                "Accept: application/x-ndjson\r\n\r\n"
            )
            transport.write(request.encode())
            await asyncio.shield(self._closed)
        except OSError as exc:
            self.error = repr(exc)
        finally:
            if self._transport is not None:
                self._transport.close()
            self.opened.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.error is None and self._head is not None:
            self.error = f"connection closed before an answer: {exc!r}"
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if self._head is not None:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self._head[:end], self._head[end + 4 :]
            self._head = None
            status = head.split(b"\r\n", 1)[0]
            if b" 200 " not in status + b" ":
                self.error = f"{status.decode(errors='replace')}: {data[:300]!r}"
                assert self._transport is not None
                self._transport.close()
                return
            self.opened.set()
        lines = (self._buffer + data).split(b"\n")
        self._buffer = lines.pop()
        for line in lines:
            kind = _TYPE.search(line)
            if kind is None or kind.group(1) == b"BOOKMARK":
                continue
            if kind.group(1) == b"ERROR":
                self.error = f"ERROR event: {line[:300]!r}"
                continue
            found = _RESOURCE_VERSION.search(line)
            if found is None:
                continue
            rv = int(found.group(1))
            self.arrivals.setdefault(rv, now)
            self.events += 1
            waiter = self._waiting.pop(rv, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def reached(self, rv: int) -> None:
        """Return once revision `rv` has arrived."""
        if rv in self.arrivals:
            return
        waiter = self._waiting.get(rv)
        if waiter is None:
            waiter = self._waiting[rv] = asyncio.get_running_loop().create_future()
        await asyncio.shield(waiter)


async def all_reached(watchers: Sequence[ImportWatcher], rv: int, *, seconds: float) -> bool:
    """Wait (at most `seconds`) until every watcher has revision `rv`; answers whether
    they all have."""
    try:
        async with asyncio.timeout(seconds):
            await asyncio.gather(*(w.reached(rv) for w in watchers))
    except TimeoutError:
        return False
    return True


async def open_watchers(
    watchers: Sequence[ImportWatcher],
    base_url: str,
    *,
    seconds: float,
) -> list[asyncio.Task[None]]:
    """Start every watcher; answers their tasks once each is open (or failed: raises)."""
    tasks = [asyncio.create_task(w.run(base_url)) for w in watchers]
    await asyncio.wait_for(asyncio.gather(*(w.opened.wait() for w in watchers)), seconds)
    broken = [w for w in watchers if w.error]
    if broken:
        await close_watchers(tasks)
        raise RuntimeError(f"{len(broken)} watches failed: {broken[0].error}")
    return tasks


async def close_watchers(tasks: Sequence[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def watch_session() -> aiohttp.ClientSession:
    """A session for many long streams: no connection limit, no read timeout."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
    )


class DatabaseWaits:
    """What the hub's database sessions are doing, sampled every `interval` while a load
    runs: a cheap profile of where a write's time goes that needs no tool in the hub
    (counts of sessions by `state / wait_event_type:wait_event` from pg_stat_activity)."""

    def __init__(self, url: str, *, interval: float = 0.25) -> None:
        self.url = url
        self.interval = interval
        self.counts: dict[str, int] = {}
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        import asyncpg

        from bench.support import asyncpg_url

        conn = await asyncpg.connect(asyncpg_url(self.url), timeout=10)
        try:
            while True:
                rows = await conn.fetch(
                    "SELECT state, wait_event_type, wait_event, left(query, 60) AS query "
                    "FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND state <> 'idle'"
                )
                self.samples += 1
                for row in rows:
                    what = f"{row['state']} / {row['wait_event_type']}:{row['wait_event']}"
                    if row["wait_event_type"] == "Lock":
                        what += f" / {row['query']}"
                    self.counts[what] = self.counts.get(what, 0) + 1
                await asyncio.sleep(self.interval)
        finally:
            await conn.close()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> dict[str, Any]:
        """Stop; answers the mean number of sessions in each state per sample."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:12]
        return {
            "samples": self.samples,
            "mean_sessions": {k: round(v / max(1, self.samples), 2) for k, v in top},
        }
