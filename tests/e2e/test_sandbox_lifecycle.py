"""`mcsync sandbox` leaves nothing behind whatever way it ends, and one agent can be
stopped and started beside it (docs/reference.md#sandbox): real processes throughout.

Each test runs its sandbox with a TMPDIR of its own, so that `stop-agent` finds this
sandbox and no other one running on the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, clean_env, cli_command, run_cli
from tests.e2e.test_sandbox import alive, children_of
from tests.member.agent_support import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
READY_TIMEOUT = 180.0


class Sandbox:
    def __init__(self, tmpdir: Path) -> None:
        self.env = clean_env({"TMPDIR": str(tmpdir)})
        self.process = subprocess.Popen(
            cli_command("sandbox"), env=self.env, cwd=REPO, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        self.lines: dict[str, str] = {}
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            key, _, value = line.rstrip("\n").partition(": ")
            self.lines[key] = value
            if key == "logs":
                self._ready.set()
        self._ready.set()

    def wait_ready(self) -> None:
        assert self._ready.wait(READY_TIMEOUT) and "logs" in self.lines, self.lines

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, env={"TMPDIR": self.env["TMPDIR"],
                                   "MCSYNC_HUB_URL": self.lines.get("hub", ""),
                                   "MCSYNC_TOKEN": self.lines.get("reader token", "")})

    def state(self, cluster: str) -> str:
        done = self.cli("clusters", cluster, "-o", "jsonpath={.status.state}")
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    tmpdir = Path(tempfile.mkdtemp(prefix="hc-"))  # short: a Unix socket path is limited
    launched = Sandbox(tmpdir)
    try:
        launched.wait_ready()
        yield launched
    finally:
        if launched.process.poll() is None:
            os.killpg(launched.process.pid, signal.SIGKILL)
            launched.process.wait(30)
        deadline = time.monotonic() + 30
        while list(tmpdir.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.2)
        shutil.rmtree(tmpdir, ignore_errors=True)


def gone(parts: list[int], directory: Path, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while (any(alive(p) for p in parts) or directory.exists()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [p for p in parts if alive(p)] == []
    assert not directory.exists(), sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL])
def test_the_sandbox_leaves_no_process_and_no_file(sandbox: Sandbox, sig: signal.Signals) -> None:
    directory = Path(sandbox.lines["logs"])
    assert (directory / "admin.token").exists()
    parts = children_of(sandbox.process.pid)
    assert len(parts) >= 8  # a hub, three clusters, three agents, the reaper
    sandbox.process.send_signal(sig)
    sandbox.process.wait(60)
    gone(parts, directory)


def test_one_agent_stops_and_starts_beside_the_running_sandbox(sandbox: Sandbox) -> None:
    assert sandbox.state("east") == "Ready"
    stopped = sandbox.cli("sandbox", "stop-agent", "east")
    assert stopped.returncode == 0, stopped.stderr
    assert "east" in stopped.stdout and "Stale" in stopped.stdout
    wait_for(lambda: sandbox.state("east") == "Stale", what="east Stale", timeout=60)
    assert sandbox.process.poll() is None  # the sandbox runs on
    assert sandbox.state("west") == "Ready"

    again = sandbox.cli("sandbox", "stop-agent", "east")
    assert again.returncode == 1 and "not running" in again.stderr
    unknown = sandbox.cli("sandbox", "stop-agent", "south")
    assert unknown.returncode == 1 and "east, north, west" in unknown.stderr

    started = sandbox.cli("sandbox", "start-agent", "east")
    assert started.returncode == 0, started.stderr
    wait_for(lambda: sandbox.state("east") == "Ready", what="east Ready again", timeout=60)
    twice = sandbox.cli("sandbox", "start-agent", "east")
    assert twice.returncode == 1 and "running already" in twice.stderr
    assert sandbox.process.poll() is None


def test_stop_agent_without_a_sandbox_says_so(tmp_path: Path) -> None:
    done = run_cli("sandbox", "stop-agent", "east", env={"TMPDIR": str(tmp_path)})
    assert done.returncode == 1
    assert "no running sandbox found" in done.stderr
