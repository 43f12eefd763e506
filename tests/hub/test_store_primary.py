"""A hub replica whose database server stops taking writes treats it as having no primary
(docs/reference.md#ha-postgresql), and takes writes again by itself when a writable server answers.

PostgreSQL only, inherently: read-only is PostgreSQL's (a standby after a failover, or a
primary fenced read-only). Made here, scoped to the test's own database, by
`ALTER DATABASE … SET default_transaction_read_only` and cutting the hub's connections:
every connection made afterwards lands on a "server" that refuses writes, as when a
moving address points at a standby. The failover itself, on a real primary/standby pair,
is tests/reliability/test_pg_failover.py.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import asyncpg
import pytest

from hub.store import DatabaseUnavailable, Store
from hub.store.db import connect_kwargs
from hub.store.primary import host_candidates
from tests.conftest import postgres_admin_url
from tests.hub.test_store_support import make_export, open_store

POSTGRES_ONLY = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)

DEADLINE = 30.0


async def _until(store: Store, *, writable: bool) -> None:
    deadline = time.monotonic() + DEADLINE
    while store.primary_writable != writable:
        assert time.monotonic() < deadline, f"primary_writable never became {writable}"
        await asyncio.sleep(0.05)


@POSTGRES_ONLY
async def test_a_read_only_server_is_no_primary_until_a_writable_one_answers(
    database_url: str,
) -> None:
    store = await open_store(database_url, database_timeout=2.0)
    database = urlsplit(database_url).path.lstrip("/")
    admin = await asyncpg.connect(postgres_admin_url(), timeout=10)
    try:
        await store.clusters.register("alpha", {})
        assert store.primary is not None and store.primary_writable
        await admin.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
            database,
        )
        await _until(store, writable=False)
        # Refused as an outage (503), never another error, and without touching the server.
        with pytest.raises(
            DatabaseUnavailable, match="no writable primary: the server is read-only"
        ):
            await store.exports.put("alpha", make_export("alpha"))
        with pytest.raises(DatabaseUnavailable, match="no writable primary"):
            await store.ping()

        await admin.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        await _until(store, writable=True)
        result = await store.exports.put("alpha", make_export("alpha"))
        assert result.created
        assert store.primary.losses == 1
    finally:
        await admin.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        await admin.close()
        await store.close()


@POSTGRES_ONLY
async def test_a_pooled_connection_on_a_read_only_server_is_not_reused(database_url: str) -> None:
    """A connection whose server said it takes no writes is discarded at checkout; a
    write that meets read-only anyway (SQLSTATE 25006) is an outage (503), and the
    connection it ran on is discarded, not handed out again."""
    store = await open_store(database_url, database_timeout=2.0, pool_size=1)
    try:
        await store.clusters.register("alpha", {})
        async with store.engine.connect() as conn:
            said_read_only = (await conn.get_raw_connection()).driver_connection
            await said_read_only.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        # A pool of one holds at most two idle connections, checked out in turn (FIFO):
        # three transactions have checked out the read-only one.
        for name in ("web", "api", "db"):
            result = await store.exports.put("alpha", make_export("alpha", name=name))
            assert result.created
        assert said_read_only.is_closed()

        with pytest.raises(DatabaseUnavailable, match="read-only transaction"):
            async with store._ctx.write() as conn:
                refused = (await conn.get_raw_connection()).driver_connection
                await conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                await conn.exec_driver_sql("UPDATE revision SET value = value")
        assert refused.is_closed()
        assert (await store.exports.put("alpha", make_export("alpha", name="cache"))).created
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("url", "hosts"),
    [
        ("postgresql://u@db/hub", [("db", None)]),
        ("postgresql://u@db:6432/hub", [("db", 6432)]),
        # A host list is tried one host at a time, each with the whole connect timeout.
        ("postgresql://u@h1:5433,h2:5434/hub", [("h1", 5433), ("h2", 5434)]),
        ("postgresql://u@h1,h2:5434/hub", [("h1", 5432), ("h2", 5434)]),
    ],
)
def test_a_host_list_is_one_candidate_per_host(
    url: str, hosts: list[tuple[str, int | None]]
) -> None:
    candidates = host_candidates(connect_kwargs(url + "?target_session_attrs=read-write"))
    assert [(c["host"], c.get("port")) for c in candidates] == hosts
    assert all(c["target_session_attrs"] == "read-write" for c in candidates)
