"""Run the Alembic migrations programmatically (docs/reference.md#failover: schema changes go
through Alembic).

No alembic.ini: the Config is built here, with `script_location` pointing at the
installed `migrations` package (found through `migrations.__file__`, so it works from a
wheel). Each command opens the hub's async engine, and Alembic runs on the synchronous
face of one of its connections (`AsyncConnection.run_sync`), inside one transaction.

Both flavours exist: `upgrade_async` & co. for code already inside an event loop (the
hub's startup, tests), and the plain `upgrade` & co. for the CLI; the plain ones run
their own event loop, in a helper thread when the caller already has one running.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

import migrations
from hub.store.db import make_engine, translate_errors

T = TypeVar("T")

MIGRATIONS_DIR = Path(migrations.__file__).parent


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config for the packaged migrations (and `url`, when given)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", str(MIGRATIONS_DIR / "versions"))
    if url is not None:
        # ConfigParser interpolation: a literal % in a password must be doubled.
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head() -> str:
    """The newest revision the packaged migrations know."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"the migrations have {len(heads)} heads, expected one: {heads}")
    return heads[0]


async def _with_connection(url: str, work: Callable[[Connection], T]) -> T:
    engine = make_engine(url, pool_size=1)
    try:
        with translate_errors():
            async with engine.begin() as conn:
                return await conn.run_sync(work)
    finally:
        await engine.dispose()


# Any constant: hub replicas starting together over one PostgreSQL take turns migrating.
MIGRATION_LOCK_KEY = 0x6D6373796E63  # "mcsync"


def _command(url: str, action: Callable[[Config], None]) -> Callable[[Connection], None]:
    def run(connection: Connection) -> None:
        if connection.dialect.name == "postgresql":
            # Held until this transaction commits; the second replica then finds the
            # schema at head and does nothing. (SQLite: BEGIN IMMEDIATE serialises.)
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        config = alembic_config(url)
        config.attributes["connection"] = connection
        action(config)

    return run


async def upgrade_async(url: str, revision: str = "head") -> None:
    """Upgrade the database at `url` to `revision` (default: the head)."""
    await _with_connection(url, _command(url, lambda c: command.upgrade(c, revision)))


async def downgrade_async(url: str, revision: str) -> None:
    """Downgrade the database at `url` to `revision` (`base` empties the schema)."""
    await _with_connection(url, _command(url, lambda c: command.downgrade(c, revision)))


def current_of_connection(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_async(url: str) -> str | None:
    """The revision the database at `url` is at; None for an empty database."""
    return await _with_connection(url, current_of_connection)


def _run(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    # Called from inside a running loop (which must not be blocked re-entrantly):
    # run the migration on a fresh loop in a helper thread and wait for it.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


def upgrade(url: str, revision: str = "head") -> None:
    """Blocking `upgrade_async`."""
    _run(lambda: upgrade_async(url, revision))


def downgrade(url: str, revision: str) -> None:
    """Blocking `downgrade_async`."""
    _run(lambda: downgrade_async(url, revision))


def current(url: str) -> str | None:
    """Blocking `current_async`."""
    return _run(lambda: current_async(url))
