"""Migration 0005: a hub upgraded with records already stored starts with every
cluster's quota counts equal to its rows, and a downgrade drops scope and counts only."""

from __future__ import annotations

from sqlalchemy import select

from hub.store import Store, migrate
from hub.store.tables import cluster_usage
from shared.models import EndpointSliceExport, MemberClusterSpec
from tests.hub.test_store_support import make_export


async def test_upgrade_counts_what_is_stored_and_downgrade_keeps_the_records(
    database_url: str,
) -> None:
    await migrate.upgrade_async(database_url)
    store = await Store.open(database_url)
    try:
        await store.clusters.register("east", {}, MemberClusterSpec(export_namespaces=["demo"]))
        await store.clusters.register("west", {})
        for name in ("a", "b"):
            await store.exports.put("east", make_export("east", name=name))
        slice_ = EndpointSliceExport.model_validate(
            {
                "metadata": {"name": "a-x1", "namespace": "demo"},
                "spec": {
                    "serviceName": "a",
                    "addressType": "IPv4",
                    "endpoints": [{"addresses": ["10.1.0.5"]}],
                },
            }
        )
        await store.endpointslices.put("east", slice_)
    finally:
        await store.close()

    await migrate.downgrade_async(database_url, "0004")  # the counts and the scope go
    await migrate.upgrade_async(database_url)  # and are made again from the rows
    store = await Store.open(database_url)
    try:
        async with store._ctx.read() as conn:
            rows = (await conn.execute(select(cluster_usage))).mappings().all()
        assert {r["cluster_id"]: (r["exports"], r["endpoint_slices"]) for r in rows} == {
            "east": (2, 1),
            "west": (0, 0),
        }
        east = await store.clusters.get("east")
        assert east.spec.export_namespaces is None  # dropped by the downgrade: every namespace
        assert east.status.export_count == 2
    finally:
        await store.close()
