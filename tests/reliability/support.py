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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from hub.conflicts import judge
from hub.store import Store
from shared.models import InternalServiceExport
from tests.hub.test_api_support import at, export_body, port

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
    by_key: dict[str, list[InternalServiceExport]] = {}
    for export in await exports_of(store, namespace):
        by_key.setdefault(export.metadata.name, []).append(export)
    for name, group in by_key.items():
        group.sort(
            key=lambda e: (
                e.spec.service_reference.export_creation_timestamp,
                e.spec.service_reference.cluster_id,
            )
        )
        judgement = judge([e.spec for e in group])
        for export in group:
            verdict = judgement.verdicts[export.spec.service_reference.cluster_id]
            condition = export.condition("Conflict")
            assert condition is not None, (name, export.spec.service_reference.cluster_id)
            assert condition.status == ("True" if verdict.conflict else "False"), name
            assert condition.message == verdict.message, name
        imported = await store.imports.get(namespace, name)
        assert imported.status.winning_cluster == judgement.winner, name
        assert [c.cluster for c in imported.status.clusters] == list(judgement.clusters), name
    return len(by_key)


async def wait_until(predicate: Callable[[], bool], *, deadline: float, what: str) -> None:
    """Poll `predicate` every 20 ms until it holds; AssertionError naming `what` at deadline."""
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


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
        from tests.hub.test_store_db import TcpProxy

        self._proxy = TcpProxy("127.0.0.1", target_port)
        self._proxy._serve = self._serve  # type: ignore[method-assign]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._hook: tuple[bytes, Callable[[], None]] | None = None
        self.intercepted = 0
        self._run(self._proxy.start())

    @property
    def port(self) -> int:
        return self._proxy.port

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def cut(self) -> None:
        self._run(self._proxy.stop())

    def heal(self) -> None:
        self._run(self._proxy.start())

    def on_answer_to(self, prefix: bytes, callback: Callable[[], None]) -> None:
        self._hook = (prefix, callback)

    def close(self) -> None:
        try:
            self._run(self._proxy.stop())
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._proxy.target)
        self._proxy._writers.update((writer, up_writer))
        armed = False

        async def upstream() -> None:
            nonlocal armed
            try:
                while data := await reader.read(65536):
                    if self._hook is not None and data.startswith(self._hook[0]):
                        armed = True  # HTTP/1.1 without pipelining: the next answer is its
                    up_writer.write(data)
                    await up_writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                up_writer.transport.abort()

        async def downstream() -> None:
            nonlocal armed
            try:
                while data := await up_reader.read(65536):
                    if armed and self._hook is not None:
                        self.intercepted += 1
                        callback = self._hook[1]
                        self._hook = None  # once
                        callback()
                        break
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.transport.abort()

        await asyncio.gather(upstream(), downstream())
