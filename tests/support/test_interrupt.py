"""An interrupted test run leaves no process behind (tests/support/processes.py).

A pytest of its own runs `interrupt_target.py`: the suite's `hub_process` fixture and an
emulator process no fixture stops. Once both run, that pytest gets Ctrl-C (SIGINT to its
process group, as a terminal sends it) or SIGTERM (a cancelled CI job); it must exit, and
every process it started, and theirs, must be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.member.agent_support import wait_for

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(__file__).with_name("interrupt_target.py")


def _children_of(pid: int) -> list[int]:
    children: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after its ")".
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            children.append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    frontier = [pid]
    while frontier:
        kids = _children_of(frontier.pop())
        found += kids
        frontier += kids
    return found


def running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_an_interrupted_run_leaves_no_process(how: str, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    started: list[int] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(MCSYNC_TEST_READY_FILE=str(ready), PYTHONPATH=str(REPO))
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(TARGET), "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", f"--basetemp={tmp_path / 'inner'}"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group: Ctrl-C below reaches only that run
    )
    try:
        wait_for(lambda: ready.exists() or inner.poll() is not None,
                 what="the inner run's hub and emulator", timeout=120)
        assert inner.poll() is None, inner.communicate()[0].decode(errors="replace")
        started += descendants(inner.pid)
        assert len(started) >= 2, f"expected a hub and an emulator, found {started}"

        if how == "ctrl-c":
            os.killpg(inner.pid, signal.SIGINT)
        else:
            inner.send_signal(signal.SIGTERM)
        output = inner.communicate(timeout=90)[0].decode(errors="replace")

        deadline = time.monotonic() + 10
        while any(running(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [pid for pid in started if running(pid)]
        assert not left, f"still running after the interrupted run: {left}\n{output}"
        assert "Interrupted" in output or "KeyboardInterrupt" in output, output
    finally:
        if inner.poll() is None:
            os.killpg(inner.pid, signal.SIGKILL)
            inner.wait(10)
        for pid in [*started, *descendants(inner.pid)]:  # what this test failed to see gone
            if running(pid):
                os.kill(pid, signal.SIGKILL)
