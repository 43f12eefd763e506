"""What a newcomer sees when the hub starts: where it listens, one hub per SQLite file, a
missing database directory named as the database's, and a "did you mean" for a typo."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.hub.test_cli import REPO, run_hub
from tests.hub.test_start_errors import free_port


def _hub(database: Path, port: int, cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCSYNC_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "hub", "--host", "127.0.0.1", "--port", str(port),
         "--database-url", f"sqlite:///{database}"],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, int]]:
    port = free_port()
    database = tmp_path / "hub.db"
    process = _hub(database, port, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("the hub did not become ready")
        yield process, database, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(30)


def test_the_hub_says_where_it_listens_with_console_and_api_docs(
        serving: tuple[subprocess.Popen[str], Path, int]) -> None:
    process, _, port = serving
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    base = f"http://127.0.0.1:{port}"
    said = [line for line in stderr.splitlines() if "listening on" in line]
    assert len(said) == 1, stderr
    assert said[0].endswith(
        f"mcsync hub listening on {base} (console {base}/ui/, API docs {base}/docs)")


def test_a_second_hub_on_the_same_sqlite_file_is_refused_in_one_line(
        serving: tuple[subprocess.Popen[str], Path, int], tmp_path: Path) -> None:
    _, database, port = serving
    done = run_hub(["--host", "127.0.0.1", "--port", str(free_port()), "--database-url",
                    f"sqlite:///{database}"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("mcsync-hub: error: --database-url: another mcsync-hub is already "
                           f"serving the SQLite database {database}")
    # The first one goes on serving, untouched.
    assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    assert stat.S_IMODE(database.stat().st_mode) == 0o600


def test_a_sqlite_file_is_free_again_once_its_hub_was_killed(tmp_path: Path) -> None:
    """The claim dies with its holder, `kill -9` included: no stale lock to clean up."""
    database, port = tmp_path / "hub.db", free_port()
    first = _hub(database, port, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not database.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
    finally:
        first.kill()
        first.wait(30)
    second = _hub(database, port, tmp_path)
    try:
        deadline = time.monotonic() + 60
        ready = False
        while time.monotonic() < deadline and not ready:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                time.sleep(0.2)
        assert ready
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)


def test_a_missing_database_directory_names_the_database(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir"
    done = run_hub(["--port", str(free_port()), "--database-url",
                    f"sqlite:///{missing / 'hub.db'}"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"mcsync-hub: error: --database-url: cannot create the SQLite database "
        f"{missing / 'hub.db'}: its directory {missing} does not exist (create it, or point "
        "--database-url / MCSYNC_DATABASE_URL elsewhere)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("typo", "meant"), [
    (["--prot", "8080"], "--port"),
    (["serve", "--databse-url", "x"], "--database-url"),
    (["migrate", "--log-formt", "json"], "--log-format"),
])
def test_a_mistyped_flag_gets_a_did_you_mean(tmp_path: Path, typo: list[str], meant: str) -> None:
    done = run_hub(typo, cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith(f"; did you mean {meant}?"), line
