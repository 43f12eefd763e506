"""Alembic environment: runs migrations over the hub's async engine.

`hub.store.migrate` builds the Alembic Config in code and hands over an open
*synchronous* connection (the `connection.run_sync` side of an AsyncConnection) in
`config.attributes["connection"]`; this file then only configures the context on it. A
URL in `sqlalchemy.url` without a connection (someone running the `alembic` command by
hand) opens its own async engine. Offline mode renders SQL for the URL's dialect.
"""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context

from hub.dburl import async_url
from hub.store.db import make_engine

config = context.config


def _configure(connection: Any) -> None:
    context.configure(
        connection=connection,
        target_metadata=None,
        # SQLite cannot ALTER most things in place; batch mode rebuilds tables.
        render_as_batch=connection.dialect.name == "sqlite",
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine(url: str) -> None:
    engine = make_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_configure)
    finally:
        await engine.dispose()


def run_offline() -> None:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no sqlalchemy.url configured for offline migrations")
    context.configure(url=async_url(url), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection and no sqlalchemy.url given to the migrations")
    asyncio.run(_run_with_own_engine(url))


if context.is_offline_mode():
    run_offline()
else:
    run_online()
