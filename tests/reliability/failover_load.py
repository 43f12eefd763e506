"""One PostgreSQL failover under load against running hub replicas, measured
(docs/reference.md#ha-postgresql; no tests here: tests/reliability/test_pg_failover.py asserts on
it, bench/pg_failover.py times it).

While `writers` member clusters PUT exports one after another, each request to the next
replica in turn (retrying a 503 or a cut connection, as the agent does), and a watch per
cluster per replica follows its cluster's exports (re-watching from its last
resourceVersion whenever its stream ends, as the agent's feed does), the caller's
`fault` kills the primary and promotes the standby. Then the load goes on until every
replica has answered 2xx again, and a little longer. Measured:

* every answer's status (only 2xx and 503 with Retry-After are allowed) and requests
  that got no answer within the client's timeout (`hangs`, allowed: none);
* per replica, the time from `pg_ctl promote` to its first 2xx, and the ceiling: from
  the same instant to the first write PostgreSQL itself accepted on the new primary;
* acknowledged writes missing from the new primary afterwards (`lost`), and per watch
  the acknowledged writes of its cluster it never delivered (`missed`), and its 410s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg
import httpx

from tests.hub.test_api_support import export_body, port

ADMIN_TOKEN = "failover-admin-token-0123456789abcdef"
NAMESPACE = "load"


@dataclass
class Outcome:
    """What one failover run saw (see the module doc)."""

    codes: Counter[str] = field(default_factory=Counter)
    hangs: int = 0
    missing_retry_after: int = 0
    acked: dict[str, set[str]] = field(default_factory=dict)  # cluster -> names
    first_2xx_seconds: dict[str, float] = field(default_factory=dict)  # replica -> s
    ceiling_seconds: float | None = None
    lost: int = 0
    missed: int = 0
    gone: int = 0
    watch_errors: Counter[str] = field(default_factory=Counter)
    writes_before_failover: int = 0
    writes_after_failover: int = 0

    def line(self) -> str:
        firsts = ", ".join(f"{v:.2f}" for v in self.first_2xx_seconds.values())
        acked = sum(len(v) for v in self.acked.values())
        ceiling = f"{self.ceiling_seconds:.2f}" if self.ceiling_seconds is not None else "n/a"
        return (
            f"acked={acked} before_failover={self.writes_before_failover} "
            f"after_failover={self.writes_after_failover} "
            f"codes={dict(self.codes)} hangs={self.hangs} first_2xx_s=[{firsts}] "
            f"ceiling_s={ceiling} lost={self.lost} missed={self.missed} gone={self.gone}"
        )


class Follower:
    """One cluster's watch on one replica, re-watching from its last resourceVersion."""

    def __init__(self, url: str, cluster: str, token: str, outcome: Outcome) -> None:
        self.url, self.cluster, self.token, self.outcome = url, cluster, token, outcome
        self.revision = "0"
        self.names: set[str] = set()

    async def run(self, stop: asyncio.Event) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        path = f"{self.url}/api/v1/clusters/{self.cluster}/serviceexports"
        async with httpx.AsyncClient(timeout=httpx.Timeout(30, connect=5)) as client:
            while not stop.is_set():
                try:
                    query = f"?watch=true&resourceVersion={self.revision}&timeoutSeconds=20"
                    async with client.stream("GET", path + query, headers=headers) as stream:
                        if stream.status_code != 200:
                            self.outcome.watch_errors[f"HTTP {stream.status_code}"] += 1
                            self.outcome.gone += stream.status_code == 410
                            await asyncio.sleep(0.2)
                            continue
                        async for line in stream.aiter_lines():
                            event = json.loads(line)
                            if event["type"] == "ERROR":
                                code = event["object"].get("code")
                                self.outcome.watch_errors[f"ERROR {code}"] += 1
                                self.outcome.gone += code == 410
                                break
                            self.revision = event["object"]["metadata"]["resourceVersion"]
                            if event["type"] in ("ADDED", "MODIFIED"):
                                self.names.add(event["object"]["metadata"]["name"])
                            if stop.is_set():
                                break
                except httpx.TransportError as exc:
                    self.outcome.watch_errors[type(exc).__name__] += 1
                    await asyncio.sleep(0.2)


class Writer:
    """One cluster's PUTs, round-robin over the replicas, each retried until acknowledged."""

    def __init__(self, index: int, cluster: str, token: str, replicas: list[str]) -> None:
        self.index, self.cluster, self.token, self.replicas = index, cluster, token, replicas
        self.acked: set[str] = set()
        self.answers: list[tuple[str, float, int]] = []  # (replica, answered at, code)

    async def run(self, client: httpx.AsyncClient, outcome: Outcome, stop: asyncio.Event) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        turn = self.index
        number = 0
        while not stop.is_set():
            name = f"w{self.index}-{number}"
            replica = self.replicas[turn % len(self.replicas)]
            turn += 1
            body = export_body(self.cluster, namespace=NAMESPACE, name=name, ports=[port(80)])
            path = f"{replica}/api/v1/clusters/{self.cluster}/serviceexports/{NAMESPACE}/{name}"
            try:
                answer = await client.put(path, json=body, headers=headers)
            except httpx.TimeoutException:
                outcome.hangs += 1
                continue
            except httpx.TransportError as exc:
                outcome.codes[type(exc).__name__] += 1
                await asyncio.sleep(0.1)
                continue
            outcome.codes[str(answer.status_code)] += 1
            self.answers.append((replica, time.monotonic(), answer.status_code))
            if answer.status_code in (200, 201):
                self.acked.add(name)
                number += 1
            elif answer.status_code == 503:
                outcome.missing_retry_after += not answer.headers.get("Retry-After")
                await asyncio.sleep(0.1)
            else:
                await asyncio.sleep(0.1)


async def register(replica: str, clusters: list[str]) -> dict[str, str]:
    """Register `clusters` (admin); their member tokens."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    tokens = {}
    async with httpx.AsyncClient(timeout=30) as client:
        for cluster in clusters:
            answer = await client.post(
                f"{replica}/api/v1/clusters", json={"metadata": {"name": cluster}}, headers=headers
            )
            assert answer.status_code == 201, answer.text
            tokens[cluster] = answer.json()["token"]
    return tokens


async def _ceiling(accepts_writes: Callable[[], Awaitable[bool]], started: float) -> float:
    for _ in range(6000):  # 2 minutes at most
        if await accepts_writes():
            break
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def run_failover(
    *,
    replicas: list[str],
    prefix: str,
    fault: Callable[[Callable[[], None]], None],
    accepts_writes: Callable[[], Awaitable[bool]],
    primary_url: Callable[[], str],
    writers: int = 8,
    warmup: float = 2.0,
    settle: float = 2.0,
    deadline: float = 60.0,
) -> Outcome:
    """One failover under load (see the module doc). `fault(promoting)` kills the primary,
    calls `promoting()` just before `pg_ctl promote` and promotes (blocking; run in a
    thread); `accepts_writes()` says whether PostgreSQL itself takes a write on the current
    primary; `primary_url()` is the current primary's URL of the hubs' database."""
    outcome = Outcome()
    clusters = [f"{prefix}-{i}" for i in range(writers)]
    tokens = await register(replicas[0], clusters)
    stop_watches, stop_writes = asyncio.Event(), asyncio.Event()
    followers = [
        Follower(replica, cluster, tokens[cluster], outcome)
        for cluster in clusters
        for replica in replicas
    ]
    watch_tasks = [asyncio.create_task(f.run(stop_watches)) for f in followers]
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    loop = asyncio.get_running_loop()
    promoted_at: list[float] = []
    ceiling: list[concurrent.futures.Future[float]] = []

    def promoting() -> None:  # called in the fault's thread
        started = time.monotonic()
        promoted_at.append(started)
        ceiling.append(asyncio.run_coroutine_threadsafe(_ceiling(accepts_writes, started), loop))

    async with httpx.AsyncClient(timeout=httpx.Timeout(10, connect=5), limits=limits) as client:
        pool = [Writer(i, c, tokens[c], replicas) for i, c in enumerate(clusters)]
        write_tasks = [asyncio.create_task(w.run(client, outcome, stop_writes)) for w in pool]
        try:
            # Load first: every writer acknowledged twice, then `warmup` more seconds.
            for _ in range(int(deadline * 10)):
                if all(len(w.acked) >= 2 for w in pool):
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(warmup)
            outcome.writes_before_failover = sum(len(w.acked) for w in pool)
            await asyncio.to_thread(fault, promoting)
            assert promoted_at, "the fault never promoted"
            t0 = promoted_at[0]
            end = time.monotonic() + deadline
            while True:
                firsts = _first_2xx(pool, t0)
                if len(firsts) == len(replicas):
                    break
                if time.monotonic() > end:
                    raise AssertionError(
                        f"writes did not resume on every replica within {deadline} s "
                        f"of the promotion: {firsts}; {outcome.line()}"
                    )
                await asyncio.sleep(0.05)
            await asyncio.sleep(settle)
        finally:
            stop_writes.set()
            await asyncio.gather(*write_tasks, return_exceptions=True)
    outcome.first_2xx_seconds = _first_2xx(pool, t0)
    outcome.writes_after_failover = sum(
        1 for w in pool for _, at, code in w.answers if at > t0 and code in (200, 201)
    )
    outcome.ceiling_seconds = await asyncio.wrap_future(ceiling[0])
    outcome.acked = {w.cluster: set(w.acked) for w in pool}
    # Every watch delivers every acknowledged write of its cluster (generous deadline).
    for _ in range(300):
        if all(outcome.acked[f.cluster] <= f.names for f in followers):
            break
        await asyncio.sleep(0.1)
    stop_watches.set()
    for task in watch_tasks:
        task.cancel()
    await asyncio.gather(*watch_tasks, return_exceptions=True)
    outcome.missed = sum(len(outcome.acked[f.cluster] - f.names) for f in followers)
    conn = await asyncpg.connect(primary_url(), timeout=10)
    try:
        rows = await conn.fetch(
            "SELECT cluster_id, name FROM exports WHERE namespace = $1", NAMESPACE
        )
    finally:
        await conn.close()
    stored = {(r["cluster_id"], r["name"]) for r in rows}
    outcome.lost = sum(
        1 for cluster, names in outcome.acked.items() for n in names if (cluster, n) not in stored
    )
    return outcome


def _first_2xx(pool: list[Writer], t0: float) -> dict[str, float]:
    firsts: dict[str, float] = {}
    for writer in pool:
        for replica, at, code in writer.answers:
            if at > t0 and code in (200, 201):
                firsts[replica] = min(firsts.get(replica, at - t0), at - t0)
    return dict(sorted(firsts.items()))
