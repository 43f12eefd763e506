"""Pytest fixtures and helpers that give a test one or more emulated Kubernetes clusters.

Use from another test package by importing the fixtures in that package's conftest.py
(`pytest_plugins` only works in the root conftest, which another engineer owns):

    from tests.kube.fixtures import kube_cluster, kube_cluster_factory  # noqa: F401

- `kube_cluster`: one emulator in a background thread on a free loopback port, with
  `.url`, `.kubeconfig` (a file in tmp_path), `.api_client()` (an official-client
  `ApiClient` for it; nothing global is configured) and `.state` (in-process controls:
  `compact()`, `close_watches()`, `pause()`/`unpause()`, `count()`, `writes()`,
  `inject_conflict()`, `create()/get()/list()`...). Stopped after the test.
- `kube_cluster_factory(name, mcs_versions=..., history=..., bookmark_interval=...,
  namespaces=..., about_api=...)`: as many clusters as a test needs, all stopped after it
  (`about_api=True`: the cluster also serves KEP-2149's `ClusterProperty` and its CRD).

Every cluster starts with the Namespaces a new cluster has (`default`, `kube-system`,
`kube-public`, `kube-node-lease`) plus `namespaces` (default: `mcsync-system`, where the
member chart installs the agent). A create in any other namespace over HTTP is a 404 until
the test creates it (`state.create_namespace(...)` or the API); `state.create(...)`
creates the namespace of what it seeds.
- `start_emulator_process(...)`: an emulator as a separate process (for end-to-end tests
  with agent processes), controlled over HTTP at `/emulator/…`; call `.stop()`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from sandbox.emulator.kubeconfig import write_kubeconfig
from sandbox.emulator.resources import DEFAULT_MCS_VERSIONS
from sandbox.emulator.server import EmulatorServer
from sandbox.emulator.state import EmulatorState
from tests.support.processes import spawn

REPO_ROOT = Path(__file__).resolve().parents[2]
# Namespaces every fixture cluster has besides the system ones: where mcsync is installed.
FIXTURE_NAMESPACES: tuple[str, ...] = ("mcsync-system",)


@dataclass
class KubeCluster:
    """A running emulated cluster (in-process server thread)."""

    name: str
    server: EmulatorServer
    kubeconfig: Path
    _clients: list[client.ApiClient] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def state(self) -> EmulatorState:
        return self.server.state

    def api_client(self) -> client.ApiClient:
        """A fresh official-client ApiClient for this cluster, closed at teardown."""
        api = config.new_client_from_config(config_file=str(self.kubeconfig), context=self.name)
        self._clients.append(api)
        return api

    def stop(self) -> None:
        for api in self._clients:
            api.close()
        self._clients.clear()
        self.server.stop()


def start_kube_cluster(
    directory: Path,
    name: str = "member-1",
    *,
    mcs_versions: Sequence[str] = DEFAULT_MCS_VERSIONS,
    history: int = 1000,
    bookmark_interval: float = 5.0,
    namespaces: Sequence[str] = FIXTURE_NAMESPACES,
    about_api: bool = False,
    endpoint_cidr: str | None = None,
) -> KubeCluster:
    """Start an emulator thread and write `<directory>/<name>.kubeconfig` for it."""
    state = EmulatorState(mcs_versions=tuple(mcs_versions), history=history,
                          bookmark_interval=bookmark_interval, namespaces=tuple(namespaces),
                          about_api=about_api, endpoint_cidr=endpoint_cidr)
    server = EmulatorServer(state).start()
    kubeconfig = write_kubeconfig(directory / f"{name}.kubeconfig", name=name, url=server.url)
    return KubeCluster(name=name, server=server, kubeconfig=kubeconfig)


def _fixture_namespaces(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """A package's `kube_namespaces` fixture if it defines one (its tests write to those
    namespaces over HTTP), else `FIXTURE_NAMESPACES`."""
    try:
        return tuple(request.getfixturevalue("kube_namespaces"))
    except pytest.FixtureLookupError:
        return FIXTURE_NAMESPACES


@pytest.fixture
def kube_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[KubeCluster]:
    """One emulated cluster named `member-1` (both MCS versions served)."""
    cluster = start_kube_cluster(tmp_path, namespaces=_fixture_namespaces(request))
    try:
        yield cluster
    finally:
        cluster.stop()


KubeClusterFactory = Callable[..., KubeCluster]


@pytest.fixture
def kube_cluster_factory(tmp_path: Path,
                         request: pytest.FixtureRequest) -> Iterator[KubeClusterFactory]:
    """`factory(name, mcs_versions=..., history=..., bookmark_interval=..., namespaces=...,
    about_api=..., endpoint_cidr=...)` -> KubeCluster."""
    started: list[KubeCluster] = []

    def factory(name: str = "member-1", **kwargs: Any) -> KubeCluster:
        if any(c.name == name for c in started):
            raise ValueError(f"cluster {name!r} already started in this test")
        kwargs.setdefault("namespaces", _fixture_namespaces(request))
        cluster = start_kube_cluster(tmp_path, name, **kwargs)
        started.append(cluster)
        return cluster

    try:
        yield factory
    finally:
        for cluster in started:
            cluster.stop()


@dataclass
class EmulatorProcess:
    """An emulator running as its own process; controls are HTTP calls to /emulator/…."""

    name: str
    url: str
    kubeconfig: Path
    process: subprocess.Popen[str]

    def control(self, method: str, action: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}/emulator/{action}", data=data,
                                         method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_emulator_process(
    directory: Path,
    name: str = "member-1",
    *,
    mcs_versions: Sequence[str] = DEFAULT_MCS_VERSIONS,
    history: int = 1000,
    bookmark_interval: float = 5.0,
    port: int = 0,
    ready_timeout: float = 30.0,
    namespaces: Sequence[str] = FIXTURE_NAMESPACES,
    about_api: bool = False,
    test_controls: bool = True,
) -> EmulatorProcess:
    """Start `python -m sandbox.emulator` and wait for its ready line.

    `test_controls` (on for tests: `EmulatorProcess.control` needs them) serves `/emulator/…`.
    """
    kubeconfig = directory / f"{name}.kubeconfig"
    cmd = [
        sys.executable, "-m", "sandbox.emulator", "--host", "127.0.0.1", "--port", str(port),
        "--mcs-versions", ",".join(mcs_versions), "--history", str(history),
        "--bookmark-interval", str(bookmark_interval), "--kubeconfig", str(kubeconfig),
        "--name", name, "--namespaces", ",".join(namespaces),
        *(["--about-api"] if about_api else []),
        *(["--test-controls"] if test_controls else []),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    process = spawn(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                               text=True)
    stdout = process.stdout
    assert stdout is not None
    line: list[str] = []
    # readline() has no timeout: read in a thread and give up after ready_timeout.
    reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(ready_timeout)
    prefix = "emulator listening on "
    if not line or not line[0].startswith(prefix):
        process.kill()
        process.wait()
        raise RuntimeError(f"emulator process did not become ready: {line!r}")
    return EmulatorProcess(name=name, url=line[0][len(prefix):].strip(), kubeconfig=kubeconfig,
                           process=process)
