"""Start-up mistakes that say what to do next (issue 26): a PostgreSQL server that refuses
the database or role (one line, exit 3), a port another process holds (exit 4, no database
touched), and the generated admin token beside the SQLite database, not in the working
directory."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from hub.settings import HubSettings, sqlite_file
from tests.hub.test_cli import REPO, run_hub

PG = "postgresql://127.0.0.1:5432"


def postgres_answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.skipif(not postgres_answers(), reason="no PostgreSQL on 127.0.0.1:5432")
@pytest.mark.parametrize(("command", "url", "says"), [
    ("serve", f"{PG}/no_such_db_{uuid.uuid4().hex[:8]}", "does not exist: create it"),
    ("migrate", f"{PG}/no_such_db_{uuid.uuid4().hex[:8]}", "does not exist: create it"),
    ("serve", f"postgresql://no_such_role_{uuid.uuid4().hex[:8]}@127.0.0.1:5432/test",
     "does not exist: create the role"),
], ids=["serve-no-database", "migrate-no-database", "serve-no-role"])  # fixed: xdist workers
# must collect the same test ids, and the names above are random
def test_a_refused_database_or_role_is_one_line_and_exit_3(
        tmp_path: Path, command: str, url: str, says: str) -> None:
    done = run_hub([command, "--database-url", url, "--port", str(free_port())], cwd=tmp_path) \
        if command == "serve" else run_hub([command, "--database-url", url], cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("mcsync-hub: error: --database-url: the server of ")
    assert says in line and "MCSYNC_DATABASE_URL" in line
    assert list(tmp_path.iterdir()) == []  # no admin token generated on the way out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_port_in_use_is_exit_4_and_touches_no_database(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = run_hub(["--host", "127.0.0.1", "--port", str(port), "--database-url",
                        f"sqlite:///{tmp_path / 'hub.db'}"], cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert done.stderr.strip() == (
        f"mcsync-hub: error: --port: 127.0.0.1:{port} is in use by another process: stop "
        "it, or choose another --port (MCSYNC_PORT)")
    assert list(tmp_path.iterdir()) == []  # no database file, no token


@pytest.mark.parametrize(("url", "expected"), [
    ("sqlite:///./mcsync.db", Path("mcsync.db")),
    ("sqlite:////var/lib/mcsync/hub.db", Path("/var/lib/mcsync/hub.db")),
    ("sqlite+aiosqlite:///state/hub.db?timeout=5", Path("state/hub.db")),
    ("sqlite:///:memory:", None),
    ("postgresql://u@db/mcsync", None),
])
def test_sqlite_file(url: str, expected: Path | None) -> None:
    assert sqlite_file(url) == expected


def test_the_generated_token_goes_beside_the_sqlite_database(tmp_path: Path) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    state.mkdir()
    work.mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCSYNC_")}
    env["PYTHONPATH"] = str(REPO)
    process = subprocess.Popen(
        [sys.executable, "-m", "hub", "--host", "127.0.0.1", "--port", str(port),
         "--database-url", f"sqlite:///{state / 'hub.db'}"], cwd=work, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        token = state / "mcsync-admin-token"
        assert token.is_file() and stat.S_IMODE(token.stat().st_mode) == 0o600
        assert list(work.iterdir()) == []
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert HubSettings(database_url="postgresql://u@db/x").effective_admin_token_file == \
        Path("mcsync-admin-token")
