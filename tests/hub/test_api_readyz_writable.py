"""`/readyz` says "writable" only when the database takes a write
(docs/reference.md#observability): a database the hub reaches and reads but cannot
write to keeps the replica out of rotation, with the database's own words. SQLite: a
database file opened read-only; PostgreSQL: a role that may read the tables but not
write them."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import pytest

from hub.app import create_app
from hub.store import migrate
from tests.hub.test_api_support import settings_for


@contextlib.contextmanager
def _read_only_file(path: Path) -> Iterator[None]:
    """`path` unwritable for SQLite's open: its mode without write bits (an ordinary user)
    or, for root, whom modes do not stop, the immutable attribute."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o600)
        return
    if shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: cannot make a file read-only for root")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i refused here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


async def _pg(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def _read_only_role(url: str) -> AsyncIterator[str]:
    """A login role that may read every table of `url`'s database but write none; answers
    `url` as that role."""
    role = f"mcsync_ro_{uuid.uuid4().hex[:12]}"
    await _pg(
        url,
        f'CREATE ROLE "{role}" LOGIN; GRANT USAGE ON SCHEMA public TO "{role}"; '
        f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"',
    )
    parts = urlsplit(url)
    netloc = f"{role}@{parts.hostname}:{parts.port or 5432}"
    try:
        yield urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    finally:
        await _pg(url, f'DROP OWNED BY "{role}"; DROP ROLE "{role}"')


@contextlib.asynccontextmanager
async def _unwritable(url: str) -> AsyncIterator[str]:
    if url.startswith("sqlite"):
        with _read_only_file(Path(urlsplit(url).path)):
            yield url
    else:
        async with _read_only_role(url) as read_only:
            yield read_only


async def _readyz(url: str) -> httpx.Response:
    app = create_app(settings_for(url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://hub") as client:
            return await client.get("/readyz")


async def test_readyz_is_503_while_the_database_refuses_writes(database_url: str) -> None:
    await migrate.upgrade_async(database_url)
    ready = await _readyz(database_url)
    assert ready.status_code == 200, ready.text
    assert "writable" in ready.json()["message"]

    async with _unwritable(database_url) as url:
        refused = await _readyz(url)
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"]
        message = refused.json()["message"]
        assert "write" in message, message

    again = await _readyz(database_url)
    assert again.status_code == 200, again.text
