"""Migration 0008: the cluster-selection column of exports. A downgrade drops the column
only (the records stay, their specs whole); an upgrade fills it again from the stored
specs, so the fleet-wide conflict query sees the same disagreements as before."""

from __future__ import annotations

from sqlalchemy import inspect, text

from hub.store import Store, migrate
from hub.store.db import make_engine
from tests.hub.test_store_support import at, make_export

EU = {"propertySelector": {"matchProperties": {"region": "eu"}}}
US = {"propertySelector": {"matchProperties": {"region": "us"}}}


async def _exports_table(url: str) -> tuple[set[str], int]:
    """The exports table's columns and its row count, read without the store."""
    engine = make_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            columns = await conn.run_sync(
                lambda c: {col["name"] for col in inspect(c).get_columns("exports")}
            )
            count = (await conn.execute(text("SELECT count(*) FROM exports"))).scalar_one()
    finally:
        await engine.dispose()
    return columns, int(count)


async def _disputes(store: Store) -> list[tuple[str, str]]:
    page = await store.conflicts.list()
    return [(i.cluster, p.field) for i in page.items for p in i.properties]


async def test_downgrade_keeps_the_records_and_upgrade_refills_the_column(
    database_url: str,
) -> None:
    await migrate.upgrade_async(database_url)
    store = await Store.open(database_url)
    try:
        for cluster in ("east", "west", "north"):
            await store.clusters.register(cluster, {})
        await store.exports.put("east", make_export("east", created=at(0), clusterSelectors=[EU]))
        await store.exports.put("west", make_export("west", created=at(1), clusterSelectors=[US]))
        await store.exports.put("north", make_export("north", created=at(2)))
        before = await _disputes(store)
        assert before == [("north", "clusterSelectors"), ("west", "clusterSelectors")]
    finally:
        await store.close()

    await migrate.downgrade_async(database_url, "0007")
    columns, count = await _exports_table(database_url)
    assert "cluster_selection" not in columns and "spec" in columns
    assert count == 3

    await migrate.upgrade_async(database_url)
    columns, count = await _exports_table(database_url)
    assert "cluster_selection" in columns and count == 3
    store = await Store.open(database_url)
    try:
        assert await _disputes(store) == before
    finally:
        await store.close()
