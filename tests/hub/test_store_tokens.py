"""Member-token lookups (hub/store/tokens.py) on SQLite and PostgreSQL: concurrent
lookups share a query, and every answer is as fresh as the database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from hub.store import DatabaseUnavailable, Store
from tests.hub.test_store_support import open_store, register


@pytest.fixture
async def replicas(database_url: str) -> AsyncIterator[tuple[Store, Store]]:
    a = await open_store(database_url)
    b = await Store.open(database_url)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def test_concurrent_lookups_share_a_query_and_each_gets_its_own_answer(
    replicas: tuple[Store, Store],
) -> None:
    store, _ = replicas
    tokens = await register(store, *(f"c{i}" for i in range(20)))
    asked = [*tokens.items(), ("nobody", "not-a-token"), *tokens.items()]
    before = store.clusters._tokens.queries

    answers = await asyncio.gather(*(store.clusters.authenticate(t) for _, t in asked))

    assert answers == [None if name == "nobody" else name for name, _ in asked]
    assert store.clusters._tokens.queries - before < len(asked) // 2


async def test_a_deleted_clusters_token_is_refused_at_once_on_every_replica(
    replicas: tuple[Store, Store],
) -> None:
    a, b = replicas
    tokens = await register(a, "east", "west")
    assert await b.clusters.authenticate(tokens["east"]) == "east"

    await a.clusters.delete("east")

    # No cache: the other replica's very next lookup sees the delete.
    assert await b.clusters.authenticate(tokens["east"]) is None
    assert await a.clusters.authenticate(tokens["east"]) is None
    assert await b.clusters.authenticate(tokens["west"]) == "west"


async def test_a_lookup_during_an_outage_fails_and_the_next_one_works(
    replicas: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = replicas
    tokens = await register(store, "east")
    lookup = store.clusters._tokens
    real = lookup._query

    async def down(digests: list[str]) -> dict[str, str]:
        raise DatabaseUnavailable("database unavailable: test outage")

    monkeypatch.setattr(lookup, "_query", down)
    answers = await asyncio.gather(
        store.clusters.authenticate(tokens["east"]),
        store.clusters.authenticate("other"),
        return_exceptions=True,
    )
    assert all(isinstance(a, DatabaseUnavailable) for a in answers)

    monkeypatch.setattr(lookup, "_query", real)
    assert await store.clusters.authenticate(tokens["east"]) == "east"
