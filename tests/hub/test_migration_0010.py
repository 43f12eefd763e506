"""Migration 0010: the hub's own sync hold is a column of its own; a downgrade drops it and
nothing else, an upgrade gives every cluster none."""

from __future__ import annotations

from sqlalchemy import inspect

from hub.store import Store, migrate


async def _columns(store: Store) -> set[str]:
    async with store.engine.connect() as conn:
        found = await conn.run_sync(lambda c: inspect(c).get_columns("clusters"))
    return {column["name"] for column in found}


async def test_downgrade_drops_only_the_sync_hold(database_url: str) -> None:
    await migrate.upgrade_async(database_url)
    store = await Store.open(database_url)
    try:
        await store.clusters.register("east", {})
        assert "sync_withdrawal_held" in await _columns(store)
    finally:
        await store.close()
    await migrate.downgrade_async(database_url, "0009")
    await migrate.upgrade_async(database_url)
    store = await Store.open(database_url)
    try:
        east = await store.clusters.get("east")
        assert east.status.conditions == [] and not east.status.withdrawal_allowed
        assert "sync_withdrawal_held" in await _columns(store)
    finally:
        await store.close()
