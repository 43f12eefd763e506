"""Shared pieces of the reliability tests (no tests here): figures, simulated agents, and
the consistency check every fault test ends with.

* `Figures` — each scenario reports what it saw (counts, durations) three ways: printed
  (`pytest -s`), as `record_property` (JUnit XML), and inside assertion messages, so a
  failure says how far the run got. docs/reliability.md quotes the printed line.
* `LoadAgent` — one member cluster's agent reduced to its hub traffic: it PUTs its exports
  one after another with its member token and, like the real agent's hub client, retries
  a refused connection or a 503 until the hub answers. It records every 2xx answer
  (the hub's acknowledgement) so a test can check each one afterwards.
* `assert_fleet_consistent` — every stored verdict equals a fresh `judge()` of its key's
  current exports, and every key's ServiceImport names the same winner and clusters.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

from hub.store import Store
from shared import conditions as c
from shared.models import InternalServiceExport
from tests.e2e.test_hub_process import HubProcess
from tests.hub.test_api_support import at, export_body, port
from tests.hub.test_store_db import Tap, TcpProxy
from tests.hub.test_store_verdicts import assert_verdicts_match_fresh_judgement
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentFactory,
    conditions_of,
    service_body,
    service_export_body,
    wait_for,
)
from tests.member.test_agent_resilience import CLUSTER, histogram_count

RecordProperty = Callable[[str, object], None]


class Figures:
    """Named figures of one scenario run, reported in one line."""

    def __init__(self, scenario: str, record_property: RecordProperty) -> None:
        self.scenario = scenario
        self._record = record_property
        self.values: dict[str, object] = {}
        self._started = time.monotonic()

    def __setitem__(self, name: str, value: object) -> None:
        self.values[name] = value
        self._record(name, value)

    def __getitem__(self, name: str) -> object:
        return self.values[name]

    def elapsed(self) -> float:
        return round(time.monotonic() - self._started, 1)

    def line(self) -> str:
        parts = ", ".join(f"{k}={v}" for k, v in self.values.items())
        return f"[{self.scenario}] {parts}"

    def report(self) -> str:
        self["wall_seconds"] = self.elapsed()
        text = self.line()
        print(f"\n{text}")
        return text


@dataclass
class HubTarget:
    """Where the simulated agents send requests; a test swaps `url` on a restart and
    clears `up` while the hub is down (agents then wait instead of spinning)."""

    url: str
    up: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.up.set()


RETRYABLE = (httpx.TransportError,)


@dataclass
class LoadAgent:
    """One cluster's stream of PUTs, retried until acknowledged."""

    cluster: str
    token: str
    target: HubTarget
    keys: list[str]
    created_offset: int = 0  # seconds after T0 for this cluster's creation timestamps
    acks: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> 2xx answer
    retries: int = 0
    answers: dict[int, int] = field(default_factory=dict)  # status code -> count

    def body(self, name: str) -> dict[str, Any]:
        # Every tenth key is a PortConflict across clusters (same name, another number).
        number = 80 + (self.created_offset if name.endswith("0") else 0)
        return export_body(
            self.cluster, namespace="load", name=name, created=at(self.created_offset),
            ports=[port(number, "http")],
        )

    async def run(self, *, client: httpx.AsyncClient, deadline: float) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        for name in self.keys:
            path = f"/api/v1/clusters/{self.cluster}/serviceexports/load/{name}"
            while True:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.cluster}: gave up on {name} at the deadline")
                await self.target.up.wait()
                try:
                    answer = await client.put(
                        self.target.url + path, json=self.body(name), headers=headers
                    )
                except RETRYABLE:
                    self.retries += 1
                    await asyncio.sleep(0.1)
                    continue
                self.answers[answer.status_code] = self.answers.get(answer.status_code, 0) + 1
                if answer.status_code in (200, 201):
                    self.acks[name] = answer.json()
                    break
                assert answer.status_code == 503, (name, answer.status_code, answer.text)
                assert answer.headers.get("Retry-After"), answer.headers
                self.retries += 1
                await asyncio.sleep(0.2)


async def exports_of(store: Store, namespace: str) -> list[InternalServiceExport]:
    """Every stored export of `namespace`, all pages."""
    items: list[InternalServiceExport] = []
    token: str | None = None
    while True:
        page = await store.exports.list(namespace=namespace, limit=1000, continue_token=token)
        items.extend(page.items)
        token = page.continue_token
        if token is None:
            return items


async def assert_fleet_consistent(store: Store, namespace: str) -> int:
    """Every verdict of `namespace` equals a fresh judgement; answers the keys checked."""
    names = sorted({e.metadata.name for e in await exports_of(store, namespace)})
    for name in names:
        await assert_verdicts_match_fresh_judgement(store, namespace, name)
    return len(names)


@contextlib.contextmanager
def hub_running(database_url: str, cwd: Path, env: dict[str, str]) -> Iterator[HubProcess]:
    """A `python -m hub serve` on `database_url`, ready; killed afterwards if still up."""
    hub = HubProcess(database_url=database_url, cwd=cwd, env=env)
    try:
        hub.wait_ready()
        yield hub
    finally:
        kill_if_running(hub)


def kill_if_running(hub: HubProcess) -> None:
    if hub.process.poll() is None:
        hub.process.kill()
        hub.process.wait(timeout=60)


async def wait_until(predicate: Callable[[], bool], *, deadline: float, what: str) -> None:
    """Poll `predicate` every 20 ms until it holds; AssertionError naming `what` at deadline."""
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class _InterceptingProxy(TcpProxy):
    """TcpProxy whose server→client tap can stop one answer (see ThreadedProxy)."""

    hook: tuple[bytes, Callable[[], None]] | None = None
    intercepted = 0

    def taps(self) -> tuple[Tap, Tap]:
        armed = False

        def upstream(data: bytes) -> bool:
            nonlocal armed
            if self.hook is not None and data.startswith(self.hook[0]):
                armed = True  # HTTP/1.1 without pipelining: the next answer is its answer
            return True

        def downstream(_data: bytes) -> bool:
            if not armed or self.hook is None:
                return True
            callback, self.hook = self.hook[1], None  # once
            self.intercepted += 1
            callback()
            return False

        return upstream, downstream


class ThreadedProxy:
    """A loopback TCP proxy in front of the hub, run on its own event loop in a thread so
    that synchronous tests (agent processes) can cut and heal it.

    * `cut()` — a network partition: every open connection is reset and new ones are
      refused, while the hub itself keeps running.
    * `heal()` — listen again on the same port.
    * `on_answer_to(prefix, callback)` — when the hub's answer to a request whose first
      bytes are `prefix` arrives, call `callback()` *before* forwarding a byte of it, and
      drop that answer (the connection is reset). The hub has committed by then; the
      client never hears so. Used to kill an agent between a write and its follow-up.
    """

    def __init__(self, target_port: int) -> None:
        self._proxy = _InterceptingProxy("127.0.0.1", target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._run(self._proxy.start())

    @property
    def port(self) -> int:
        return self._proxy.port

    @property
    def intercepted(self) -> int:
        return self._proxy.intercepted

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def cut(self) -> None:
        self._run(self._proxy.stop())

    def heal(self) -> None:
        self._run(self._proxy.start())

    def retarget(self, port: int) -> None:
        """Send new connections to `port` (a hub restarted elsewhere); open ones are reset."""
        self.cut()
        self._proxy.target = ("127.0.0.1", port)
        self.heal()

    def on_answer_to(self, prefix: bytes, callback: Callable[[], None]) -> None:
        self._proxy.hook = (prefix, callback)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._run(self._proxy.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


# -- one real agent beside the simulated ones ----------------------------------------------


def create_real_exports(kube: KubeCluster, indexes: range) -> None:
    """Services `shop/real-<i>` with a ServiceExport each, for the real agent to export."""
    for index in indexes:
        kube.state.create("services", "shop", service_body(f"real-{index}", "shop"))
        kube.state.create("serviceexports", "shop", service_export_body(f"real-{index}", "shop"))


def start_real_agent(kube: KubeCluster, agents: AgentFactory, url: str, token: str) -> Any:
    """A `python -m member` for cluster `member-1` talking to the hub at `url`."""
    hub = SimpleNamespace(url=url)  # all the factory reads of a hub
    return agents("real", kubeconfig=kube.kubeconfig, hub=hub, cluster_id=CLUSTER, token=token)


def real_agent_converged(kube: KubeCluster, agent: Any, count: int) -> None:
    """Wait until `real-0..count-1` are Ready=True/Exported, counted once each, settled."""

    def done() -> bool:
        return all(
            conditions_of(kube.state.get("serviceexports", "shop", f"real-{i}")).get(c.READY)
            == (c.TRUE, c.REASON_EXPORTED)
            for i in range(count)
        ) and histogram_count(agent) >= count

    wait_for(done, what="the real agent converged")
    wait_for(agent.settled, what="the real agent settled")
    assert "Traceback" not in agent.logs()  # every failure was met by a decision, not a crash
