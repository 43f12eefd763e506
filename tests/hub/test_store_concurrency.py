"""Racing writers on one key: one winner, verdicts equal to a fresh judgement, no errors.

Two `Store` instances on one database stand for two hub replicas (docs/reference.md#conflicts: "two
hub replicas racing on one key end with the same single winner, no deadlock, no 5xx").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from hub.store import Store
from tests.hub.test_store_support import at, make_export, open_store, port
from tests.hub.test_store_verdicts import assert_verdicts_match_fresh_judgement

CLUSTERS = [f"c{i:02d}" for i in range(24)]


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[tuple[Store, Store]]:
    a = await open_store(database_url)
    b = await Store.open(database_url)
    for name in CLUSTERS:
        await a.clusters.register(name, {})
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


def racing_export(index: int, cluster: str):  # type: ignore[no-untyped-def]
    # Different specs (ports, some types) and timestamps with ties, so the winner is
    # decided by the timestamp for most and by the cluster id for the tied ones.
    return make_export(
        cluster,
        created=at(100 - (index // 2)),
        ports=[port(8000 + index, "http")],
        type="Headless" if index % 3 == 0 else "ClusterSetIP",
    )


async def test_concurrent_puts_on_one_key_from_two_replicas(stores: tuple[Store, Store]) -> None:
    a, b = stores
    results = await asyncio.gather(
        *(
            (a if i % 2 else b).exports.put(cluster, racing_export(i, cluster))
            for i, cluster in enumerate(CLUSTERS)
        )
    )
    assert all(r.created for r in results)

    imported = await a.imports.get("demo", "web")
    # oldest timestamp: indexes 22 and 23 (at(89)); tie broken by cluster id
    assert imported.status.winning_cluster == "c22"
    assert sorted(c.cluster for c in imported.status.clusters) == CLUSTERS
    await assert_verdicts_match_fresh_judgement(a)
    await assert_verdicts_match_fresh_judgement(b)

    # every revision was taken once: the feed holds one change per record write
    events = await a.feed.changes_since(revision=0, limit=10_000)
    revisions = [int(e.resource_version or 0) for e in events]
    assert revisions == sorted(set(revisions))
    assert revisions[-1] == await a.feed.current_revision()


async def test_concurrent_puts_and_withdrawals(stores: tuple[Store, Store]) -> None:
    a, b = stores
    for i, cluster in enumerate(CLUSTERS[:12]):
        await a.exports.put(cluster, racing_export(i, cluster))

    async def churn(i: int, cluster: str) -> None:
        store = a if i % 2 else b
        if i < 12 and i % 2 == 0:
            await store.exports.delete(cluster, "demo", "web")
        else:
            await store.exports.put(cluster, racing_export(i + 1, cluster))

    await asyncio.gather(*(churn(i, c) for i, c in enumerate(CLUSTERS)))
    remaining = (await a.exports.list(namespace="demo", name="web")).items
    assert len(remaining) == 24 - 6
    await assert_verdicts_match_fresh_judgement(a)


async def test_concurrent_writes_on_many_keys_do_not_deadlock(
    stores: tuple[Store, Store],
) -> None:
    a, b = stores
    names = [f"svc{i}" for i in range(6)]

    async def writer(i: int, cluster: str) -> None:
        store = a if i % 2 else b
        # each cluster touches the keys in a different order
        for name in names[i % 6 :] + names[: i % 6]:
            await store.exports.put(cluster, make_export(cluster, name=name, created=at(i)))

    async def syncer(cluster: str) -> None:
        await a.exports.sync(
            cluster, [make_export(cluster, name=n, created=at(50)) for n in reversed(names)]
        )

    await asyncio.gather(*(writer(i, c) for i, c in enumerate(CLUSTERS[:8])), syncer("c20"))
    for name in names:
        await assert_verdicts_match_fresh_judgement(a, name=name)
