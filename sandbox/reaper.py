"""The sandbox's last one out: removes its processes and directory if the launcher dies
without doing so itself (`python -m sandbox.reaper DIRECTORY`, started by the launcher).

The launcher cleans up after itself on Ctrl-C, SIGTERM and SIGHUP. Nothing runs in a
process killed with SIGKILL, though, so the kernel's parent-death signal
(`PR_SET_PDEATHSIG`) stops the hub, the clusters and the agents, and this small process,
started in a session of its own (no terminal hang-up or Ctrl-C reaches it), removes what
is left (docs/reference.md#sandbox).

It learns what to watch from its stdin, the read end of a pipe only the launcher writes
to: `pid N` for every part started, `done` once the launcher has cleaned up (or decided
to keep the directory for its logs). End of file without `done` means the launcher
died: every part still running gets SIGTERM, then SIGKILL after the grace period, and
the directory is removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

GRACE_SECONDS = 10.0


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, already dead, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _signal(pid: int, sig: signal.Signals) -> None:
    # Each part leads a process group of its own (its children, if any, go with it).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def clean(directory: Path, pids: list[int], *, grace: float = GRACE_SECONDS) -> None:
    """Stop every part of `pids` still running, then remove `directory`."""
    for pid in pids:
        if running(pid):
            _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if running(pid):
            _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    directory = Path(argv[0])
    pids: list[int] = []
    for line in sys.stdin:
        word, _, value = line.strip().partition(" ")
        if word == "done":
            return 0
        if word == "pid" and value.isdigit():
            pids.append(int(value))
    clean(directory, pids)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
