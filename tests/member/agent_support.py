"""Real parts for the agent's end-to-end tests: a hub process, agent processes, helpers.

* `hub_process` — `python -m hub serve` on a free loopback port over a SQLite file in
  tmp_path (or any `database` URL given to `HubProcess`), admin and reader tokens from
  `MCSYNC_ADMIN_TOKEN` / `MCSYNC_READER_TOKEN`; `register(cluster)` answers a member
  token. `stop()` / `start()` restart it on the same port and database (hub outages).
  (tests/member's own `hub_process` and `backend_hub` serve the same hub from the test
  process, `tests/support/inprocess_hub.py`: those tests do not test the hub's process.)
* `agent_factory(...)` — `python -m member` processes against an emulated cluster
  (`tests/kube`) and the hub (`new_agent(...)` outside a test's own fixtures); `.metric()`
  reads its `/metrics`, `.settled()` says its work queue is drained, `.stop()` sends SIGTERM
  and checks the exit code, `.kill()` is `kill -9`.
* `wait_for(...)` polls a condition with a generous deadline; tests never sleep-and-hope.

Every process writes its log to a file in tmp_path; a failed wait prints the logs' tails.
Processes start in process groups of their own (`tests.support.processes.spawn`), killed
at the latest when pytest exits or is interrupted.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.processes import spawn

REPO_ROOT = Path(__file__).resolve().parents[2]

DEADLINE = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCSYNC_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


_LOGS: list[tuple[str, Path]] = []


def forget_logs() -> None:
    """Stop printing the logs of processes a finished fixture started on timeouts."""
    _LOGS.clear()


def _logs() -> str:
    return "\n".join(f"--- {name} ---\n{_tail(path)}" for name, path in _LOGS)


class ProcessExited(RuntimeError):
    """A process a test waits on has exited: waiting longer cannot help."""


def wait_for(
    condition: Callable[[], Any],
    *,
    what: str,
    timeout: float = DEADLINE,
    interval: float = 0.2,
) -> Any:
    """Poll `condition` until it answers something truthy; fail naming `what` after timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except ProcessExited as exc:
            pytest.fail(f"{exc} while waiting for {what}\n{_logs()}")
        except Exception as exc:  # a condition may read a half-started process
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}\n{_logs()}")


# -- hub -------------------------------------------------------------------------------------


@dataclass
class HubProcess:
    """A hub server process over one database (by default a SQLite file in `directory`);
    restartable on the same port."""

    directory: Path
    port: int = field(default_factory=free_port)
    admin_token: str = field(default_factory=lambda: "admin-" + secrets.token_hex(16))
    reader_token: str = field(default_factory=lambda: "reader-" + secrets.token_hex(16))
    extra_args: list[str] = field(default_factory=list)
    database: str | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def database_url(self) -> str:
        return self.database or f"sqlite:///{self.directory / 'hub.db'}"

    @property
    def log_path(self) -> Path:
        return self.directory / "hub.log"

    def start(self) -> None:
        cmd = [
            sys.executable, "-m", "hub", "serve", "--host", "127.0.0.1",
            "--port", str(self.port), "--database-url", self.database_url, *self.extra_args,
        ]
        log = self.log_path.open("ab")
        self.process = spawn(
            cmd, cwd=REPO_ROOT,
            env=_env(MCSYNC_ADMIN_TOKEN=self.admin_token, MCSYNC_READER_TOKEN=self.reader_token),
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        if ("hub", self.log_path) not in _LOGS:
            _LOGS.append(("hub", self.log_path))
        wait_for(self._ready, what="the hub's /readyz")

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise ProcessExited(f"the hub exited with {self.process.returncode}")
        return self.answers_ready()

    def answers_ready(self) -> bool:
        """The hub's `/readyz` answers 200 (not yet, while it starts)."""
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, *, kill: bool = False) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def request(
        self, method: str, path: str, *, token: str | None = None, json: Any = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token or self.admin_token}"}
        return httpx.request(
            method, f"{self.url}{path}", headers=headers, json=json, params=params, timeout=10
        )

    def register(self, cluster: str) -> str:
        answer = self.request("POST", "/api/v1/clusters", json={"metadata": {"name": cluster}})
        assert answer.status_code in (200, 201), answer.text
        token: str = answer.json()["token"]
        return token

    def export(self, cluster: str, namespace: str, name: str) -> dict[str, Any] | None:
        answer = self.request(
            "GET", f"/api/v1/clusters/{cluster}/serviceexports/{namespace}/{name}"
        )
        if answer.status_code == 404:
            return None
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    def exports(self, cluster: str) -> list[dict[str, Any]]:
        answer = self.request("GET", f"/api/v1/clusters/{cluster}/serviceexports")
        assert answer.status_code == 200, answer.text
        items: list[dict[str, Any]] = answer.json()["items"]
        return items


_Hub = TypeVar("_Hub", bound=HubProcess)


def hub_directory(tmp_path: Path) -> Path:
    """The folder of a test's hub: its SQLite file and its log."""
    directory = tmp_path / "hub"
    directory.mkdir()
    return directory


def served(hub: _Hub) -> Iterator[_Hub]:
    """A hub fixture's body: start `hub`, hand it to the test, stop it after, and stop
    printing its log on later timeouts."""
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()
        forget_logs()


@pytest.fixture
def hub_process(tmp_path: Path) -> Iterator[HubProcess]:
    yield from served(HubProcess(directory=hub_directory(tmp_path)))


@pytest.fixture
def backend_hub(database_url: str, tmp_path: Path) -> Iterator[HubProcess]:
    """`hub_process` over a fresh database of the test variant's back end (`database_url`:
    SQLite and PostgreSQL); import it into the test module that wants both."""
    yield from served(HubProcess(directory=hub_directory(tmp_path), database=database_url))


# -- agents ----------------------------------------------------------------------------------


@dataclass
class AgentProcess:
    """One `python -m member` process (restartable with the same flags)."""

    name: str
    args: list[str]
    env: dict[str, str]
    directory: Path
    metrics_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.directory / f"agent-{self.name}.log"

    def start(self, *, wait_ready: bool = True) -> AgentProcess:
        log = self.log_path.open("ab")
        self.process = spawn(
            [sys.executable, "-m", "member", *self.args],
            cwd=REPO_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        if (f"agent {self.name}", self.log_path) not in _LOGS:
            _LOGS.append((f"agent {self.name}", self.log_path))
        if wait_ready:
            wait_for(self.ready, what=f"agent {self.name} /readyz")
        return self

    def ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise ProcessExited(f"agent {self.name} exited with {self.process.returncode}")
        try:
            return self._get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def _get(self, path: str) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=5)

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The value of sample `name` (with `labels` a subset of its labels), or None."""
        text = self._get("/metrics").text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in (labels or {}).items()
                ):
                    return float(sample.value)
        return None

    def settled(self, *, reconciles: float = 1) -> bool:
        """It reconciled at least `reconciles` keys and has nothing queued or in hand."""
        done = self.metric(
            "mcsync_agent_reconcile_duration_seconds_count", {"controller": "serviceexport"}
        )
        depth = self.metric("workqueue_depth", {"name": "serviceexport"})
        return (done or 0) >= reconciles and depth == 0

    def stop(self, *, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait; answers the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")


def new_agent(
    name: str,
    *,
    directory: Path,
    kubeconfig: Path,
    hub: HubProcess,
    cluster_id: str,
    token: str,
    extra: list[str] | None = None,
    start: bool = True,
    wait_ready: bool = True,
) -> AgentProcess:
    """An agent process named `name` (its token file and log in `directory`); the caller
    kills it. Flags after the defaults in `extra` override them (argparse: last one wins)."""
    token_file = directory / f"{name}.token"
    token_file.write_text(token + "\n")
    port = free_port()
    args = [
        "--hub-url", hub.url, "--cluster-id", cluster_id, "--token-file", str(token_file),
        "--kubeconfig", str(kubeconfig), "--metrics-port", str(port),
        "--metrics-host", "127.0.0.1", "--heartbeat-interval", "2", "--workers", "2",
        "--identity", name, "--log-level", "DEBUG", *(extra or []),
    ]
    agent = AgentProcess(name=name, args=args, env=_env(), directory=directory,
                         metrics_port=port)
    if start:
        agent.start(wait_ready=wait_ready)
    return agent


AgentFactory = Callable[..., AgentProcess]


@pytest.fixture
def agent_factory(tmp_path: Path) -> Iterator[AgentFactory]:
    """`factory(name, *, kubeconfig, hub, cluster_id, token, extra=[...], start=True)`."""
    agents: list[AgentProcess] = []

    def factory(name: str, **kwargs: Any) -> AgentProcess:
        start = kwargs.pop("start", True)
        wait_ready = kwargs.pop("wait_ready", True)
        agent = new_agent(name, directory=tmp_path, start=False, **kwargs)
        agents.append(agent)  # registered before it starts: a failed start is still killed
        if start:
            agent.start(wait_ready=wait_ready)
        return agent

    try:
        yield factory
    finally:
        for agent in agents:
            agent.kill()


# -- Kubernetes objects ------------------------------------------------------------------------


def service_body(
    name: str, namespace: str, *, ports: list[dict[str, Any]] | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "ClusterIP", "ports": ports or [{"name": "http", "port": 80}]}
    body.update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def service_export_body(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ServiceExport",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def source_slice_body(ip: str, namespace: str) -> dict[str, Any]:
    """The EndpointSlice `web-abc` of Service `web`, one ready endpoint at `ip`, as
    kube-controller-manager writes it: what an exporting cluster's slice looks like."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-abc",
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": "web",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
    }


def conditions_of(obj: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    """{type: (status, reason)} of an object's status conditions."""
    if not obj:
        return {}
    return {
        str(c.get("type")): (str(c.get("status")), str(c.get("reason")))
        for c in (obj.get("status") or {}).get("conditions") or []
    }


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for item in ((obj or {}).get("status") or {}).get("conditions") or []:
        if item.get("type") == type_:
            return dict(item)
    return None
