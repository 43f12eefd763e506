"""Quotas and scope inside the store's group commit (docs/reference.md#scope-and-limits,
`hub.store.usage`).

A quota refusal or a scope refusal fails only its own write: the creates and updates that
share its transaction commit, each with its own answer, and the cluster's counts end equal
to its rows. Both back ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select

from hub.store import Store
from hub.store.errors import Forbidden
from hub.store.tables import cluster_usage, exports
from hub.store.usage import Quotas
from shared.models import MemberClusterSpec
from tests.hub.test_store_support import make_export, opened_store


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, "east") as opened:
        opened.limit(Quotas(exports=3, endpoint_slices=3))
        yield opened


async def _counts(store: Store, cluster: str) -> tuple[int, int]:
    async with store._ctx.read() as conn:
        used = (
            await conn.execute(
                select(cluster_usage.c.exports).where(cluster_usage.c.cluster_id == cluster)
            )
        ).scalar_one()
        rows = (
            await conn.execute(
                select(func.count()).select_from(exports).where(exports.c.cluster_id == cluster)
            )
        ).scalar_one()
    return int(used), int(rows)


async def test_creates_past_the_quota_fail_alone_in_a_shared_batch(store: Store) -> None:
    assert (await store.exports.put("east", make_export("east", name="a"))).created
    # Five writes at once (one group-committed transaction, or a few): an update of `a`
    # and four creates, of which two fit.
    writes = [
        store.exports.put("east", make_export("east", name="a", resource_version="101")),
        *(store.exports.put("east", make_export("east", name=n)) for n in "bcde"),
    ]
    before = store.exports._batcher.batches
    results = await asyncio.gather(*writes, return_exceptions=True)
    # Not a failed batch retried one write at a time: the refusals are answers of their own.
    assert store.exports._batcher.batches - before < len(writes)
    assert not isinstance(results[0], BaseException) and results[0].changed
    created = [r for r in results[1:] if not isinstance(r, BaseException)]
    refused = [r for r in results[1:] if isinstance(r, Forbidden)]
    assert (len(created), len(refused)) == (2, 2), results
    assert "--max-exports-per-cluster 3" in str(refused[0])
    assert await _counts(store, "east") == (3, 3)


async def test_writes_outside_the_scope_fail_alone(database_url: str) -> None:
    async with opened_store(database_url) as store:
        await store.clusters.register("east", {}, MemberClusterSpec(export_namespaces=["demo"]))
        results = await asyncio.gather(
            store.exports.put("east", make_export("east", name="a")),
            store.exports.put("east", make_export("east", name="b", namespace="other")),
            return_exceptions=True,
        )
        assert not isinstance(results[0], BaseException) and results[0].created
        assert isinstance(results[1], Forbidden)
        assert "spec.exportNamespaces ['demo']" in str(results[1])
        assert await _counts(store, "east") == (1, 1)
