"""Processes the tests start: none may outlive the test run, however it ends.

`spawn(...)` is `subprocess.Popen` with the child in a process group of its own
(`start_new_session`), remembered until it has exited. Fixtures still stop their processes
gracefully themselves (SIGTERM, wait); what this adds is the backstop:

* at the end of the
  run (`pytest_unconfigure`) and at interpreter exit (`atexit`) every remembered group
  still alive is killed (SIGKILL to the whole group: a `mcsync sandbox` launcher's hub,
  agents and emulators go with it);
* SIGTERM to pytest (a CI job cancelled, `timeout`) becomes KeyboardInterrupt, so pytest
  unwinds as on Ctrl-C: fixtures' finalizers run, then the above. Without it SIGTERM's
  default action ends pytest on the spot and leaves every child running.

Own process groups are also why Ctrl-C at a terminal no longer reaches the children
directly (it did before, racing their fixtures' graceful stop): they are stopped by their
fixture, or killed here, in order.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
from types import FrameType
from typing import Any

import pytest

_children: dict[int, subprocess.Popen[Any]] = {}
_lock = threading.Lock()


def spawn(args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(args, **kwargs)` in a new process group, killed with the run at
    the latest."""
    kwargs.setdefault("start_new_session", True)
    process: subprocess.Popen[Any] = subprocess.Popen(args, **kwargs)
    with _lock:
        _forget_exited()
        _children[process.pid] = process
    return process


def _forget_exited() -> None:
    for pid, process in list(_children.items()):
        if process.poll() is not None:
            del _children[pid]


def kill_all() -> None:
    """SIGKILL the process group of every child still running, and reap them."""
    with _lock:
        children = list(_children.values())
        _children.clear()
    for process in children:
        if process.poll() is not None:
            continue
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                process.kill()
            except ProcessLookupError:
                pass
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            pass


def running() -> list[int]:
    """Pids of the children started with `spawn` that are still running."""
    with _lock:
        _forget_exited()
        return list(_children)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"pytest received {signal.Signals(signum).name}")


atexit.register(kill_all)


def pytest_configure(config: pytest.Config) -> None:
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _on_sigterm)


def pytest_unconfigure(config: pytest.Config) -> None:
    kill_all()
