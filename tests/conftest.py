"""Fixtures every test package shares: a fresh database on SQLite *and* PostgreSQL.

Every hub test that touches the database takes `database_url`, which is parametrized
over both back ends (ids `sqlite` and `postgresql`). PostgreSQL comes from
`MCSYNC_TEST_POSTGRES_URL` (default `postgresql://postgres@127.0.0.1:5432/test`); each test
gets its own freshly created database, dropped afterwards, so tests never see each
other's rows. Where PostgreSQL is unreachable the PostgreSQL variants skip with a message
saying so, except under `CI=true`, where an unreachable PostgreSQL fails the run: CI must
never pass by silently skipping half the matrix.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")


def postgres_admin_url() -> str:
    return os.environ.get("MCSYNC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, ""))


async def _admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(postgres_admin_url(), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


_postgres_problem: str | None = None
_postgres_checked = False


def _postgres_unavailable() -> str | None:
    """None when PostgreSQL answers, else why not (checked once per session)."""
    global _postgres_checked, _postgres_problem
    if not _postgres_checked:
        _postgres_checked = True
        try:
            asyncio.run(_admin("SELECT 1"))
        except Exception as exc:  # any failure to connect means "unavailable"
            _postgres_problem = f"{type(exc).__name__}: {exc}"
    return _postgres_problem


def require_postgres() -> None:
    problem = _postgres_unavailable()
    if problem is None:
        return
    message = f"PostgreSQL at {postgres_admin_url()} is unreachable ({problem})"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{message}; CI must run the PostgreSQL variants", pytrace=False)
    pytest.skip(f"{message}; set MCSYNC_TEST_POSTGRES_URL or start PostgreSQL to run these")


def create_postgres_database() -> str:
    """Create an empty database and answer its plain `postgresql://` URL."""
    require_postgres()
    name = f"mcsync_t_{uuid.uuid4().hex[:16]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    return _with_database(postgres_admin_url(), name)


def drop_postgres_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def make_database_url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'mcsync.db'}"
    return create_postgres_database()


def dispose_database_url(url: str) -> None:
    if url.startswith("postgresql"):
        drop_postgres_database(url)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The database back end of this test variant: `sqlite` or `postgresql`."""
    return str(request.param)


@pytest.fixture
def database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A plain URL of a fresh, empty database (no schema) of the variant's back end."""
    url = make_database_url(backend, tmp_path)
    try:
        yield url
    finally:
        dispose_database_url(url)
