"""The hub as a real process (SPEC §5, §7): durability across kill -9, the generated admin
token, graceful SIGTERM, and a watch on one replica seeing a write through another.

Each test starts `python -m hub serve` on a free loopback port in its own working
directory (where the default admin token file lands) and waits for `/readyz`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.processes import spawn

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def export_body(cluster: str, *, name: str = "web") -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {
            "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
            "serviceReference": {
                "clusterId": cluster,
                "namespace": "demo",
                "name": name,
                "resourceVersion": "1",
                "exportedSince": "2026-01-01T12:00:00.000Z",
                "exportCreationTimestamp": "2026-01-01T12:00:00.000Z",
            },
        },
    }


class HubProcess:
    """One `python -m hub serve` process; its combined output goes to a log file."""

    def __init__(self, *, database_url: str, cwd: Path, env: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cwd = cwd
        self.log_path = cwd / f"hub-{self.port}.log"
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("MCSYNC_", "OTEL_"))}
        clean.update({"PYTHONPATH": str(REPO), **(env or {})})
        self._log = self.log_path.open("w")
        self.process = spawn(
            [
                sys.executable,
                "-m",
                "hub",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--database-url",
                database_url,
                "--log-format",
                "json",
            ],
            cwd=cwd,
            env=clean,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the hub exited early:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"the hub did not get ready:\n{self.log()}")

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=DEADLINE)
        finally:
            self._log.close()


@pytest.fixture
def hubs() -> Iterator[list[HubProcess]]:
    started: list[HubProcess] = []
    yield started
    for hub in started:
        if hub.process.poll() is None:
            hub.process.kill()
            hub.process.wait(timeout=DEADLINE)


def test_export_survives_kill_9_and_sigterm_exits_0(
    database_url: str, tmp_path: Path, hubs: list[HubProcess]
) -> None:
    first = HubProcess(database_url=database_url, cwd=tmp_path)
    hubs.append(first)
    first.wait_ready()

    token_file = tmp_path / "mcsync-admin-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    admin_token = token_file.read_text().strip()
    admin = {"Authorization": f"Bearer {admin_token}"}

    registered = httpx.post(
        f"{first.url}/api/v1/clusters", json={"metadata": {"name": "east"}}, headers=admin
    )
    assert registered.status_code == 201, registered.text
    member = {"Authorization": f"Bearer {registered.json()['token']}"}
    path = "/api/v1/clusters/east/serviceexports/demo/web"
    stored = httpx.put(f"{first.url}{path}", json=export_body("east"), headers=member)
    assert stored.status_code == 201, stored.text

    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    log = first.log()
    assert str(token_file.resolve()) in log  # the log says where the token is …
    assert admin_token not in log  # … and never what it is
    assert registered.json()["token"] not in log

    second = HubProcess(database_url=database_url, cwd=tmp_path)
    hubs.append(second)
    second.wait_ready()
    assert token_file.read_text().strip() == admin_token  # reused, not regenerated
    again = httpx.get(f"{second.url}{path}", headers=member)
    assert again.status_code == 200, again.text
    assert (
        again.json()["metadata"]["resourceVersion"] == stored.json()["metadata"]["resourceVersion"]
    )

    started = time.monotonic()
    assert second.stop(signal.SIGTERM) == 0, second.log()
    assert time.monotonic() - started < DEADLINE
    for line in second.log().splitlines():
        json.loads(line)  # --log-format json: every line is one JSON object


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_watch_on_one_replica_sees_a_write_through_another(
    database_url: str, tmp_path: Path, hubs: list[HubProcess]
) -> None:
    env = {"MCSYNC_ADMIN_TOKEN": "shared-admin-token-for-two-replicas"}
    admin = {"Authorization": f"Bearer {env['MCSYNC_ADMIN_TOKEN']}"}
    a = HubProcess(database_url=database_url, cwd=tmp_path, env=env)
    hubs.append(a)
    a.wait_ready()
    b = HubProcess(database_url=database_url, cwd=tmp_path, env=env)
    hubs.append(b)
    b.wait_ready()

    registered = httpx.post(
        f"{b.url}/api/v1/clusters", json={"metadata": {"name": "east"}}, headers=admin
    )
    assert registered.status_code == 201
    member = {"Authorization": f"Bearer {registered.json()['token']}"}

    async def scenario() -> dict[str, object]:
        async with (
            httpx.AsyncClient(timeout=DEADLINE) as client,
            client.stream(
                "GET",
                f"{a.url}/api/v1/clusters/east/serviceexports?watch=true&timeoutSeconds=120",
                headers=member,
            ) as stream,
        ):
            assert stream.status_code == 200
            written = await client.put(
                f"{b.url}/api/v1/clusters/east/serviceexports/demo/web",
                json=export_body("east"),
                headers=member,
            )
            assert written.status_code == 201, written.text
            async with asyncio.timeout(DEADLINE):
                async for line in stream.aiter_lines():
                    event: dict[str, object] = json.loads(line)
                    if event["type"] != "BOOKMARK":
                        return event
        raise AssertionError("the watch ended without an event")

    event = asyncio.run(scenario())
    assert event["type"] == "ADDED"
    assert event["object"]["metadata"]["name"] == "web"  # type: ignore[index]
    assert a.stop() == 0
    assert b.stop() == 0
