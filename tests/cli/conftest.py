"""A real hub process for the CLI's end-to-end tests, and a way to run the real CLI.

The hub is started the way an operator starts it (`python -m hub serve` on a free
loopback port over a SQLite file in a temporary directory, tokens from `MCSYNC_*`
variables) and is ready when `/readyz` answers 200, within 60 s. One hub serves the whole
module: the CLI only reads, and the tests that write (the watch) add objects nobody else
asserts on. Both processes get an environment stripped of the caller's `MCSYNC_*`
variables, so a developer's shell cannot change what the tests see.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import spawn

REPO = Path(__file__).resolve().parents[2]
READY_DEADLINE_SECONDS = 60.0
CLI_DEADLINE_SECONDS = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# A config home with no mcsync config in it, so a developer's ~/.config/mcsync/config
# cannot change what the CLI under test does; removed when this process exits (every xdist
# worker makes its own).
EMPTY_CONFIG_HOME = Path(tempfile.mkdtemp(prefix="mcsync-cli-tests-"))
atexit.register(shutil.rmtree, EMPTY_CONFIG_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process parsing reads the config from an empty home, never the developer's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(EMPTY_CONFIG_HOME))
    monkeypatch.setenv("HOME", str(EMPTY_CONFIG_HOME))


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without any MCSYNC_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCSYNC_")}
    env["PYTHONPATH"] = str(REPO)
    env["XDG_CONFIG_HOME"] = str(EMPTY_CONFIG_HOME)
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class RunningHub:
    url: str
    admin_token: str
    reader_token: str
    log_path: Path

    def call(
        self, method: str, path: str, *, token: str, body: Any = None
    ) -> httpx.Response:
        return httpx.request(
            method,
            self.url + path,
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30.0,
        )

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return "<no log>"


def _wait_ready(url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + READY_DEADLINE_SECONDS
    last = "no answer yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"the hub exited with {process.returncode} before it was ready:\n"
                + log_path.read_text(errors="replace")[-4000:],
                pytrace=False,
            )
        try:
            answer = httpx.get(url + "/readyz", timeout=2.0)
            if answer.status_code == 200:
                return
            last = f"HTTP {answer.status_code}: {answer.text[:200]}"
        except httpx.HTTPError as exc:
            last = str(exc)
        time.sleep(0.2)
    pytest.fail(
        f"the hub at {url} was not ready within {READY_DEADLINE_SECONDS:g}s ({last}):\n"
        + log_path.read_text(errors="replace")[-4000:],
        pytrace=False,
    )


@contextlib.contextmanager
def running_hub(
    workdir: Path, *, extra_env: Mapping[str, str] | None = None
) -> Iterator[RunningHub]:
    """`python -m hub serve` in `workdir` until the block ends (SIGTERM, then kill)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    admin, reader = f"admin-{uuid.uuid4().hex}", f"reader-{uuid.uuid4().hex}"
    log_path = workdir / "hub.log"
    command = [
        sys.executable, "-m", "hub", "serve",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--database-url", f"sqlite:///{workdir / 'hub.db'}",
    ]
    env = clean_env(
        {"MCSYNC_ADMIN_TOKEN": admin, "MCSYNC_READER_TOKEN": reader, **(extra_env or {})}
    )
    with log_path.open("wb") as log:
        process = spawn(
            command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        _wait_ready(url, process, log_path)
        yield RunningHub(url=url, admin_token=admin, reader_token=reader, log_path=log_path)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHub]:
    with running_hub(tmp_path_factory.mktemp("hub")) as started:
        yield started


@pytest.fixture(scope="module")
def short_history_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHub]:
    """A hub that keeps one revision of history: any burst of writes sends watchers 410."""
    with running_hub(
        tmp_path_factory.mktemp("hub-short"), extra_env={"MCSYNC_HISTORY_LIMIT": "1"}
    ) as started:
        yield started


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "cli", *args]


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = CLI_DEADLINE_SECONDS
) -> subprocess.CompletedProcess[str]:
    """Run `mcsync ARGS` as a subprocess, to completion; stdout and stderr as text."""
    return subprocess.run(
        cli_command(*args),
        env=clean_env(env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a CLI run that must have succeeded (exit 0, no traceback)."""
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    assert "Traceback" not in result.stderr
    return result.stdout


def table(stdout: str) -> list[dict[str, str]]:
    """Rows of a kubectl-style table as dicts by header (for tables whose cells have no
    spaces: every table of `mcsync` but `get`'s detail pages). An empty result prints no
    table at all (`No resources found.` goes to stderr): no rows."""
    lines = stdout.splitlines()
    if not lines:
        return []
    headers = lines[0].split()
    rows = []
    for line in lines[1:]:
        cells = line.split()
        assert len(cells) == len(headers), f"row {line!r} does not fit {headers}"
        rows.append(dict(zip(headers, cells, strict=True)))
    return rows
