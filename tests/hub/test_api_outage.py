"""A database outage at run time (SPEC §5): 503 with Retry-After, never 500, then recovery.

PostgreSQL: the hub's store connects through a loopback TCP proxy that the test cuts and
restores (the connections die as in a server crash). SQLite: the pool is emptied and the
database's directory moved away, so new connections cannot open the file (tests run as
root here, which chmod 000 would not stop); moving it back is the recovery.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from hub.app import create_app
from hub.store import Store, migrate
from tests.hub.test_api_support import ADMIN, READER, export_body, export_path, settings_for
from tests.hub.test_store_db import TcpProxy

Switch = Callable[[], Awaitable[None]]


@contextlib.asynccontextmanager
async def outage_rig(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Switch, Switch]]:
    """An app on `database_url` and two switches: cut the database, restore it."""
    await migrate.upgrade_async(database_url)
    proxy: TcpProxy | None = None
    if database_url.startswith("postgresql"):
        parts = urlsplit(database_url)
        proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        await proxy.start()
        user = f"{parts.username}@" if parts.username else ""
        url = urlunsplit((parts.scheme, f"{user}127.0.0.1:{proxy.port}", parts.path, "", ""))
    else:
        url = database_url
    store = await Store.open(url)
    app = create_app(settings_for(url, retry_after_seconds=7), store=store)
    directory = Path(urlsplit(database_url).path).parent if proxy is None else None
    moved = directory.with_name(directory.name + "-away") if directory else None

    async def cut() -> None:
        if proxy is not None:
            await proxy.stop()
        else:
            assert directory is not None and moved is not None
            await store.engine.dispose()  # as if the hub had just reconnected
            directory.rename(moved)

    async def restore() -> None:
        if proxy is not None:
            await proxy.start()
        else:
            assert directory is not None and moved is not None
            moved.rename(directory)

    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://hub") as client:
                yield client, cut, restore
    finally:
        if moved is not None and moved.exists():
            moved.rename(directory)  # type: ignore[arg-type]
        await store.close()
        if proxy is not None:
            with contextlib.suppress(Exception):
                await proxy.stop()


def _assert_unavailable(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["Retry-After"] == "7"
    status = answer.json()
    assert status["reason"] == "ServiceUnavailable"
    assert status["details"]["retryAfterSeconds"] == 7
    assert "Traceback" not in answer.text


async def test_outage_answers_503_with_retry_after_then_recovers(database_url: str) -> None:
    async with outage_rig(database_url) as (client, cut, restore):
        registered = await client.post(
            "/api/v1/clusters", json={"metadata": {"name": "east"}}, headers=ADMIN
        )
        assert registered.status_code == 201
        east = {"Authorization": f"Bearer {registered.json()['token']}"}
        assert (await client.get("/readyz")).status_code == 200

        await cut()
        _assert_unavailable(
            await client.put(export_path("east"), json=export_body("east"), headers=ADMIN)
        )
        _assert_unavailable(await client.get("/api/v1/serviceexports", headers=READER))
        # A member token cannot be checked without the database: 503, not 401.
        _assert_unavailable(await client.get(export_path("east"), headers=east))
        _assert_unavailable(await client.get("/readyz"))
        assert (await client.get("/healthz")).status_code == 200
        scrape = await client.get("/metrics")  # scrapes still answer while the database is down
        assert scrape.status_code == 200
        assert "mcsync_hub_database_errors_total" in scrape.text
        # The verdict counts come from the database: absent rather than stale.
        assert 'mcsync_hub_exports{verdict="conflict"}' not in scrape.text

        await restore()
        stored = await client.put(export_path("east"), json=export_body("east"), headers=east)
        assert stored.status_code == 201, stored.text
        assert (await client.get("/readyz")).status_code == 200
        scrape = await client.get("/metrics")
        assert 'mcsync_hub_exports{verdict="no_conflict"} 1.0' in scrape.text


@pytest.mark.empty_database  # it migrates the database itself, while the hub serves
async def test_readyz_is_503_until_the_schema_is_at_head(database_url: str) -> None:
    store = await Store.open(database_url)  # an empty database: no migrations applied
    app = create_app(settings_for(database_url), store=store)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://hub") as client:
                answer = await client.get("/readyz")
                assert answer.status_code == 503
                assert "migrat" in answer.json()["message"]
                await migrate.upgrade_async(database_url)
                assert (await client.get("/readyz")).status_code == 200
    finally:
        await store.close()
