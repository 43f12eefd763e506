"""The simulated member agents of the fleet benchmark (`bench.fleet_scale`).

Each `Agent` is what `python -m member` is to the hub, without Kubernetes:

* registers (admin) with `spec.importNamespaces` = its team's namespace and the next nine
  (10 namespaces of 10 Services: ~100 imports), ten clusters a team;
* heartbeats on the agent's own schedule (`member.heartbeat.HeartbeatLoop.next_wait`: the
  interval ±20 %, never past a third of the TTL each answer carries), over kept-alive
  connections kept past the longest wait (`member.hubclient.idle_connection_seconds`);
* holds its export-feed and import-feed watches open and reads them (raw sockets; every
  line's type and resourceVersion parsed), resuming a broken watch from its last
  resourceVersion by the agent's rules for the hub's feeds (`member.informer`): each
  request asks for a timeout drawn from [300, 600) s; a stream the hub ended resumes at
  once; a lost connection or an ERROR event after a wait drawn from `HUB_RECONNECT` (full
  jitter, `shared.backoff`), never sooner than the ERROR's `retryAfterSeconds`; on the
  next replica (what a load balancer in front of the tier does);
* exports its 10 Services in its team's namespace and one EndpointSlice of 10 endpoints
  each (PUT per export, PUT per slice), the export first, as the agent orders them.

A `Fleet` is any share of the fleet's agents (`indexes`): the whole of it in the
per-unit measurements, one simulator process's share in the fleet run (`bench.fleetshard`).
Every time it records is `time.monotonic()`, one clock for every process on the machine,
so that a change stamped in one simulator process and seen in another is one difference.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import urlsplit

import aiohttp

from bench.slices import address, slice_wire
from bench.support import export_wire
from member.heartbeat import HeartbeatLoop, VersionGate
from member.hubclient import HubClient, HubClientConfig, idle_connection_seconds
from member.informer import HUB_RECONNECT
from shared.backoff import Backoff, Retries

TEAM_SIZE = 10  # clusters per team; a team's clusters export the same 10 Services
SERVICES = 10  # per cluster, in its team's namespace
SCOPE = 10  # namespaces each cluster imports (its team's and the next nine)
ENDPOINTS = 10  # per slice
AGENT_VERSION = "0.1.0"
WATCH_TIMEOUT = 300  # the agent's default `watch_timeout` (member.settings)

_RV = re.compile(rb'"resourceVersion":\s*"(\d+)"')
_TYPE = re.compile(rb'"type":\s*"([A-Z]+)"')
_SLICE = re.compile(rb'"kind":"EndpointSliceExport"')
_NAME = re.compile(rb'"name":"(svc-\d+-c\d+)","namespace":"(team-\d+)"')
_RETRY_AFTER = re.compile(rb'"retryAfterSeconds":\s*(\d+)')
_RETRY_AFTER_HEADER = re.compile(rb"(?i)\r\nretry-after:\s*(\d+)")


def progress(message: str) -> None:
    """A line of progress on stderr (stdout carries the result, and a simulator process's
    replies to the benchmark)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cluster_name(index: int) -> str:
    return f"c{index:05d}"


def team_of(index: int) -> int:
    return index // TEAM_SIZE


def namespace(team: int) -> str:
    return f"team-{team}"


def slice_of(cluster: int, service: int, *, change: int = 0) -> dict[str, Any]:
    """Cluster `cluster`'s slice of Service `service`: 10 endpoints; `change` > 0 moves the
    first one to a pod IP unique per change, and stamps when it was observed."""
    addresses = [address(cluster, service, e) for e in range(ENDPOINTS)]
    if change:
        addresses[0] = changed_address(change)
    body = slice_wire(
        namespace(team_of(cluster)),
        f"svc-{service}",
        addresses=addresses,
        name=f"svc-{service}-{cluster_name(cluster)}",
        source_resource_version=str(change + 1),
    )
    body["spec"]["sourceObservedTime"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return body


def export_body(cluster: int, service: int) -> dict[str, Any]:
    return export_wire(cluster_name(cluster), namespace(team_of(cluster)), f"svc-{service}")


# -- the tier --------------------------------------------------------------------------------


class Tier:
    """The hub replicas and which are up; connections go round-robin over the live ones,
    as a load balancer in front of the tier spreads them."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self.down: set[int] = set()
        self._next = 0

    def pick(self, avoid: int | None = None) -> int:
        live = [i for i in range(len(self.urls)) if i not in self.down]
        if avoid is not None and len(live) > 1 and avoid in live:
            live.remove(avoid)
        self._next += 1
        return live[self._next % len(live)]

    def url(self, index: int) -> str:
        return self.urls[index]


@dataclass
class Counters:
    connections: int = 0  # TCP connections the HTTP client opened
    requests: int = 0
    heartbeat_seconds: list[float] = field(default_factory=list)
    heartbeat_at: list[float] = field(default_factory=list)  # when each answered beat left
    heartbeat_errors: int = 0
    watch_opens: list[float] = field(default_factory=list)  # perf_counter of each (re)open
    gone: int = 0  # 410 answers or ERROR events
    watch_errors: int = 0  # other ERROR events (503: the replica could not read)
    refused_opens: int = 0  # watch opens answered with another status than 200
    relists: int = 0
    withdrawn: int = 0  # DELETED slice events seen by importers


class Watch(asyncio.Protocol):
    """One watch on a raw socket, resumed from its last resourceVersion when it breaks."""

    def __init__(self, agent: Agent, route: str, counters: Counters) -> None:
        self.agent = agent
        self.route = route
        self.counters = counters
        self.rv = "0"
        self.replica: int | None = None
        self.open = False
        self.opened_at = 0.0
        self.slices: set[bytes] = set()  # import watch: slices seen (namespace/name)
        self.marks: dict[bytes, float] = {}  # marker bytes -> arrival
        self.watching: set[bytes] = set()
        self._head: bytes | None = b""
        self._buffer = b""
        self._ended = False  # the hub ended the stream (its timeout): resume at once
        self._error = False  # the stream carried an ERROR event: a failure, however it ended
        self._retry_after: float | None = None  # what that ERROR asked for
        self._streamed = False  # the current stream delivered a line
        self._done: asyncio.Future[bool] | None = None
        self._transport: asyncio.Transport | None = None

    async def run(self, tier: Tier) -> None:
        retries = Retries(HUB_RECONNECT)
        loop = asyncio.get_running_loop()
        while True:
            self.replica = tier.pick(avoid=None)
            parts = urlsplit(tier.url(self.replica))
            self._head, self._buffer, self._ended = b"", b"", False
            self._error, self._retry_after, self._streamed = False, None, False
            # As the agent asks (`member.informer.Informer._next_timeout`): its watch
            # timeout (300 s by default) times a draw from [1, 2).
            timeout = int(WATCH_TIMEOUT * (1.0 + random.random()))
            self._done = loop.create_future()
            failed = False
            try:
                await loop.create_connection(
                    lambda: self, parts.hostname or "127.0.0.1", parts.port or 80
                )
                assert self._transport is not None
                self._transport.write(
                    (
                        f"GET {self.route}?watch=true&resourceVersion={self.rv}"
                        f"&timeoutSeconds={timeout} HTTP/1.1\r\nHost: {parts.hostname}\r\n"
                        f"Authorization: Bearer {self.agent.token}\r\n\r\n"
                    ).encode()
                )
                failed = await self._done
            except OSError:
                failed = True
            self.open = False
            if failed or self._error:
                if self._streamed:
                    retries.reset()  # it was serving: a fresh loss, the first window
                await asyncio.sleep(retries.next(retry_after=self._retry_after))
            else:
                retries.reset()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(not self._ended)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        if self._head is not None:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self._head[:end], self._head[end + 4 :]
            self._head = None
            if b" 200 " not in head.split(b"\r\n", 1)[0] + b" ":
                if b" 410 " in head:
                    self.counters.gone += 1
                else:
                    self.counters.refused_opens += 1
                    asked = _RETRY_AFTER_HEADER.search(head)
                    if asked is not None:
                        self._retry_after = float(asked.group(1))
                assert self._transport is not None
                self._transport.close()
                return
            self.open = True
            self.opened_at = now
            self.counters.watch_opens.append(now)
        lines = (self._buffer + data).split(b"\n")
        self._buffer = lines.pop()
        for line in lines:
            kind = _TYPE.search(line)
            if kind is None:
                if line == b"0\r":  # the chunked stream's last chunk: the watch ended
                    self._ended = True
                    assert self._transport is not None
                    self._transport.close()
                continue
            self._streamed = True
            if kind.group(1) == b"ERROR":
                if b'"code":410' in line:
                    self.counters.gone += 1
                else:
                    self._error = True
                    self.counters.watch_errors += 1
                    asked = _RETRY_AFTER.search(line)
                    if asked is not None:
                        self._retry_after = float(asked.group(1))
                continue
            found = _RV.search(line)
            if found is not None:
                self.rv = found.group(1).decode()
            if kind.group(1) == b"BOOKMARK" or _SLICE.search(line) is None:
                continue
            named = _NAME.search(line)
            if named is None:
                continue
            key = named.group(2) + b"/" + named.group(1)
            if kind.group(1) == b"DELETED":
                self.counters.withdrawn += 1
                self.slices.discard(key)
            else:
                self.slices.add(key)
            for marker in self.watching:
                if marker in line:
                    self.marks.setdefault(marker, now)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


@dataclass
class Agent:
    index: int
    token: str = ""
    scope: list[str] = field(default_factory=list)
    beat: HeartbeatLoop | None = None
    exports: Watch | None = None
    imports: Watch | None = None
    last_answer: float = 0.0

    @property
    def name(self) -> str:
        return cluster_name(self.index)


class Fleet:
    """Agents `indexes` of a fleet of `args.clusters` (all of them by default)."""

    def __init__(self, args: Any, tier: Tier, indexes: Sequence[int] | None = None) -> None:
        self.args = args
        self.tier = tier
        self.counters = Counters()
        self.agents = [Agent(i) for i in (range(args.clusters) if indexes is None else indexes)]
        self.teams = max(1, args.clusters // TEAM_SIZE)
        self.sessions: list[aiohttp.ClientSession] = []
        self.beat_sessions: list[aiohttp.ClientSession] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self.acknowledged = 0  # Services whose export and slice were both acknowledged

    async def start_sessions(self) -> None:
        trace = aiohttp.TraceConfig()

        async def opened(*_: Any) -> None:
            self.counters.connections += 1

        trace.on_connection_create_end.append(opened)
        keep = idle_connection_seconds(self.args.heartbeat_interval)
        # Heartbeats get connections of their own, unbounded: each agent has its own kept
        # connection, and a beat must not queue behind another agent's export PUTs in a
        # pool this process shares.
        for _ in self.tier.urls:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=keep)
            self.beat_sessions.append(
                aiohttp.ClientSession(
                    connector=connector,
                    trace_configs=[trace],
                    timeout=aiohttp.ClientTimeout(total=120),
                )
            )
        for _ in self.tier.urls:
            connector = aiohttp.TCPConnector(limit=self.args.connections, keepalive_timeout=keep)
            self.sessions.append(
                aiohttp.ClientSession(
                    connector=connector,
                    trace_configs=[trace],
                    timeout=aiohttp.ClientTimeout(total=120),
                )
            )

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for agent in self.agents:
            for watch in (agent.exports, agent.imports):
                if watch is not None:
                    watch.close()
        for session in [*self.sessions, *self.beat_sessions]:
            await session.close()

    async def request(
        self,
        agent: Agent,
        method: str,
        path: str,
        body: Any = None,
        *,
        admin: str | None = None,
        beat: bool = False,
    ) -> tuple[int, Any]:
        """One request to a live replica, retried on the next one after the hub client's
        back-off when the connection fails (as `member.hubclient` does)."""
        retries = Retries(
            Backoff(base=HubClientConfig.backoff_initial, cap=HubClientConfig.backoff_max)
        )
        token = admin or agent.token
        while True:
            replica = self.tier.pick()
            session = (self.beat_sessions if beat else self.sessions)[replica]
            try:
                self.counters.requests += 1
                async with session.request(
                    method,
                    self.tier.url(replica) + path,
                    json=body,
                    headers={"Authorization": f"Bearer {token}"},
                ) as answer:
                    data = await answer.read()
                    if answer.status in (502, 503, 504):
                        raise aiohttp.ClientError(str(answer.status))
                    return answer.status, data
            except (TimeoutError, aiohttp.ClientError, OSError):
                await asyncio.sleep(retries.next())

    # -- the agents' lifetimes -----------------------------------------------------------

    async def register(self, admin_token: str, *, concurrency: int = 32) -> None:
        gate = asyncio.Semaphore(concurrency)

        async def one(agent: Agent) -> None:
            team = team_of(agent.index)
            agent.scope = [
                namespace((team + k) % self.teams) for k in range(min(SCOPE, self.teams))
            ]
            async with gate:
                status, data = await self.request(
                    agent,
                    "POST",
                    "/api/v1/clusters",
                    {"metadata": {"name": agent.name}, "spec": {"importNamespaces": agent.scope}},
                    admin=admin_token,
                )
            if status != 201:
                raise RuntimeError(f"register {agent.name}: {status} {data[:200]!r}")
            agent.token = json.loads(data)["token"]
            agent.beat = HeartbeatLoop(
                hub=cast(HubClient, None),
                interval=self.args.heartbeat_interval,
                gate=VersionGate(agent_version=AGENT_VERSION),
                rng=random.Random(agent.index),
            )

        await asyncio.gather(*(one(a) for a in self.agents))

    def start_watches(self) -> None:
        for agent in self.agents:
            agent.exports = Watch(
                agent, f"/api/v1/clusters/{agent.name}/serviceexports", self.counters
            )
            agent.imports = Watch(agent, f"/api/v1/clusters/{agent.name}/imports", self.counters)
            for watch in (agent.exports, agent.imports):
                self._tasks.append(asyncio.create_task(watch.run(self.tier)))

    def start_heartbeats(self, *, healthz: bool = False) -> None:
        """Every agent beats on its schedule; with `healthz`, sends `GET /healthz` on that
        schedule instead: the same pace of the hub's cheapest request, the floor a paced
        beat is compared with (a request that arrives alone pays the loop's wake-up and the
        socket's read that requests arriving together share)."""
        for agent in self.agents:
            self._tasks.append(asyncio.create_task(self._heartbeats(agent, healthz=healthz)))

    async def _heartbeats(self, agent: Agent, *, healthz: bool) -> None:
        assert agent.beat is not None
        # Agents started over a whole interval, as a fleet rolled out over time is.
        await asyncio.sleep(random.Random(-agent.index).uniform(0, agent.beat.next_wait()))
        body = {"agentVersion": AGENT_VERSION, "importedServices": 100, "importedEndpoints": 1000}
        while True:
            sent = time.monotonic()
            if healthz:
                status, data = await self.request(agent, "GET", "/healthz", beat=True)
            else:
                status, data = await self.request(
                    agent, "POST", f"/api/v1/clusters/{agent.name}/heartbeat", body, beat=True
                )
            if status == 200:
                self.counters.heartbeat_seconds.append(time.monotonic() - sent)
                self.counters.heartbeat_at.append(sent)
                agent.last_answer = time.monotonic()
                if not healthz:
                    # The TTL the answer carries (member.heartbeat: at least three beats per
                    # TTL).
                    agent.beat._learn_ttl(json.loads(data).get("clusterTtlSeconds"))
            else:
                self.counters.heartbeat_errors += 1
            await asyncio.sleep(agent.beat.next_wait())

    async def export_all(self) -> float:
        """Every agent exports its Services and their slices; answers the seconds until all
        were acknowledged."""
        gate = asyncio.Semaphore(self.args.connections)
        started = time.monotonic()

        async def one(agent: Agent, service: int) -> None:
            ns = namespace(team_of(agent.index))
            async with gate:
                status, data = await self.request(
                    agent,
                    "PUT",
                    f"/api/v1/clusters/{agent.name}/serviceexports/{ns}/svc-{service}",
                    export_body(agent.index, service),
                )
                if status not in (200, 201):
                    raise RuntimeError(f"export {agent.name}: {status} {data[:300]!r}")
                status, data = await self.request(
                    agent,
                    "PUT",
                    f"/api/v1/clusters/{agent.name}/endpointslices/{ns}/svc-{service}-{agent.name}",
                    slice_of(agent.index, service),
                )
                if status not in (200, 201):
                    raise RuntimeError(f"slice {agent.name}: {status} {data[:300]!r}")
                self.acknowledged += 1

        await asyncio.gather(*(one(a, s) for a in self.agents for s in range(SERVICES)))
        return time.monotonic() - started

    def expected_slices(self, agent: Agent) -> int:
        return len(agent.scope) * SERVICES * TEAM_SIZE

    def converged(self) -> int:
        """Agents whose import watch holds every slice of its scope."""
        return sum(
            1
            for a in self.agents
            if a.imports is not None and len(a.imports.slices) >= self.expected_slices(a)
        )

    def watches_open(self) -> int:
        return sum(
            1 for a in self.agents for w in (a.exports, a.imports) if w is not None and w.open
        )

    # -- one endpoint change, seen by every importer (`bench.fleet_scale`) --------------

    def importers(self) -> list[Agent]:
        """This share's agents that import cluster 0's namespace."""
        ns = namespace(team_of(0))
        return [a for a in self.agents if ns in a.scope and a.imports is not None]

    def watch_for(self, change: int) -> int:
        """Note when change `change` reaches each importer's watch; answers how many."""
        importers = self.importers()
        for a in importers:
            assert a.imports is not None
            a.imports.watching.add(change_marker(change))
        return len(importers)

    async def put_change(self, change: int) -> float:
        """Cluster 0 (in this share) writes change `change` of its first slice; answers the
        time it stamped the change with, just before the write."""
        source = next(a for a in self.agents if a.index == 0)
        ns = namespace(team_of(0))
        body = slice_of(0, 0, change=change)
        stamp = time.monotonic()
        status, data = await self.request(
            source,
            "PUT",
            f"/api/v1/clusters/{source.name}/endpointslices/{ns}/svc-0-{source.name}",
            body,
        )
        if status not in (200, 201):
            raise RuntimeError(f"change: {status} {data[:300]!r}")
        return stamp

    def arrivals(self, change: int, *, done: bool = False) -> list[float | None]:
        """When change `change` reached each importer's watch (None: not yet); with `done`,
        stops noting it."""
        marker = change_marker(change)
        seen: list[float | None] = []
        for a in self.importers():
            assert a.imports is not None
            seen.append(a.imports.marks.get(marker))
            if done:
                a.imports.watching.discard(marker)
        return seen


def change_marker(change: int) -> bytes:
    """The bytes that only change `change` of cluster 0's first slice carries: its moved
    endpoint's address, quoted (`slice_of`)."""
    return b'"' + changed_address(change).encode() + b'"'


def changed_address(change: int) -> str:
    return f"10.251.{(change // 250) % 250}.{change % 250 + 1}"


async def stale_clusters(session: aiohttp.ClientSession, url: str, admin: str) -> int:
    """How many clusters the hub at `url` lists as Stale (-1: it did not answer)."""
    headers = {"Authorization": f"Bearer {admin}"}
    async with session.get(url + "/api/v1/clusters", headers=headers) as answer:
        if answer.status != 200:
            return -1
        data = await answer.read()
    return sum(1 for c in json.loads(data)["items"] if c["status"]["state"] == "Stale")


async def wait_until(condition: Any, *, seconds: float, every: float = 0.5) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if condition():
            return time.monotonic() - started
        await asyncio.sleep(every)
    return None
