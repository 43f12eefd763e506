"""`GET /api/v1/conflicts` over HTTP: readers see which exports differ from their key's
winner on which decided property, with both values; members may not; filters and paging
behave as every list's (the query's cases are in test_store_conflict_query)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.hub.test_api_support import READER, Hub, at, export_body, running_hub

PATH = "/api/v1/conflicts"


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


@pytest.fixture
async def members(hub: Hub) -> dict[str, dict[str, str]]:
    """east (oldest, the winner) and west export demo/web and demo/api; west's web is
    Headless with other labels, its api agrees."""
    headers = await hub.register("east", "west")
    bodies = [
        ("east", export_body("east", created=at(0), exportedLabels={"tier": "web"})),
        ("west", export_body("west", created=at(5), type="Headless")),
        ("east", export_body("east", name="api", created=at(0))),
        ("west", export_body("west", name="api", created=at(5))),
    ]
    for cluster, body in bodies:
        name = body["metadata"]["name"]
        answer = await hub.client.put(
            f"/api/v1/clusters/{cluster}/serviceexports/demo/{name}",
            json=body,
            headers=headers[cluster],
        )
        assert answer.status_code == 201, answer.text
    return headers


async def listing(hub: Hub, **params: str) -> dict[str, Any]:
    answer = await hub.client.get(PATH, params=params, headers=READER)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert body["kind"] == "ExportConflictList"
    return body


async def test_readers_see_each_disagreement_with_both_values(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    body = await listing(hub)
    assert body["metadata"]["resourceVersion"].isdigit()
    assert body["items"] == [
        {
            "namespace": "demo",
            "name": "web",
            "cluster": "west",
            "winner": "east",
            "properties": [
                {
                    "field": "type",
                    "reason": "TypeConflict",
                    "value": "Headless",
                    "decidedValue": "ClusterSetIP",
                },
                {
                    "field": "exportedLabels",
                    "reason": "LabelsConflict",
                    "value": {},
                    "decidedValue": {"tier": "web"},
                },
            ],
        }
    ]
    assert (await listing(hub, cluster="east"))["items"] == []
    assert (await listing(hub, name="api"))["items"] == []
    assert [i["name"] for i in (await listing(hub, namespace="demo", cluster="west"))["items"]] == [
        "web"
    ]


async def test_members_may_not_list_and_bad_input_is_422(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    assert (await hub.client.get(PATH, headers=members["east"])).status_code == 403
    assert (await hub.client.get(PATH)).status_code == 401
    for params in ({"continue": "x"}, {"limit": "0"}, {"namespace": "Not_A_Label"}):
        answer = await hub.client.get(PATH, params=params, headers=READER)
        assert answer.status_code == 422, params
        assert answer.json()["kind"] == "Status"


async def test_pages_follow_continue_tokens(hub: Hub, members: dict[str, dict[str, str]]) -> None:
    for i in range(3):
        for cluster, created, kind in (("east", 0, "ClusterSetIP"), ("west", 5, "Headless")):
            name = f"svc-{i}"
            answer = await hub.client.put(
                f"/api/v1/clusters/{cluster}/serviceexports/demo/{name}",
                json=export_body(cluster, name=name, created=at(created), type=kind),
                headers=members[cluster],
            )
            assert answer.status_code == 201, answer.text
    names: list[str] = []
    token = None
    for _ in range(10):
        page = await listing(hub, limit="3", **({"continue": token} if token else {}))
        names += [item["name"] for item in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == ["svc-0", "svc-1", "svc-2", "web"]
