"""Member clusters: registration and token hashes (docs/reference.md#credentials), state
(docs/reference.md#failover), deletion."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import select

from hub.store import AlreadyExists, NotFound, Store
from hub.store.tables import clusters
from tests.hub.test_store_support import at, conflict_of, make_export, open_store, opened_store


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url) as s:
        yield s


async def test_register_stores_only_a_hash_of_the_token(store: Store) -> None:
    cluster, token = await store.clusters.register("alpha", {"region": "eu"})
    assert cluster.metadata.name == "alpha"
    assert cluster.metadata.labels == {"region": "eu"}
    assert cluster.status.state == "Pending"
    assert len(token) >= 40

    async with store.engine.connect() as conn:
        rows = (await conn.execute(select(clusters))).mappings().all()
    assert len(rows) == 1
    stored = " ".join(str(v) for v in rows[0].values())
    assert token not in stored
    assert rows[0]["token_hash"] == hashlib.sha256(token.encode()).hexdigest()


async def test_authenticate_maps_token_to_cluster(store: Store) -> None:
    _, alpha = await store.clusters.register("alpha", {})
    _, beta = await store.clusters.register("beta", {})
    assert alpha != beta
    assert await store.clusters.authenticate(alpha) == "alpha"
    assert await store.clusters.authenticate(beta) == "beta"
    assert await store.clusters.authenticate("not-a-token") is None
    assert await store.clusters.authenticate("") is None


async def test_register_twice_or_badly(store: Store) -> None:
    await store.clusters.register("alpha", {})
    with pytest.raises(AlreadyExists, match="alpha"):
        await store.clusters.register("alpha", {})
    with pytest.raises(ValueError, match="DNS-1123"):
        await store.clusters.register("Not_A_Name", {})
    assert [c.metadata.name for c in await store.clusters.list()] == ["alpha"]


async def test_heartbeat_and_state(database_url: str) -> None:
    store = await open_store(database_url, cluster_ttl=timedelta(seconds=90))
    try:
        await store.clusters.register("alpha", {})
        beat = await store.clusters.heartbeat("alpha", agent_version="0.1.0")
        assert beat.status.state == "Ready"
        assert beat.status.agent_version == "0.1.0"
        assert beat.status.last_heartbeat_time is not None
        await store.exports.put("alpha", make_export("alpha"))
        export = await store.exports.get("alpha", "demo", "web")
        assert export.status.cluster_state == "Ready"
        with pytest.raises(NotFound, match="nobody"):
            await store.clusters.heartbeat("nobody", agent_version="0.1.0")
    finally:
        await store.close()

    # The same database seen by a replica with a tiny TTL: the heartbeat is too old.
    short = await Store.open(database_url, cluster_ttl=timedelta(microseconds=1))
    try:
        assert (await short.clusters.get("alpha")).status.state == "Stale"
        assert (await short.exports.get("alpha", "demo", "web")).status.cluster_state == "Stale"
        listed = await short.exports.list()
        assert listed.items[0].status.cluster_state == "Stale"
        imported = await short.imports.get("demo", "web")
        assert [(c.cluster, c.state) for c in imported.status.clusters] == [("alpha", "Stale")]
        events = await short.feed.changes_since(revision=0)
        assert events[0].object.status.cluster_state == "Stale"  # type: ignore[union-attr]
    finally:
        await short.close()


async def test_list_counts_exports_and_conflicts(store: Store) -> None:
    for name in ("alpha", "beta", "gamma"):
        await store.clusters.register(name, {})
    await store.exports.put("alpha", make_export("alpha", name="one", created=at(0)))
    await store.exports.put("alpha", make_export("alpha", name="two", created=at(0)))
    await store.exports.put("beta", make_export("beta", name="one", type="Headless"))
    counts = {
        c.metadata.name: (c.status.export_count, c.status.conflict_count)
        for c in await store.clusters.list()
    }
    assert counts == {"alpha": (2, 1), "beta": (1, 1), "gamma": (0, 0)}
    one = await store.clusters.get("alpha")
    assert (one.status.export_count, one.status.conflict_count) == (2, 1)
    with pytest.raises(NotFound, match="delta"):
        await store.clusters.get("delta")


async def test_delete_withdraws_exports_and_rejudges(store: Store) -> None:
    _, token = await store.clusters.register("alpha", {})
    await store.clusters.register("beta", {})
    await store.exports.put("alpha", make_export("alpha", name="web", created=at(0)))
    await store.exports.put("alpha", make_export("alpha", name="api", created=at(0)))
    await store.exports.put("beta", make_export("beta", name="web", created=at(5), type="Headless"))
    assert conflict_of(await store.exports.get("beta", "demo", "web"))[0] == "True"

    gone = await store.clusters.delete("alpha")
    assert gone.metadata.name == "alpha"
    assert gone.status.export_count == 2

    assert [c.metadata.name for c in await store.clusters.list()] == ["beta"]
    assert await store.clusters.authenticate(token) is None
    assert (await store.exports.list(cluster_id="alpha")).items == []
    assert conflict_of(await store.exports.get("beta", "demo", "web")) == ("False", "NoConflicts")
    assert (await store.imports.get("demo", "web")).status.winning_cluster == "beta"
    with pytest.raises(NotFound):
        await store.imports.get("demo", "api")
    deleted = [
        e.object.metadata.name  # type: ignore[union-attr]
        for e in await store.feed.changes_since(revision=0, cluster_id="alpha")
        if e.type == "DELETED"
    ]
    assert sorted(deleted) == ["api", "web"]
    with pytest.raises(NotFound, match="alpha"):
        await store.clusters.delete("alpha")
    with pytest.raises(NotFound, match="alpha"):
        await store.exports.put("alpha", make_export("alpha"))
    # the name is free again
    await store.clusters.register("alpha", {})
