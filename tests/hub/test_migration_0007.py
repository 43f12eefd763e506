"""Migration 0007 (docs/reference.md#cluster-properties): a hub upgraded over stored
clusters starts with no properties reported; a downgrade drops the properties and their
feed rows only, and the next upgrade starts again from "not reported". Both databases."""

from __future__ import annotations

from sqlalchemy import func, select

from hub.store import Store, migrate
from hub.store.tables import changes
from shared import constants
from tests.hub.test_store_support import make_export


async def test_upgrade_and_downgrade_keep_everything_but_the_properties(
    database_url: str,
) -> None:
    await migrate.upgrade_async(database_url, "0006")
    await migrate.upgrade_async(database_url)
    store = await Store.open(database_url)
    try:
        await store.clusters.register("east", {})
        await store.exports.put("east", make_export("east", name="a"))
        assert await store.cluster_properties.put("east", {"region.example.com": "eu"})
        assert (await store.clusters.get("east")).status.properties == {
            "region.example.com": "eu"
        }
    finally:
        await store.close()

    await migrate.downgrade_async(database_url, "0006")
    assert await migrate.current_async(database_url) == "0006"
    await migrate.upgrade_async(database_url)
    store = await Store.open(database_url)
    try:
        east = await store.clusters.get("east")
        assert east.status.properties is None  # dropped by the downgrade: not reported
        assert east.status.export_count == 1  # the rest is kept
        async with store._ctx.read() as conn:
            counted = await conn.execute(
                select(changes.c.kind, func.count()).group_by(changes.c.kind)
            )
            kinds = {kind: count for kind, count in counted}
        assert constants.KIND_CLUSTER_PROPERTIES not in kinds
        assert kinds[constants.KIND_EXPORT] >= 1
        items, _ = await store.cluster_properties.list_all()
        assert items == []
    finally:
        await store.close()
