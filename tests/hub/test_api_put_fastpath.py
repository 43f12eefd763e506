"""The single-export PUT answers the same whichever way a request reaches it.

A request entirely in order is answered by the route's fast path (`hub.api.fastpath`),
anything else by FastAPI's declared route: a re-PUT labelled in another JSON media type,
or with a path name the fast path's stricter check declines, must get the declared
route's answer, byte for byte where the stored object is the same.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tests.hub.test_api_support import Hub, export_body, export_path, running_hub


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json"],
)
async def test_a_reput_in_any_json_media_type_answers_the_same_object(
    hub: Hub, content_type: str
) -> None:
    east = (await hub.register("east"))["east"]
    content = json.dumps(export_body("east")).encode()
    created = await hub.client.put(
        export_path("east"), content=content, headers={**east, "Content-Type": "application/json"}
    )
    assert created.status_code == 201, created.text

    again = await hub.client.put(
        export_path("east"), content=content, headers={**east, "Content-Type": content_type}
    )
    assert again.status_code == 200, again.text
    assert again.content == created.content


async def test_a_path_name_with_a_trailing_newline_is_422_naming_it(hub: Hub) -> None:
    east = (await hub.register("east"))["east"]
    answer = await hub.client.put(
        export_path("east", name="web%0A"), json=export_body("east"), headers=east
    )
    assert answer.status_code == 422, answer.text
    fields = [cause.get("field") for cause in answer.json()["details"]["causes"]]
    assert "name" in fields, fields
    listed = await hub.client.get("/api/v1/clusters/east/serviceexports", headers=east)
    assert listed.json()["items"] == []


async def test_a_member_writing_under_another_cluster_is_403_and_stores_nothing(
    hub: Hub,
) -> None:
    tokens = await hub.register("east", "west")
    answer = await hub.client.put(
        export_path("west"), json=export_body("west"), headers=tokens["east"]
    )
    assert answer.status_code == 403, answer.text
    assert "/api/v1/clusters/east/" in answer.json()["message"]
    listed = await hub.client.get("/api/v1/clusters/west/serviceexports", headers=tokens["west"])
    assert listed.json()["items"] == []
