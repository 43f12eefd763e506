"""What the console's browser tests, its screenshots and its benchmark share: Debian's
Chromium driven by Playwright, axe-core from the npm registry, and a fleet seeded through
the hub's REST API (the console reads nothing else).

Playwright's own browser download cannot run here (and CI machines reach only package
registries), so Playwright drives Debian's `chromium` by `executable_path`. Both it and
axe-core (`tests/browser/axe`, `npm ci`) are installed by scripts/test; where either is
missing the browser tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from shared.version import __version__

T = TypeVar("T")

CHROMIUM = "/usr/bin/chromium"
AXE = Path(__file__).with_name("axe") / "node_modules" / "axe-core" / "axe.min.js"

NAMESPACE = "demo"
CLUSTERS = ("east", "west", "north")  # north registers but never heartbeats: Pending


def _missing(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def chromium_path() -> str:
    """Debian's Chromium; skips where it is missing, fails under CI (which installs it)."""
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if found is None:
        _missing("chromium is not installed (Debian package chromium; scripts/test installs it)")
    assert found is not None
    return found


def axe_source() -> str:
    """axe-core's script to inject into a page; skips/fails like `chromium_path`."""
    if not AXE.is_file():
        _missing(f"axe-core is not installed ({AXE}; scripts/test runs npm ci there)")
    return AXE.read_text()


def off_the_loop(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a thread of its own: Playwright's sync API keeps an event loop
    running in the test's thread, where the suite's PostgreSQL helpers (`asyncio.run`)
    cannot run. Exceptions (a pytest skip or fail included) come back as they were."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function, *args).result()


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (Playwright's Browser), closed afterwards."""
    path = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=path, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser
        finally:
            browser.close()


class FleetSeeder:
    """Writes a fleet into a hub through its REST API, as agents and an admin would."""

    def __init__(self, url: str, *, admin_token: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=60)
        self.admin = {"Authorization": f"Bearer {admin_token}"}
        self.tokens: dict[str, dict[str, str]] = {}

    def close(self) -> None:
        self.client.close()

    def register(self, cluster: str, *, heartbeat: bool = True,
                 spec: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"metadata": {"name": cluster}}
        if spec is not None:
            body["spec"] = spec
        answer = self.client.post("/api/v1/clusters", json=body, headers=self.admin)
        assert answer.status_code == 201, answer.text
        self.tokens[cluster] = {"Authorization": f"Bearer {answer.json()['token']}"}
        if heartbeat:
            self.heartbeat(cluster)

    def heartbeat(self, cluster: str, *, held: tuple[int, int] | None = None) -> None:
        """One heartbeat; `held` = (would withdraw, exports) reports a held mass withdrawal."""
        body: dict[str, Any] = {"agentVersion": __version__}
        if held is not None:
            body["withdrawalHeld"] = {
                "wouldWithdraw": held[0], "exports": held[1], "since": "2026-01-01T12:00:00Z",
            }
        answer = self.client.post(
            f"/api/v1/clusters/{cluster}/heartbeat", json=body, headers=self.tokens[cluster]
        )
        assert answer.status_code == 200, answer.text

    def export(self, cluster: str, name: str, *, namespace: str = NAMESPACE,
               **spec: Any) -> dict[str, Any]:
        path = f"/api/v1/clusters/{cluster}/serviceexports/{namespace}/{name}"
        answer = self.client.put(
            path, json=export_body(cluster, name, namespace=namespace, **spec),
            headers=self.tokens[cluster],
        )
        assert answer.status_code in (200, 201), answer.text
        result: dict[str, Any] = answer.json()
        return result

    def withdraw(self, cluster: str, name: str, *, namespace: str = NAMESPACE) -> None:
        path = f"/api/v1/clusters/{cluster}/serviceexports/{namespace}/{name}"
        answer = self.client.delete(path, headers=self.tokens[cluster])
        assert answer.status_code == 200, answer.text

    def sync(self, cluster: str, bodies: list[dict[str, Any]]) -> None:
        """Full-state sync of `cluster`'s exports (the fast way to write thousands)."""
        answer = self.client.put(
            f"/api/v1/clusters/{cluster}/serviceexports",
            json={"items": bodies}, headers=self.tokens[cluster],
        )
        assert answer.status_code == 200, answer.text

    def slice(self, cluster: str, service: str, *, ready: int, total: int,
              namespace: str = NAMESPACE) -> None:
        third = CLUSTERS.index(cluster) + 1 if cluster in CLUSTERS else 9
        body = {
            "metadata": {"name": f"{service}-{cluster}", "namespace": namespace},
            "spec": {
                "serviceName": service,
                "addressType": "IPv4",
                "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
                "endpoints": [
                    {"addresses": [f"10.{third}.0.{i + 1}"], "conditions": {"ready": i < ready}}
                    for i in range(total)
                ],
            },
        }
        path = f"/api/v1/clusters/{cluster}/endpointslices/{namespace}/{service}-{cluster}"
        answer = self.client.put(path, json=body, headers=self.tokens[cluster])
        assert answer.status_code in (200, 201), answer.text


class Beater:
    """Heartbeats for some clusters every `interval` seconds in a thread, as their agents
    would, so that the others go Stale on a hub with a short TTL; stops by itself after
    `limit` seconds at most."""

    def __init__(self, url: str, tokens: dict[str, dict[str, str]], *,
                 held: dict[str, tuple[int, int]] | None = None, interval: float = 0.5,
                 limit: float = 120.0) -> None:
        self._seeder = FleetSeeder(url, admin_token="")
        self._seeder.tokens = dict(tokens)
        self._held = held or {}
        self._interval = interval
        self._limit = limit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Beater:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._seeder.close()

    def _run(self) -> None:
        deadline = time.monotonic() + self._limit
        while not self._stop.is_set() and time.monotonic() < deadline:
            for cluster in self._seeder.tokens:
                self._seeder.heartbeat(cluster, held=self._held.get(cluster))
            self._stop.wait(self._interval)


def export_body(cluster: str, name: str, *, namespace: str = NAMESPACE,
                created: str = "2026-01-01T12:00:00.000Z", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
            **spec,
            "serviceReference": {
                "clusterId": cluster,
                "namespace": namespace,
                "name": name,
                "resourceVersion": "1",
                "exportedSince": created,
                "exportCreationTimestamp": created,
            },
        },
    }


def seed_demo(seeder: FleetSeeder) -> None:
    """The small fleet the tests and screenshots show: two Ready clusters, a Pending one and
    `edge`, which imports only namespace shop; demo/web exported by east and west with
    endpoints, demo/api in a type conflict (east's ClusterSetIP export is older, so it
    wins), shop/cart from west alone."""
    for cluster in CLUSTERS:
        seeder.register(cluster, heartbeat=cluster != "north")
    seeder.register("edge", spec={"importNamespaces": ["shop"]})
    seeder.export("east", "web", created="2026-01-01T10:00:00.000Z")
    seeder.export("west", "web", created="2026-01-01T11:00:00.000Z")
    seeder.export("east", "api", created="2026-01-01T10:00:00.000Z")
    seeder.export("west", "api", type="Headless", created="2026-01-01T11:00:00.000Z")
    seeder.export("west", "cart", namespace="shop")
    seeder.slice("east", "web", ready=2, total=3)
    seeder.slice("west", "web", ready=2, total=2)
