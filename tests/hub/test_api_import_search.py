"""The ServiceImport list's search (`q`, docs/reference.md#console): the console's search field
answered by the hub in SQL, with the list's paging and `conflict` filter, on both databases."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.hub.test_api_support import READER, Hub, running_hub

# (namespace, name, exporting clusters); shop/api's two exporters disagree on the type.
FLEET = [
    ("demo", "web", ("east", "west")),
    ("demo", "api", ("east",)),
    ("shop", "cart", ("west",)),
    ("shop", "api", ("north", "west")),
    ("team_1", "db", ("north",)),
]


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        members = await running.register("east", "west", "north")
        for namespace, name, clusters in FLEET:
            for index, cluster in enumerate(clusters):
                kind = "Headless" if (namespace, name, index) == ("shop", "api", 1) else None
                extra = {"type": kind} if kind else {}
                answer = await running.put(
                    cluster, members[cluster], namespace=namespace.replace("_", "-"),
                    name=name, **extra,
                )
                assert answer.status_code == 201, answer.text
        yield running


async def keys(hub: Hub, query: str) -> list[str]:
    answer = await hub.client.get(f"/api/v1/serviceimports?{query}", headers=READER)
    assert answer.status_code == 200, answer.text
    return [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in answer.json()["items"]]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("q=cart", ["shop/cart"]),
        ("q=WEST+demo", ["demo/web"]),  # every word: cluster west, namespace demo
        ("q=api", ["demo/api", "shop/api"]),
        ("q=demo/w", ["demo/web"]),  # across namespace/name
        ("q=nort", ["shop/api", "team-1/db"]),  # a cluster id's substring
        ("q=++north++", ["shop/api", "team-1/db"]),
        ("q=", ["demo/api", "demo/web", "shop/api", "shop/cart", "team-1/db"]),
        ("q=nothing-like-this", []),
        ("q=api&conflict=true", ["shop/api"]),
        ("q=api&conflict=false", ["demo/api"]),
    ],
)
async def test_search_matches_every_word_in_key_or_exporting_cluster(
    hub: Hub, query: str, expected: list[str]
) -> None:
    assert await keys(hub, query) == expected


async def test_search_pages_with_continue_tokens(hub: Hub) -> None:
    seen: list[str] = []
    path = "/api/v1/serviceimports?q=west&limit=1"
    url = path
    for _ in range(5):
        page = (await hub.client.get(url, headers=READER)).json()
        seen += [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
        url = f"{path}&continue={token}"
    assert seen == ["demo/web", "shop/api", "shop/cart"]


@pytest.mark.parametrize("bad", ["a%25b", "x" * 129, "a_b", "<script>"])
async def test_a_bad_search_is_422_naming_q(hub: Hub, bad: str) -> None:
    answer = await hub.client.get(f"/api/v1/serviceimports?q={bad}", headers=READER)
    assert answer.status_code == 422, answer.text
    assert "query parameter q" in answer.json()["message"]
