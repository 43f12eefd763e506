"""`mcsync sandbox` as a user runs it: start it, use kubectl on its clusters, Ctrl-C.

The quickstart's no-cluster path (docs/quickstart.md) in one test: the sandbox prints its
lines, `kubectl create namespace` (a protobuf body) and `kubectl apply` of a Service and a
ServiceExport in one cluster make a ServiceImport, with the exporting cluster's endpoints,
appear in another, `mcsync` reads the fleet with the printed reader token, and SIGINT
leaves no process and no directory behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cli.conftest import REPO, clean_env, cli_command, ok, run_cli
from tests.member.agent_support import wait_for
from tests.support.processes import spawn

KUBECTL = shutil.which("kubectl")
pytestmark = [pytest.mark.e2e, pytest.mark.slow,
              pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")]
READY_TIMEOUT = 180.0
MANIFEST = """\
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: shop}
spec:
  selector: {app: cart}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ServiceExport
metadata: {name: cart, namespace: shop}
"""


def children_of(pid: int) -> list[int]:
    """Every descendant of `pid` (from /proc), so none can be missed as an orphan."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        found += kids
        frontier += kids
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Launched:
    """The running `mcsync sandbox` process and the `key: value` lines it printed."""

    def __init__(self) -> None:
        self.process = spawn(
            cli_command("sandbox"), env=clean_env(), cwd=REPO, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: dict[str, str] = {}
        self._done = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            key, _, value = line.rstrip("\n").partition(": ")
            self.lines[key] = value
            if key == "logs":
                self._done.set()
        self._done.set()

    def wait_ready(self) -> None:
        if not self._done.wait(READY_TIMEOUT) or "logs" not in self.lines:
            self.process.kill()
            _, err = self.process.communicate(timeout=30)
            raise AssertionError(f"the sandbox printed {self.lines}; stderr: {err}")

    def kubectl(self, cluster: str, *args: str, stdin: str | None = None) -> str:
        assert KUBECTL is not None
        done = subprocess.run([KUBECTL, "--kubeconfig", self.lines[f"kubeconfig {cluster}"],
                               *args], input=stdin, capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout


@pytest.fixture
def sandbox() -> Iterator[Launched]:
    launched = Launched()
    try:
        launched.wait_ready()
        yield launched
    finally:
        if launched.process.poll() is None:
            os.killpg(launched.process.pid, signal.SIGKILL)
            launched.process.wait(30)


def test_sandbox_exports_from_one_cluster_imports_in_another_and_stops_on_ctrl_c(
        sandbox: Launched) -> None:
    lines = sandbox.lines
    assert lines["console"] == lines["hub"] + "/ui/"
    assert set(lines) >= {"hub", "console", "reader token", "kubeconfig east",
                          "kubeconfig north", "kubeconfig west"}
    directory = Path(lines["logs"])
    assert all(Path(lines[f"kubeconfig {c}"]).is_file() for c in ("east", "north", "west"))

    for cluster in ("east", "west"):
        assert "namespace/shop created" in sandbox.kubectl(cluster, "create", "namespace", "shop")
    applied = sandbox.kubectl("east", "apply", "-f", "-", stdin=MANIFEST)
    assert "service/cart created" in applied
    assert "serviceexport.multicluster.x-k8s.io/cart created" in applied

    def imported() -> dict[str, Any] | None:
        out = sandbox.kubectl("west", "get", "serviceimports,endpointslices", "-n", "shop",
                              "-o", "json")
        items = json.loads(out)["items"]
        kinds = {item["kind"] for item in items}
        return {"items": items} if kinds == {"ServiceImport", "EndpointSlice"} else None

    wait_for(lambda: imported() is not None, what="ServiceImport cart in west", timeout=90)
    found = imported()
    assert found is not None
    (service_import,) = [i for i in found["items"] if i["kind"] == "ServiceImport"]
    assert [p["port"] for p in service_import["spec"]["ports"]] == [80]
    addresses = sorted(a for i in found["items"] if i["kind"] == "EndpointSlice"
                       for e in i["endpoints"] for a in e["addresses"])
    assert addresses and all(a.startswith("192.0.2.") for a in addresses)  # east's range

    reader = {"MCSYNC_HUB_URL": lines["hub"], "MCSYNC_TOKEN": lines["reader token"]}
    imports = ok(run_cli("imports", env=reader))
    assert "cart" in imports and "east" in imports
    status = ok(run_cli("status", env=reader))  # exit 0: every cluster Ready, no conflict
    assert "Clusters:   3 registered: 3 Ready, 0 Stale, 0 Pending" in status
    assert "All well" in status
    # Each cluster's region and zone, printed and reported: selection can be tried here.
    assert lines["properties east"] == (
        "region.topology.mcsync.io=us-east, zone.topology.mcsync.io=us-east-1a")
    assert lines["properties west"].startswith("region.topology.mcsync.io=us-west,")
    wait_for(lambda: "region.topology.mcsync.io=us-east" in ok(
        run_cli("describe", "cluster", "north", env=reader)),
        what="north's properties on the hub", timeout=30)

    parts = children_of(sandbox.process.pid)
    assert len(parts) >= 7  # a hub, three clusters, three agents
    sandbox.process.send_signal(signal.SIGINT)
    assert sandbox.process.wait(60) == 0
    deadline = time.monotonic() + 10
    while any(alive(p) for p in parts) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in parts if alive(p)] == []
    assert not directory.exists()



def test_the_sandboxs_clusters_serve_kubernetes_and_no_test_controls(sandbox: Launched) -> None:
    """The emulator's test controls (pause, inject-conflict, compact, request counters) are
    for the project's tests: in `mcsync sandbox` each cluster's `/emulator/…` is a 404, as on
    a real API server, and nothing a user sends there pauses or changes the cluster."""
    for cluster in ("east", "north", "west"):
        kubeconfig = yaml.safe_load(Path(sandbox.lines[f"kubeconfig {cluster}"]).read_text())
        server = kubeconfig["clusters"][0]["cluster"]["server"]
        for method, action in (("GET", "state"), ("POST", "pause"), ("POST", "compact"),
                               ("GET", "requests"), ("POST", "inject-conflict")):
            answer = httpx.request(method, f"{server}/emulator/{action}", timeout=10,
                                   content=b'{"resource": "services", "name": "x"}')
            assert answer.status_code == 404, (cluster, method, action, answer.text)
        assert httpx.get(f"{server}/version", timeout=10).status_code == 200
        assert "namespace/probe created" in sandbox.kubectl(cluster, "create", "namespace",
                                                            "probe")


def test_a_part_that_dies_stops_the_sandbox_and_keeps_its_logs(sandbox: Launched) -> None:
    directory = Path(sandbox.lines["logs"])
    parts = children_of(sandbox.process.pid)
    agent = next(p for p in parts
                 if b"member" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0"))
    os.kill(agent, signal.SIGKILL)
    assert sandbox.process.wait(60) == 1
    assert sandbox.process.stderr is not None
    err = sandbox.process.stderr.read()
    assert "exited with code -9; its log: " in err and "stopping the sandbox" in err
    deadline = time.monotonic() + 10
    while any(alive(p) for p in parts) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in parts if alive(p)] == []
    assert directory.is_dir()  # kept, so its logs can be read
    shutil.rmtree(directory)
