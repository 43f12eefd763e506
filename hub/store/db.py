"""Engine construction and driver-error translation for the hub's two databases.

The URLs operators write are read by `hub.dburl` (`async_url` maps them to aiosqlite /
asyncpg); this module builds engines on them.

SQLite is tuned so that it can honour the same guarantees as PostgreSQL:

* every *write* transaction starts with `BEGIN IMMEDIATE`, which takes SQLite's single
  writer lock at the start. Without it two transactions could both read a key's exports
  under a shared lock and then deadlock (SQLITE_BUSY) when both try to upgrade to write;
  with it, writers queue on `busy_timeout` and the judge always sees the latest rows.
  SQLAlchemy's recipe: switch the driver's own transaction handling off
  (`isolation_level = None`) and emit our own BEGIN from the engine's "begin" event.
* *read* transactions (the `read_engine` view of the same pool) start with a plain
  deferred `BEGIN`, which in WAL mode is a consistent snapshot that never blocks writers.
* WAL journal, `synchronous=FULL` (a 2xx answer survives power loss as well as
  `kill -9`), and a generous busy timeout so that a queue of writers waits rather than
  fails.

`translate_errors` turns every way a database can be unreachable into
`DatabaseUnavailable`, which the API answers with 503 + Retry-After (docs/reference.md#failover).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    InvalidRequestError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util import await_only

from hub.dburl import async_url, parse
from hub.store.errors import DatabaseUnavailable
from hub.store.primary import DEFAULT_TIMEOUT_SECONDS, PrimaryConnector, is_read_only
from shared.backoff import Backoff, Retries

SQLITE_BUSY_TIMEOUT_MS = 30_000
# read_only_sql_transaction: a write reached a standby (docs/reference.md#ha-postgresql).
READ_ONLY_SQLSTATE = "25006"
# How a transaction opened through `read_engine` tells the begin hook to start deferred.
_READ_ONLY_OPTION = "mcsync_read_only"


def asyncpg_dsn(url: str) -> str:
    """The libpq-style DSN asyncpg takes directly (for the LISTEN connection)."""
    parsed = parse(async_url(url))
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def connect_kwargs(url: str) -> dict[str, Any]:
    """asyncpg's keyword arguments for a PostgreSQL `url`, as SQLAlchemy's dialect derives
    them (host and port lists of a libpq host list, `target_session_attrs` …), so that the
    pool, the LISTEN connection and the primary probe connect alike."""
    from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

    _args, kwargs = asyncpg_dialect().create_connect_args(parse(async_url(url)))
    kwargs.pop("prepared_statement_cache_size", None)
    kwargs.pop("prepared_statement_name_func", None)
    return dict(kwargs)


def make_connector(url: str, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> PrimaryConnector:
    """The `PrimaryConnector` of a PostgreSQL `url` (`hub.store.primary`)."""
    return PrimaryConnector(connect_kwargs(url), timeout=timeout)


def make_engine(
    url: str,
    *,
    pool_size: int = 10,
    max_overflow: int | None = None,
    echo: bool = False,
    connector: PrimaryConnector | None = None,
    purpose: str = "",
) -> AsyncEngine:
    """An AsyncEngine for `url` with the pragmas and begin hooks described above; on
    PostgreSQL its connections come from `connector` (a new one when not given) and say
    `purpose` in `pg_stat_activity`'s `application_name`. The pool may open `max_overflow`
    connections past `pool_size` under load (default: as many again)."""
    overflow = pool_size if max_overflow is None else max_overflow
    target = async_url(url)
    if target.startswith("sqlite"):
        return _sqlite_engine(target, pool_size=pool_size, max_overflow=overflow, echo=echo)
    connector = connector or make_connector(url)
    pool_connector = connector

    async def pool_connect() -> Any:
        return await pool_connector.connect(pooled=True, purpose=purpose)

    engine = create_async_engine(
        target,
        echo=echo,
        pool_size=pool_size,
        max_overflow=overflow,
        # Fail fast when the server is down: the API answers 503 and the client retries.
        pool_timeout=30,
        # Connect timeout, keepalives, the host list: `hub.store.primary`.
        async_creator=pool_connect,
    )
    ping_timeout = connector.timeout

    def ping_on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        _ping_on_checkout(dbapi_connection, record, proxy, timeout=ping_timeout)

    event.listen(engine.sync_engine, "checkout", ping_on_checkout)
    event.listen(engine.sync_engine, "handle_error", _lost_primary_is_a_disconnect)
    return engine


def _ping_on_checkout(_dbapi_connection: Any, record: Any, _proxy: Any, *, timeout: float) -> None:
    """Make sure a pooled PostgreSQL connection is alive before it is handed out.

    SQLAlchemy's own `pool_pre_ping` does this for asyncpg as three round trips (BEGIN,
    an empty query, ROLLBACK: a transaction so that PgBouncer's transaction mode routes
    the ping to the server the connection will use). The hub cannot run behind that mode
    anyway (asyncpg's prepared statements need a session), so one empty query says the
    same: a connection the server has dropped (a restart, an idle timeout) fails it, and
    `DisconnectionError` makes the pool discard it and check out another, or connect
    anew. Every transaction, a token lookup's as a PUT batch's, begins with a checkout:
    the two round trips saved were a sixth of a group-committed PUT batch's store CPU
    (py-spy over the hub under bench/put_throughput).

    The ping is bounded by the database timeout (a peer that went silent is not waited
    for), and a connection whose server reported itself read-only (a standby after a
    failover, docs/reference.md#ha-postgresql; no round trip, see `primary.is_read_only`) is
    discarded too.
    """
    driver = record.driver_connection
    if driver.is_closed():  # cut when the primary was lost (`primary.PrimaryConnector`)
        raise DisconnectionError("pooled connection was closed")
    if is_read_only(driver.get_settings()):
        raise DisconnectionError("pooled connection is to a read-only server")
    try:
        await_only(driver.fetchrow(";", timeout=timeout))
    except Exception as exc:
        raise DisconnectionError(f"pooled connection failed its ping: {exc}") from exc


def _lost_primary_is_a_disconnect(context: Any) -> None:
    """A statement refused because the server is read-only (SQLSTATE 25006: the connection
    landed on a standby) or that timed out: the pool must not hand that connection out
    again, so SQLAlchemy treats it as a disconnect and discards it."""
    original = context.original_exception
    cause = getattr(original, "__cause__", None)
    for candidate in (original, cause):
        if isinstance(candidate, _DISCARD_TYPES) or getattr(candidate, "sqlstate", None) == (
            READ_ONLY_SQLSTATE
        ):
            context.is_disconnect = True
            return


def _sqlite_engine(target: str, *, pool_size: int, max_overflow: int, echo: bool) -> AsyncEngine:
    memory = make_url(target).database in (None, "", ":memory:")
    if memory:
        # Every pooled connection would be a different empty database.
        raise ValueError(
            "an in-memory SQLite database cannot be shared by the hub's connections; "
            "use sqlite:///path/to/file.db"
        )
    engine = create_async_engine(
        target,
        echo=echo,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=True,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the driver; the "begin" hook below owns it.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            _use_wal(cursor)
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        if conn.get_execution_options().get(_READ_ONLY_OPTION):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


# Between attempts to switch a new file to WAL: the first within 10 ms, then up to 0.2 s.
_WAL_RETRY = Backoff(base=0.01, cap=0.2)


def _use_wal(cursor: Any) -> None:
    """Switch the database to WAL, waiting out a concurrent first connection.

    Switching a new database file to WAL needs it to itself, and SQLite answers "database is
    locked" at once, busy timeout or not, when another connection holds a lock meanwhile —
    as when several hub replicas (or `mcsync-hub migrate` and a hub) open a new file
    together and the first already migrates it. Once the file is in WAL mode (it stays so)
    the pragma is a no-op. So: retry, briefly, up to the busy timeout, with
    `_WAL_RETRY`'s jitter so that replicas waiting together do not retry in step. This
    blocks the connecting thread, but only in that start-up race.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    retries = Retries(_WAL_RETRY)
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            row = cursor.fetchone()
            if row is not None and str(row[0]).lower() == "wal":
                return
            problem = f"journal mode stayed {row[0] if row else None!r}"
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            problem = str(exc)
        if time.monotonic() >= deadline:
            raise sqlite3.OperationalError(f"cannot switch to WAL: {problem}")
        time.sleep(retries.next())


# Connections kept for the replica's shared feed readers (`hub.store.fanout`): one each for
# the export, import and cluster-properties feeds, which read one page at a time, and one
# spare.
FEED_READER_CONNECTIONS = 4


def make_reader_engine(url: str, *, connector: PrimaryConnector | None = None) -> AsyncEngine:
    """The read view (`read_engine`) of a small pool of its own for the shared feed readers.

    A replica's request pool is shared by every request and every watch's replay; when a
    burst exhausts it, a reader that waited there failed, and with it every watch the
    reader feeds — whose re-opens then exhausted the pool again (docs/benchmarks.md §16).
    The readers are the replica's most important readers and there are only a few of them,
    so each gets a connection that nobody else can take. Nothing past the pool's size is
    opened: a reader waits only for another reader. On PostgreSQL the connections say
    `mcsync-hub feed` in `pg_stat_activity`.
    """
    return read_engine(
        make_engine(
            url,
            pool_size=FEED_READER_CONNECTIONS,
            max_overflow=0,
            connector=connector,
            purpose="feed",
        )
    )


def read_engine(engine: AsyncEngine) -> AsyncEngine:
    """A view of `engine` (same pool) whose transactions are reads.

    On SQLite they begin deferred (a snapshot, no writer lock). On PostgreSQL they run in
    autocommit: under READ COMMITTED every statement takes its own snapshot anyway, so a
    BEGIN/COMMIT pair around a read buys no consistency, only two more round trips — and
    every authenticated request starts with a read (the token lookup). On a loaded host
    a round trip costs about as much CPU as a small statement (bench/put_throughput).
    """
    if engine.dialect.name == "postgresql":
        return engine.execution_options(isolation_level="AUTOCOMMIT", **{_READ_ONLY_OPTION: True})
    return engine.execution_options(**{_READ_ONLY_OPTION: True})


# --- driver errors → DatabaseUnavailable ------------------------------------------------

_UNAVAILABLE_TYPES: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    # Every pooled connection busy past the pool timeout: overload, which is a 503 with
    # Retry-After like an outage, never a 500 (bench/scale: 1,000 watches hit it).
    PoolTimeout,
    sqlite3.OperationalError,
    sqlite3.InterfaceError,
)
try:  # asyncpg is a hard dependency, but keep the store importable for SQLite-only use
    import asyncpg

    _UNAVAILABLE_TYPES += (
        asyncpg.PostgresConnectionError,
        asyncpg.CannotConnectNowError,
        asyncpg.TooManyConnectionsError,
        asyncpg.InterfaceError,
        asyncpg.exceptions.AdminShutdownError,
        asyncpg.exceptions.CrashShutdownError,
        asyncpg.exceptions.DeadlockDetectedError,
        asyncpg.exceptions.SerializationError,
        asyncpg.exceptions.LockNotAvailableError,
        # A write on a standby: the connection landed on one after a failover
        # (docs/reference.md#ha-postgresql).
        asyncpg.exceptions.ReadOnlySQLTransactionError,
        # No host of a libpq host list takes writes (yet): between failure and promotion.
        asyncpg.exceptions.TargetServerAttributeNotMatched,
    )
    _DISCARD_TYPES: tuple[type[BaseException], ...] = (
        asyncpg.exceptions.ReadOnlySQLTransactionError,
        TimeoutError,
    )
except ImportError:  # pragma: no cover
    _DISCARD_TYPES = (TimeoutError,)


def _unavailable_reason(exc: BaseException) -> str | None:
    """Why `exc` means "database unavailable", or None when it is another kind of error."""
    if isinstance(exc, DBAPIError):
        if READ_ONLY_SQLSTATE in (
            getattr(exc.orig, "sqlstate", None),
            getattr(getattr(exc.orig, "__cause__", None), "sqlstate", None),
        ):
            return f"the server is read-only (no writable primary): {_first_line(exc.orig)}"
        if exc.connection_invalidated:
            return "the database connection was lost"
        if isinstance(exc, (OperationalError, InterfaceError)):
            if "no such table" in str(exc.orig) or "no such column" in str(exc.orig):
                # A missing schema is not an outage: readiness reports it, retrying won't help.
                return None
            return _first_line(exc.orig) or "the database is not answering"
        original = exc.orig
        cause = getattr(original, "__cause__", None)
        for candidate in (original, cause):
            if candidate is not None and isinstance(candidate, _UNAVAILABLE_TYPES):
                return _first_line(candidate)
        return None
    if isinstance(exc, (OSError, *_UNAVAILABLE_TYPES)):
        return _first_line(exc) or type(exc).__name__
    return None


def _first_line(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise connection-level failures as DatabaseUnavailable; let the rest through."""
    try:
        yield
    except DatabaseUnavailable:
        raise
    except Exception as exc:
        reason = _unavailable_reason(exc)
        if reason is None:
            raise
        raise DatabaseUnavailable(f"database unavailable: {reason}") from exc


_CONNECT_FAILURES: tuple[type[BaseException], ...] = (DBAPIError, OSError, *_UNAVAILABLE_TYPES)


@contextlib.asynccontextmanager
async def connection(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A pooled connection; DatabaseUnavailable when none can be had.

    Whatever stops a connection from being made is an outage, whatever the driver calls
    it: the error lists above name what a *live* connection may die of, but PostgreSQL
    refuses new ones in more ways than that (a database with `ALLOW_CONNECTIONS false`
    answers "not currently accepting connections", SQLSTATE 55000, which was a 500).
    """
    conn = engine.connect()
    try:
        await conn.start()
    except InvalidRequestError as exc:
        # The pool's checkout gave up: every connection it made failed its ping (each
        # landed on a read-only standby, say, docs/reference.md#ha-postgresql). An outage, not a
        # 500.
        raise DatabaseUnavailable(f"database unavailable: cannot connect: {exc}") from exc
    except _CONNECT_FAILURES as exc:
        reason = _first_line(exc.orig if isinstance(exc, DBAPIError) else exc)
        raise DatabaseUnavailable(f"database unavailable: cannot connect: {reason}") from exc
    try:
        yield conn
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def write_transaction(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """One write transaction (BEGIN IMMEDIATE on SQLite), errors translated."""
    with translate_errors():
        async with connection(engine) as conn, conn.begin():
            yield conn


@contextlib.asynccontextmanager
async def statements_on_their_own(engine: AsyncEngine) -> AsyncIterator[Any]:
    """PostgreSQL: the driver's (asyncpg's) connection of a pooled connection, with no
    transaction begun: each statement sent on it is a transaction of its own (the
    server's implicit one), one round trip where BEGIN, it and COMMIT are three. For a
    write that one statement says whole (`hub.store.heartbeats`); errors translated."""
    with translate_errors():
        async with connection(engine) as conn:
            raw = await conn.get_raw_connection()
            yield raw.driver_connection


@contextlib.asynccontextmanager
async def read_transaction(reader: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """One read transaction on a `read_engine` view (a deferred snapshot on SQLite)."""
    with translate_errors():
        async with connection(reader) as conn, conn.begin():
            yield conn
