"""Database URLs and outages: plain URLs map to async drivers; a dead database is a 503."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from hub.dburl import async_url
from hub.store import DatabaseUnavailable, Store
from hub.store.db import make_engine


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sqlite:///tmp/x.db", "sqlite+aiosqlite:///tmp/x.db"),
        ("sqlite+aiosqlite:////abs/x.db", "sqlite+aiosqlite:////abs/x.db"),
        ("postgresql://mcsync@db:5432/hub", "postgresql+asyncpg://mcsync@db:5432/hub"),
        ("postgres://u:p@db/hub", "postgresql+asyncpg://u:p@db/hub"),
        ("postgresql+asyncpg://u@db/hub", "postgresql+asyncpg://u@db/hub"),
        # docs/reference.md#ha-postgresql: the libpq host list of an HA pair goes to the driver as
        # `host` lists.
        (
            "postgresql://u:p@h1:5433,h2:5434/hub?target_session_attrs=read-write",
            "postgresql+asyncpg://u:p@/hub?host=h1%3A5433&host=h2%3A5434"
            "&target_session_attrs=read-write",
        ),
        ("postgresql://h1,h2:5433/hub", "postgresql+asyncpg:///hub?host=h1%3A5432&host=h2%3A5433"),
    ],
)
def test_async_url(given: str, expected: str) -> None:
    assert async_url(given) == expected


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("mysql://u@db/hub", "unsupported database URL scheme 'mysql'"),
        ("postgresql+psycopg://u@db/hub", "unsupported database URL scheme"),
        ("postgresql://u@db", "names no database"),
        ("not a url", "not a database URL"),
        ("postgresql://u@h1:x,h2/hub", "the port 'x' of host 1 .'h1'. is not a number"),
        ("postgresql://u@h1,h2:99999/hub", "of host 2 .'h2'. is not a number from 1 to 65535"),
        ("postgresql://u@h1,,h2/hub", "host 2 of its host list is empty"),
        ("postgresql://u@h1,h2/hub?target_session_attrs=rw", "target_session_attrs 'rw'"),
        ("postgresql://u@h1,h2", "names no database"),
    ],
)
def test_async_url_refuses(given: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        async_url(given)


async def test_in_memory_sqlite_is_refused() -> None:
    with pytest.raises(ValueError, match="in-memory"):
        await Store.open("sqlite://")


async def test_unreachable_postgres_is_database_unavailable() -> None:
    with pytest.raises(DatabaseUnavailable, match="database unavailable"):
        await Store.open("postgresql://nobody@127.0.0.1:1/none")


async def test_unopenable_sqlite_is_database_unavailable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DatabaseUnavailable):
        await Store.open(f"sqlite:///{tmp_path}/missing-dir/hub.db")


async def test_store_refuses_bad_settings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path}/hub.db"
    with pytest.raises(ValueError, match="history_limit"):
        await Store.open(url, history_limit=0)
    with pytest.raises(ValueError, match="cluster_ttl"):
        await Store.open(url, cluster_ttl=timedelta(0))


async def test_outage_after_open_is_database_unavailable(database_url: str) -> None:
    from tests.hub.test_store_support import open_store

    store = await open_store(database_url)
    await store.clusters.register("alpha", {})
    if store.backend == "postgresql":
        import asyncpg

        from tests.conftest import postgres_admin_url

        # Kill every connection to this database, as a server restart would.
        name = database_url.rsplit("/", 1)[1]
        admin = await asyncpg.connect(postgres_admin_url())
        try:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                name,
            )
        finally:
            await admin.close()
        # pool_pre_ping replaces the dead connections: the store recovers by itself
        assert [c.metadata.name for c in await store.clusters.list()] == ["alpha"]
    await store.close()


Tap = Callable[[bytes], bool]  # sees each chunk; False drops it and resets the connection


def _forward(_data: bytes) -> bool:
    return True


class TcpProxy:
    """A loopback TCP forwarder that the test can cut and restore.

    `taps()` gives each new connection its (client→server, server→client) taps; the
    default forwards everything. A subclass may look at the bytes and cut in between.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()
        self._writers.clear()

    def taps(self) -> tuple[Tap, Tap]:
        return _forward, _forward

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers.update((writer, up_writer))
        upstream, downstream = self.taps()

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, tap: Tap) -> None:
            try:
                while (data := await src.read(65536)) and tap(data):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pump(reader, up_writer, upstream), pump(up_reader, writer, downstream))


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_postgres_outage_is_database_unavailable_and_recovers(database_url: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    from tests.hub.test_store_support import make_export, open_store

    await open_store(database_url)  # migrate through the direct URL, then close
    parts = urlsplit(database_url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.start()
    user = f"{parts.username}@" if parts.username else ""
    via_proxy = urlunsplit((parts.scheme, f"{user}127.0.0.1:{proxy.port}", parts.path, "", ""))
    store = await Store.open(via_proxy)
    try:
        await store.clusters.register("alpha", {})
        await proxy.stop()
        with pytest.raises(DatabaseUnavailable):
            await store.exports.put("alpha", make_export("alpha"))
        with pytest.raises(DatabaseUnavailable):
            await store.clusters.list()
        with pytest.raises(DatabaseUnavailable):
            await store.ping()

        await proxy.start()  # same port: the database is back
        result = await store.exports.put("alpha", make_export("alpha"))
        assert result.created
        assert [c.metadata.name for c in await store.clusters.list()] == ["alpha"]
    finally:
        await store.close()
        with contextlib.suppress(Exception):
            await proxy.stop()


@pytest.mark.reliability
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_a_database_refusing_connections_is_unavailable(database_url: str) -> None:
    """PostgreSQL-only (it is PostgreSQL's own refusal): a database that accepts no new
    connections answers SQLSTATE 55000 at connect time, which no list of "connection lost"
    errors named; it was a 500. Any failure to connect is DatabaseUnavailable now."""
    from urllib.parse import urlsplit

    import asyncpg

    from tests.conftest import postgres_admin_url
    from tests.hub.test_store_support import make_export, open_store

    store = await open_store(database_url)
    database = urlsplit(database_url).path.lstrip("/")
    admin = await asyncpg.connect(postgres_admin_url(), timeout=10)
    try:
        await store.clusters.register("alpha", {})
        await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
            database,
        )
        with pytest.raises(DatabaseUnavailable, match="cannot connect"):
            await store.exports.put("alpha", make_export("alpha"))
        with pytest.raises(DatabaseUnavailable):
            await store.clusters.list()
        with pytest.raises(DatabaseUnavailable):
            await store.ping()
        with pytest.raises(DatabaseUnavailable):
            await store.schema_at_head()

        await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        assert (await store.exports.put("alpha", make_export("alpha"))).created
    finally:
        await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        await admin.close()
        await store.close()


async def test_an_exhausted_pool_is_database_unavailable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every pooled connection busy past the pool's timeout is overload: a 503 with
    Retry-After, not a 500. bench/scale met it with 1,000 open watches."""
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    from hub.store.db import connection, make_engine, translate_errors

    with pytest.raises(DatabaseUnavailable, match="QueuePool"):
        with translate_errors():
            raise PoolTimeout("QueuePool limit of size 1 overflow 1 reached")
    engine = make_engine(f"sqlite:///{tmp_path / 'pool.db'}", pool_size=1)
    engine.sync_engine.pool._timeout = 0.1  # type: ignore[attr-defined]
    try:
        async with connection(engine), connection(engine):  # both slots taken
            with pytest.raises(DatabaseUnavailable, match="cannot connect"):
                async with connection(engine):
                    pass
    finally:
        await engine.dispose()


async def test_a_hub_opening_a_new_sqlite_file_another_holds_waits_for_wal(
    tmp_path: Path,
) -> None:
    """Several hub replicas (or `migrate` beside a hub) opening one new file at once.

    Switching a new file to WAL needs it to itself, and SQLite refuses at once ("database
    is locked"), busy timeout or not, while another connection holds a lock — as the first
    replica does while it migrates. The second replica used to fail its start; it waits.
    """
    path = tmp_path / "new.db"
    first = sqlite3.connect(path, isolation_level=None)  # still in rollback-journal mode
    try:
        first.execute("CREATE TABLE migrating (step INTEGER)")
        first.execute("BEGIN IMMEDIATE")
        first.execute("INSERT INTO migrating VALUES (1)")

        async def finish_migrating() -> None:
            await asyncio.sleep(0.5)
            first.execute("COMMIT")

        finishing = asyncio.create_task(finish_migrating())
        engine = make_engine(f"sqlite:///{path}")
        try:
            async with engine.connect() as conn:
                mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar()
                steps = (await conn.exec_driver_sql("SELECT count(*) FROM migrating")).scalar()
        finally:
            await engine.dispose()
        await finishing
    finally:
        first.close()
    assert mode == "wal"
    assert steps == 1
