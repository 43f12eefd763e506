"""Migration 0009 (docs/reference.md#credentials): the previous-token columns come and go
without touching a cluster's current token, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import inspect

from hub.store import Store, migrate
from hub.store.db import make_engine


async def cluster_columns(url: str) -> set[str]:
    engine = make_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda c: {col["name"] for col in inspect(c).get_columns("clusters")}
            )
    finally:
        await engine.dispose()


async def test_downgrade_keeps_the_current_token_and_upgrade_adds_rotation(
    database_url: str,
) -> None:
    await migrate.upgrade_async(database_url)
    store = await Store.open(database_url)
    try:
        await store.clusters.register("east", {})
        new, expires = await store.clusters.rotate_token("east", grace=timedelta(hours=1))
        assert expires is not None
    finally:
        await store.close()

    await migrate.downgrade_async(database_url, "0008")
    assert not {"previous_token_hash", "previous_token_expires"} & await cluster_columns(
        database_url
    )
    await migrate.upgrade_async(database_url)
    assert {"previous_token_hash", "previous_token_expires"} <= await cluster_columns(
        database_url
    )
    store = await Store.open(database_url)
    try:
        assert await store.clusters.authenticate(new) == "east"
    finally:
        await store.close()
