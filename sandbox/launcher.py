"""`mcsync sandbox`: a whole fleet on one machine, for trying mcsync without Kubernetes.

It starts, on loopback ports, what an operator would run (docs/reference.md#sandbox): a hub over a
SQLite file in a new temporary directory, three emulated member clusters (`python -m
sandbox.emulator`, with the EndpointSlice stand-in on so that applied Services get
endpoints, each from its own documentation range) and one agent per cluster, registered
on the hub with a token of its own. Once every cluster has sent a heartbeat it prints the
lines a user needs — `hub:`, `console:`, `reader token:`, `kubeconfig <cluster>:` — and
waits.

Every part is a child process, so that the hub and the agents run exactly as installed
and the launcher holds no thread of its own (which makes the fork of each child safe).
Ctrl-C (SIGINT), SIGTERM or SIGHUP (the terminal closed) stops them all: agents first
(they stop exporting cleanly), then the hub and the clusters, each with SIGTERM and,
after a grace period, SIGKILL; the directory (tokens, database, logs) goes with them.
Whatever way the launcher ends, nothing stays: on Linux each child gets SIGTERM from the
kernel if the launcher dies (`PR_SET_PDEATHSIG`), and a small reaper process of its own
session (`sandbox.reaper`) removes the directory and anything still running when the
launcher was killed without cleaning up (`kill -9`). A part that exits by itself stops
the sandbox, with its log's path (the directory is then kept, for that log).

One agent can be stopped and started again while the sandbox runs, from another
terminal (`mcsync sandbox stop-agent NAME` / `start-agent NAME`), to show a lost cluster:
it turns Stale, its endpoints are withdrawn and importers fail over
(docs/reference.md#sandbox). Those commands talk to the launcher over a Unix socket in
its directory (mode 0700, so only its user reaches it); the launcher answers between
its half-second looks at its parts, so it still needs no thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TextIO

import httpx

# Cluster name -> the range its fake pod IPs come from: the three IPv4 documentation
# ranges of RFC 5737, which Kubernetes accepts as endpoint addresses and which route
# nowhere, so no demo address can ever be mistaken for a real one.
CLUSTERS: dict[str, str] = {
    "east": "192.0.2.0/24",
    "north": "198.51.100.0/24",
    "west": "203.0.113.0/24",
}
# Each cluster's ClusterProperty objects (docs/reference.md#sandbox): where it runs, so that
# cluster selection (`mcsync.io/cluster-selectors`, `mcsync.io/import-clusters`) can be
# tried here. east and north share a region, west is another.
REGION_PROPERTY = "region.topology.mcsync.io"
ZONE_PROPERTY = "zone.topology.mcsync.io"
CLUSTER_PROPERTIES: dict[str, dict[str, str]] = {
    "east": {REGION_PROPERTY: "us-east", ZONE_PROPERTY: "us-east-1a"},
    "north": {REGION_PROPERTY: "us-east", ZONE_PROPERTY: "us-east-1b"},
    "west": {REGION_PROPERTY: "us-west", ZONE_PROPERTY: "us-west-2a"},
}
DEMO_NAMESPACE = "demo"  # created in every cluster, so an export is imported everywhere
CONTROL_SOCKET = "control.sock"
CONTROL_TIMEOUT = 60.0
CLUSTER_TTL_SECONDS = 15  # a stopped agent shows Stale within seconds, not the default 90
START_TIMEOUT = 90.0
STOP_GRACE = 10.0
# What the sandbox runs needs the programs' extras (`pip install 'mcsync[hub,agent]'`).
REQUIRED_MODULES = ("fastapi", "uvicorn", "sqlalchemy", "aiosqlite", "alembic", "kubernetes")
EXTRAS_HINT = "pip install 'mcsync[hub,agent]'"


class SandboxError(Exception):
    """The sandbox could not start (one line for the user, exit code 1)."""


class Stopped(Exception):
    """SIGINT or SIGTERM arrived while the sandbox was starting."""


def missing_extras() -> list[str]:
    """The modules of `REQUIRED_MODULES` that cannot be imported here."""
    missing = []
    for name in REQUIRED_MODULES:
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    return missing


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec function that makes the kernel send the child SIGTERM when the launcher
    dies (Linux `prctl(PR_SET_PDEATHSIG)`), or None where there is no such thing. libc is
    loaded here, before any fork: the child only makes one system call."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM))

    return preexec


@dataclass
class Child:
    """One process the sandbox started, with the log file its output goes to."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class Sandbox:
    """The fleet's processes and files; `start()`, then `wait()`, then `stop()`."""

    directory: Path
    hub_port: int = 0
    clusters: dict[str, str] = field(default_factory=lambda: dict(CLUSTERS))
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    reader_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    children: list[Child] = field(default_factory=list)
    # The write end of the reaper's pipe (`sandbox.reaper`): each part's pid goes there.
    reaper: TextIO | None = None
    control: socket.socket | None = None
    # Set by the SIGINT/SIGTERM handler; the loops below look at it between short sleeps
    # (a signal also cuts a sleep short), so a handler never has to take a lock.
    stop_requested: bool = False

    def __post_init__(self) -> None:
        self.hub_port = self.hub_port or free_port()
        self._preexec = _die_with_parent()
        self._env = {k: v for k, v in os.environ.items()
                     if not k.startswith(("MCSYNC_", "OTEL_"))}  # the user's hub settings
        # The children import the packages beside this one (installed or a checkout).
        root = str(Path(__file__).resolve().parents[1])
        self._env["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        self._env["PYTHONUNBUFFERED"] = "1"

    @property
    def hub_url(self) -> str:
        return f"http://127.0.0.1:{self.hub_port}"

    def kubeconfig(self, cluster: str) -> Path:
        return self.directory / f"{cluster}.kubeconfig"

    # -- starting ----------------------------------------------------------------------------

    def _spawn(self, name: str, args: Sequence[str], **env: str) -> Child:
        log = self.directory / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [sys.executable, *args], env={**self._env, **env}, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.directory,
                # Its own process group: the terminal's Ctrl-C reaches the launcher only,
                # which then stops each part in order.
                process_group=0, preexec_fn=self._preexec,
            )
        child = Child(name, process, log)
        self.children.append(child)
        if self.reaper is not None:
            with contextlib.suppress(OSError):
                self.reaper.write(f"pid {process.pid}\n")
                self.reaper.flush()
        return child

    def _wait(self, what: str, ready: Callable[[], bool], *, children: Sequence[Child]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():
            for child in children:
                if child.process.poll() is not None:
                    said = _last_line(child.log)
                    raise SandboxError(f"{child.name} exited with code "
                                       f"{child.process.returncode} while starting"
                                       + (f" ({said})" if said else "") + f"; see {child.log}")
            if time.monotonic() > deadline:
                raise SandboxError(f"{what} did not happen within {START_TIMEOUT:.0f} s; "
                                   f"see the logs in {self.directory}")
            time.sleep(0.2)
            if self.stop_requested:
                raise Stopped

    def start(self) -> None:
        hub = self._spawn(
            "hub", ["-m", "hub", "serve", "--host", "127.0.0.1", "--port", str(self.hub_port),
                    "--database-url", f"sqlite:///{self.directory / 'mcsync.db'}",
                    "--cluster-ttl", str(CLUSTER_TTL_SECONDS), "--log-format", "text"],
            MCSYNC_ADMIN_TOKEN=self.admin_token, MCSYNC_READER_TOKEN=self.reader_token)
        emulators = {}
        for cluster, cidr in self.clusters.items():
            port = free_port()
            emulators[cluster] = (port, self._spawn(f"cluster-{cluster}", [
                "-m", "sandbox.emulator", "--host", "127.0.0.1", "--port", str(port),
                "--name", cluster, "--kubeconfig", str(self.kubeconfig(cluster)),
                "--namespaces", DEMO_NAMESPACE, "--endpoint-cidr", cidr,
                *_property_flags(cluster)]))
        self._wait("the hub's /readyz answering 200", lambda: _answers(f"{self.hub_url}/readyz"),
                   children=[hub])
        for cluster, (port, emulator) in emulators.items():
            self._wait(f"cluster {cluster} answering", _answering(f"http://127.0.0.1:{port}/version"),
                       children=[emulator])
        agents = [self._start_agent(cluster) for cluster in self.clusters]
        self._wait("a heartbeat from every agent", self._all_ready, children=agents)

    def _start_agent(self, cluster: str) -> Child:
        self._register(cluster)
        return self._spawn_agent(cluster)

    def token_file(self, cluster: str) -> Path:
        return self.directory / f"{cluster}.token"

    def _register(self, cluster: str) -> None:
        answer = httpx.post(f"{self.hub_url}/api/v1/clusters",
                            json={"metadata": {"name": cluster}},
                            headers={"Authorization": f"Bearer {self.admin_token}"}, timeout=30)
        if answer.status_code not in (200, 201):
            raise SandboxError(f"the hub refused to register {cluster}: "
                               f"{answer.status_code} {answer.text}")
        token_file = self.token_file(cluster)
        token_file.touch(mode=0o600)
        token_file.write_text(answer.json()["token"])

    def _spawn_agent(self, cluster: str) -> Child:
        return self._spawn(f"agent-{cluster}", [
            "-m", "member", "--hub-url", self.hub_url, "--cluster-id", cluster,
            "--token-file", str(self.token_file(cluster)),
            "--kubeconfig", str(self.kubeconfig(cluster)),
            "--metrics-host", "127.0.0.1", "--metrics-port", "0", "--log-format", "text",
            # Three beats per TTL (docs/reference.md#failover), whether or not the hub's answer says
            # its TTL.
            "--heartbeat-interval", str(CLUSTER_TTL_SECONDS / 3)])

    def _all_ready(self) -> bool:
        try:
            answer = httpx.get(f"{self.hub_url}/api/v1/clusters", timeout=5,
                               headers={"Authorization": f"Bearer {self.reader_token}"})
        except httpx.HTTPError:
            return False
        if answer.status_code != 200:
            return False
        states = {c["metadata"]["name"]: c.get("status", {}).get("state")
                  for c in answer.json().get("items", [])}
        return all(states.get(cluster) == "Ready" for cluster in self.clusters)

    # -- running and stopping -----------------------------------------------------------------

    def wait(self) -> Child | None:
        """Block until a stop is asked (None) or a part exits by itself (that part),
        answering `stop-agent` / `start-agent` requests meanwhile."""
        while not self.stop_requested:
            for child in self.children:
                if child.process.poll() is not None:
                    return child
            if self.control is None:
                time.sleep(0.5)
                continue
            readable, _, _ = select.select([self.control], [], [], 0.5)
            if readable:
                self._answer_control()
        return None

    def listen(self) -> None:
        """Open the control socket `stop-agent` / `start-agent` connect to."""
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        control.bind(str(self.directory / CONTROL_SOCKET))
        control.listen(4)
        control.setblocking(False)
        self.control = control

    def _answer_control(self) -> None:
        assert self.control is not None
        try:
            conn, _ = self.control.accept()
        except (BlockingIOError, InterruptedError):
            return
        with conn:
            conn.settimeout(5.0)
            try:
                request = conn.recv(1024).decode("utf-8", "replace").split()
                answer = self.handle(request)
                conn.sendall(answer.encode("utf-8") + b"\n")
            except OSError:
                return

    def _agent(self, cluster: str) -> Child | None:
        return next((c for c in self.children if c.name == f"agent-{cluster}"), None)

    def handle(self, request: Sequence[str]) -> str:
        """One control request, `stop-agent NAME` or `start-agent NAME`; the answer line
        (starting `ok:` or `error:`)."""
        if len(request) != 2 or request[0] not in ("stop-agent", "start-agent"):
            return "error: expected stop-agent NAME or start-agent NAME"
        verb, cluster = request
        if cluster not in self.clusters:
            return (f"error: the sandbox has no cluster {cluster!r}; its clusters: "
                    f"{', '.join(self.clusters)}")
        agent = self._agent(cluster)
        if verb == "stop-agent":
            if agent is None:
                return f"error: the agent of {cluster} is not running"
            self.children.remove(agent)  # its exit is asked for, not a failure
            agent.process.terminate()
            try:
                agent.process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                agent.process.kill()
                agent.process.wait()
            return (f"ok: the agent of {cluster} stopped; the hub shows {cluster} Stale "
                    f"within {CLUSTER_TTL_SECONDS} s and withdraws its endpoints "
                    f"(mcsync sandbox start-agent {cluster} starts it again)")
        if agent is not None:
            return f"error: the agent of {cluster} is running already"
        self._spawn_agent(cluster)
        return f"ok: the agent of {cluster} started; its cluster is Ready at its first heartbeat"

    def stop(self) -> None:
        """SIGTERM to the agents, then to the hub and the clusters; SIGKILL to any part
        still running after the grace period. Safe to call twice."""
        agents = [c for c in self.children if c.name.startswith("agent-")]
        others = [c for c in self.children if c not in agents]
        for group in (agents, others):
            for child in group:
                if child.process.poll() is None:
                    child.process.terminate()
            deadline = time.monotonic() + STOP_GRACE
            for child in group:
                try:
                    child.process.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.process.kill()
                    child.process.wait()


def _property_flags(cluster: str) -> list[str]:
    """The emulator's flags that serve the About API with the cluster's properties."""
    flags = ["--about-api"]
    for name, value in CLUSTER_PROPERTIES.get(cluster, {}).items():
        flags += ["--cluster-property", f"{name}={value}"]
    return flags


def _properties_line(cluster: str) -> str:
    values = CLUSTER_PROPERTIES.get(cluster, {})
    return ", ".join(f"{name}={values[name]}" for name in sorted(values)) or "<none>"


def _last_line(log: Path) -> str:
    """The last line a part wrote (its one-line start-up error, as every program prints)."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    return next((line for line in reversed(lines) if line), "")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _answering(url: str) -> Callable[[], bool]:
    return lambda: _answers(url)


def run(*, hub_port: int = 0, out: TextIO, err: TextIO) -> int:
    """`mcsync sandbox`: start the fleet, print how to reach it, stop it on SIGINT/SIGTERM.

    Exit code 0 after a requested stop, 1 when it could not start or a part died."""
    missing = missing_extras()
    if missing:
        print(f"error: mcsync sandbox runs the hub and the agent, which need their extras: "
              f"{EXTRAS_HINT} (missing: {', '.join(missing)})", file=err)
        return 1
    if hub_port and not _free(hub_port):
        print(f"error: --hub-port: 127.0.0.1:{hub_port} is in use by another process: stop "
              "it, or choose another --hub-port (MCSYNC_HUB_PORT; 0 picks a free one)",
              file=err)
        return 1
    directory = Path(tempfile.mkdtemp(prefix="mcsync-sandbox-"))
    sandbox = Sandbox(directory=directory, hub_port=hub_port)

    def request_stop(signum: int, frame: FrameType | None) -> None:
        sandbox.stop_requested = True

    previous = {sig: signal.signal(sig, request_stop)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    reaper = _start_reaper(sandbox)
    keep = False
    try:
        print(f"starting a hub and {len(sandbox.clusters)} emulated clusters "
              f"({', '.join(sandbox.clusters)}) in {directory} ...", file=err, flush=True)
        try:
            sandbox.listen()
            sandbox.start()
        except Stopped:
            return 0
        except (SandboxError, OSError, httpx.HTTPError) as exc:
            print(f"error: the sandbox could not start: {exc}", file=err)
            keep = True
            return 1
        _print_ready(sandbox, out)
        print("Ctrl-C stops every part of the sandbox and deletes its directory.", file=err,
              flush=True)
        died = sandbox.wait()
        if died is not None:
            print(f"error: {died.name} exited with code {died.process.returncode}; its log: "
                  f"{died.log}; stopping the sandbox", file=err)
            keep = True
            return 1
        return 0
    finally:
        sandbox.stop()
        if sandbox.control is not None:
            sandbox.control.close()
        if keep:
            print(f"the sandbox's files are kept in {directory}", file=err)
        else:
            with contextlib.suppress(OSError):
                shutil.rmtree(directory)
        _release_reaper(sandbox, reaper)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start_reaper(sandbox: Sandbox) -> subprocess.Popen[bytes] | None:
    """`sandbox.reaper` in a session of its own, reading the pipe the launcher writes."""
    read_end, write_end = os.pipe()
    try:
        reaper = subprocess.Popen(
            [sys.executable, "-m", "sandbox.reaper", str(sandbox.directory)],
            stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=sandbox._env, start_new_session=True,
        )
    except OSError:
        os.close(write_end)
        return None  # the launcher still cleans up after itself; only a kill -9 is not
    finally:
        os.close(read_end)
    sandbox.reaper = os.fdopen(write_end, "w")
    return reaper


def _release_reaper(sandbox: Sandbox, reaper: subprocess.Popen[bytes] | None) -> None:
    """Tell the reaper the launcher cleaned up itself; it exits without touching anything."""
    if sandbox.reaper is not None:
        with contextlib.suppress(OSError):
            sandbox.reaper.write("done\n")
            sandbox.reaper.close()
        sandbox.reaper = None
    if reaper is not None:
        try:
            reaper.wait(10)
        except subprocess.TimeoutExpired:
            reaper.kill()
            reaper.wait()


def running_sandboxes() -> list[Path]:
    """The control sockets of this user's running sandboxes (newest first)."""
    found = []
    for path in Path(tempfile.gettempdir()).glob(f"mcsync-sandbox-*/{CONTROL_SOCKET}"):
        try:
            if path.stat().st_uid != os.geteuid():
                continue
            mtime = path.stat().st_mtime
        except OSError:
            continue
        found.append((mtime, path))
    return [path for _, path in sorted(found, reverse=True)]


def control(verb: str, cluster: str, *, out: TextIO, err: TextIO) -> int:
    """`mcsync sandbox stop-agent|start-agent NAME`, run beside a running sandbox: asks
    it over its control socket. 0 when done, 1 when refused or no sandbox runs."""
    answers = []
    for path in running_sandboxes():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(CONTROL_TIMEOUT)
            try:
                conn.connect(str(path))
            except OSError:
                continue  # a sandbox that is gone (killed before its reaper cleaned up)
            try:
                conn.sendall(f"{verb} {cluster}\n".encode())
                answer = conn.makefile("r", encoding="utf-8").readline().strip()
            except OSError as exc:
                answer = f"error: the sandbox in {path.parent} did not answer: {exc}"
        answers.append((path.parent, answer))
        break  # the newest running sandbox
    if not answers:
        print("error: no running sandbox found; start one with `mcsync sandbox` (in another "
              "terminal)", file=err)
        return 1
    _, answer = answers[0]
    if answer.startswith("ok: "):
        print(answer.removeprefix("ok: "), file=out)
        return 0
    print(answer if answer.startswith("error: ") else f"error: {answer}", file=err)
    return 1


def _print_ready(sandbox: Sandbox, out: TextIO) -> None:
    admin_file = sandbox.directory / "admin.token"
    admin_file.touch(mode=0o600)
    admin_file.write_text(sandbox.admin_token)
    lines = [
        f"hub: {sandbox.hub_url}",
        f"console: {sandbox.hub_url}/ui/",
        f"reader token: {sandbox.reader_token}",
        f"admin token file: {admin_file}",
        *(f"kubeconfig {cluster}: {sandbox.kubeconfig(cluster)}" for cluster in sandbox.clusters),
        *(f"properties {cluster}: {_properties_line(cluster)}" for cluster in sandbox.clusters),
        f"logs: {sandbox.directory}",
    ]
    out.write("\n".join(lines) + "\n")
    out.flush()
