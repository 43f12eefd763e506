"""Databases for the tests: every database test runs on SQLite *and* PostgreSQL.

Every hub test that touches the database takes `database_url`, which is parametrized
over both back ends (ids `sqlite` and `postgresql`) and answers a plain URL of a database
of its own, already migrated to head and holding nothing but what the migrations seed.
Tests may still run `migrate.upgrade_async(url)` on it first: at head that changes nothing.

Why not a fresh database per test: creating, migrating and dropping a PostgreSQL database
costs about a second, and a few hundred tests take one each. So each pytest process
(each xdist worker) migrates once:

* SQLite: a template file, migrated once, copied into the test's `tmp_path`.
* PostgreSQL: a template database, migrated once, and a working database cloned from it
  that is reused from test to test. After each test its connections are ended and, if
  its schema and database settings are still exactly the template's, every table is
  emptied and the migrations' seed rows and sequence positions put back;
  anything else (a downgrade, a dropped table, a changed database setting) gets the
  working database dropped and cloned again. A test can therefore never see another's rows.

Tests of the migrations themselves need an EMPTY database (no schema): modules whose
name says `migration` (`test_migrations.py`, `test_migration_0007.py`) get one, any
other test asks with `@pytest.mark.empty_database`, or takes `empty_database_url`.
`make_database_url(backend, tmp_path)` also answers an empty database (for module-scoped
hubs that migrate at start); `dispose_database_url` drops it.

PostgreSQL comes from `MCSYNC_TEST_POSTGRES_URL` (default
`postgresql://postgres@127.0.0.1:5432/test`). Where it is unreachable the PostgreSQL
variants skip with a message saying so, except under `CI=true`, where an unreachable
PostgreSQL fails the run: CI must never pass by silently skipping half the matrix.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")
EMPTY_MARKER = "empty_database"


def postgres_admin_url() -> str:
    return os.environ.get("MCSYNC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, ""))


async def _admin(sql: str, url: str | None = None) -> None:
    import asyncpg

    conn = await asyncpg.connect(url or postgres_admin_url(), timeout=10)
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
    """A fresh, EMPTY database (no schema) of `backend`; `dispose_database_url` after."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'mcsync.db'}"
    return create_postgres_database()


def dispose_database_url(url: str) -> None:
    if url.startswith("postgresql"):
        drop_postgres_database(url)


def _migrate(url: str) -> None:
    from hub.store import migrate

    migrate.upgrade(url)


# -- SQLite: a migrated template file ----------------------------------------------------


class _SqliteTemplate:
    """One migrated SQLite file per pytest process, copied for each test."""

    def __init__(self) -> None:
        self._path: Path | None = None

    def copy_to(self, target: Path) -> None:
        if self._path is None:
            directory = Path(os.environ.get("TMPDIR", "/tmp")) / f"mcsync-tpl-{os.getpid()}"
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            path = directory / "template.db"
            _migrate(f"sqlite:///{path}")
            # Fold the write-ahead log into the file, so the file alone is the database.
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
            atexit.register(shutil.rmtree, directory, True)
            self._path = path
        shutil.copyfile(self._path, target)


# -- PostgreSQL: a template database and a working database reset between tests ------------

# What must be identical to the template's for a TRUNCATE to restore the working database:
# the schema (tables, columns, indexes, constraints, sequences, functions, triggers, views,
# schemas, extensions), the migration revision, and the database's own settings.
_FINGERPRINT = """
SELECT md5(coalesce(string_agg(x, E'\\n' ORDER BY x), '')) FROM (
  SELECT 'c ' || table_schema || '.' || table_name || '.' || column_name || ' ' || data_type
         || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS x
    FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema')
  UNION ALL SELECT 'i ' || schemaname || ' ' || indexdef FROM pg_indexes
    WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
  UNION ALL SELECT 'k ' || conrelid::regclass::text || ' ' || conname || ' '
         || pg_get_constraintdef(oid) FROM pg_constraint
    WHERE connamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
  UNION ALL SELECT 's ' || schemaname || '.' || sequencename FROM pg_sequences
  UNION ALL SELECT 'f ' || p.oid::regprocedure::text FROM pg_proc p
    WHERE pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
  UNION ALL SELECT 't ' || tgrelid::regclass::text || ' ' || tgname FROM pg_trigger
    WHERE NOT tgisinternal
  UNION ALL SELECT 'v ' || schemaname || '.' || viewname FROM pg_views
    WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
  UNION ALL SELECT 'n ' || nspname FROM pg_namespace
  UNION ALL SELECT 'e ' || extname FROM pg_extension
  UNION ALL SELECT 'd ' || datallowconn::text || ' ' || datconnlimit::text || ' '
         || datistemplate::text FROM pg_database WHERE datname = current_database()
  UNION ALL SELECT 'r ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
    WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
) AS everything
"""
_TABLES = """
SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables
 WHERE schemaname NOT IN ('pg_catalog', 'information_schema') AND tablename <> 'alembic_version'
 ORDER BY 1
"""
_SEQUENCES = """
SELECT quote_ident(schemaname) || '.' || quote_ident(sequencename), last_value FROM pg_sequences
 WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1
"""


class _PostgresWorkingDatabase:
    """The template database and the working database of this pytest process."""

    def __init__(self) -> None:
        prefix = f"mcsync_w_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.template = f"{prefix}_tpl"
        self.name = f"{prefix}_db"
        self._template_ready = False
        self._working_ready = False
        self._fingerprint = ""
        self._tables: list[str] = []
        self._seed: dict[str, str] = {}  # table -> JSON array of its rows after migrating
        self._sequences: list[tuple[str, int | None]] = []
        self._registered = False

    @property
    def url(self) -> str:
        return _with_database(postgres_admin_url(), self.name)

    def acquire(self) -> str:
        require_postgres()
        if not self._registered:
            atexit.register(self.close)
            self._registered = True
        if not self._template_ready:
            asyncio.run(self._make_template())
            self._template_ready = True
        if not self._working_ready:
            asyncio.run(_admin(f'CREATE DATABASE "{self.name}" TEMPLATE "{self.template}"'))
            self._working_ready = True
        return self.url

    def release(self) -> None:
        """Put the working database back to the template's state, or drop it if it can't be."""
        try:
            restored = asyncio.run(self._reset())
        except Exception:  # anything unexpected: start from the template again
            restored = False
        if not restored:
            asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
            self._working_ready = False

    def close(self) -> None:
        if _postgres_unavailable() is not None:
            return
        for name in (self.name, self.template):
            try:
                asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            except Exception:
                pass
        self._template_ready = self._working_ready = False

    async def _make_template(self) -> None:
        import asyncpg

        await _admin(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')
        await _admin(f'CREATE DATABASE "{self.template}"')
        template_url = _with_database(postgres_admin_url(), self.template)
        from hub.store import migrate

        await migrate.upgrade_async(template_url)
        conn = await asyncpg.connect(template_url, timeout=10)
        try:
            self._fingerprint = await conn.fetchval(_FINGERPRINT)
            self._tables = [row[0] for row in await conn.fetch(_TABLES)]
            self._seed = {}
            for table in self._tables:
                rows = await conn.fetchval(
                    f"SELECT coalesce(json_agg(t), '[]'::json)::text FROM {table} AS t"
                )
                if json.loads(rows):
                    self._seed[table] = rows
            self._sequences = [(row[0], row[1]) for row in await conn.fetch(_SEQUENCES)]
        finally:
            await conn.close()

    async def _reset(self) -> bool:
        import asyncpg

        # Connecting fails if a test left the database refusing connections: dropped then.
        conn = await asyncpg.connect(self.url, timeout=10)
        try:
            # Whatever the test left connected (a store it never closed, a killed hub's
            # backends) would hold locks the deletes wait for.
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            if await conn.fetchval(_FINGERPRINT) != self._fingerprint:
                return False
            async with conn.transaction():
                await conn.execute("SET LOCAL lock_timeout = '5s'")
                await self._empty_tables(conn)
                for table, rows in self._seed.items():
                    await conn.execute(
                        f"INSERT INTO {table} SELECT * FROM json_populate_recordset("
                        f"NULL::{table}, $1::json)",
                        rows,
                    )
                for sequence, last_value in self._sequences:
                    if last_value is None:
                        await conn.execute(f"ALTER SEQUENCE {sequence} RESTART")
                    else:
                        await conn.execute(
                            "SELECT setval($1::regclass, $2, true)", sequence, last_value
                        )
        finally:
            await conn.close()
        return True

    async def _empty_tables(self, conn: Any) -> None:
        """DELETE every row, foreign-key triggers off (superuser), as one would TRUNCATE:
        on a few small tables DELETE takes milliseconds where TRUNCATE, which makes new
        files for every table, takes a tenth of a second. TRUNCATE for other roles."""
        if not self._tables:
            return
        try:
            async with conn.transaction():  # a savepoint: a refusal leaves the rest intact
                await conn.execute("SET LOCAL session_replication_role = replica")
                for table in self._tables:
                    await conn.execute(f"DELETE FROM {table}")
        except Exception as exc:
            import asyncpg

            if not isinstance(exc, asyncpg.InsufficientPrivilegeError):
                raise
            await conn.execute(f"TRUNCATE {', '.join(self._tables)} RESTART IDENTITY CASCADE")


_sqlite_template = _SqliteTemplate()
_postgres_working = _PostgresWorkingDatabase()


def _wants_empty(request: pytest.FixtureRequest) -> bool:
    module = Path(str(request.node.fspath)).name
    return "migration" in module or (
        request.node.get_closest_marker(EMPTY_MARKER) is not None
    )


# -- fixtures ------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{EMPTY_MARKER}: `database_url` is an empty database (no schema), as for the "
        "migration tests",
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    _postgres_working.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The database back end of this test variant: `sqlite` or `postgresql`."""
    return str(request.param)


@pytest.fixture
def empty_database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A plain URL of a fresh, EMPTY database (no schema) of the variant's back end."""
    url = make_database_url(backend, tmp_path)
    try:
        yield url
    finally:
        dispose_database_url(url)


@pytest.fixture
def database_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A plain URL of a database of the variant's back end, migrated to head, that no other
    test has rows in (empty, no schema, in migration tests: see the module's docstring)."""
    if _wants_empty(request):
        yield from _empty(backend, tmp_path)
        return
    if backend == "sqlite":
        path = tmp_path / "mcsync.db"
        _sqlite_template.copy_to(path)
        yield f"sqlite:///{path}"
        return
    url = _postgres_working.acquire()
    try:
        yield url
    finally:
        _postgres_working.release()


def _empty(backend: str, tmp_path: Path) -> Iterator[str]:
    url = make_database_url(backend, tmp_path)
    try:
        yield url
    finally:
        dispose_database_url(url)


__all__: list[Any] = [
    "BACKENDS",
    "DEFAULT_POSTGRES_URL",
    "create_postgres_database",
    "dispose_database_url",
    "drop_postgres_database",
    "make_database_url",
    "postgres_admin_url",
    "require_postgres",
]
