"""A cluster's watch opens the same whichever way the request reaches its route.

An agent's watch open entirely in order (`watch=true`, a resourceVersion and a timeout in
digits, the cluster's own token, or the admin's or the reader's) is answered by the
route's fast path (`hub.api.watchpath`), anything else by FastAPI's declared route: a
refusal keeps its status and the field it names, and a request the fast path declines
but the route accepts streams the same events. On SQLite and PostgreSQL, for the import
watch and the export watch alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.hub.test_api_endpointslices import slice_body, slice_path
from tests.hub.test_api_support import ADMIN, READER, Hub, bearer, running_hub, watch_events

ROUTES = ["imports", "serviceexports"]


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


async def _changed(hub: Hub) -> tuple[dict[str, dict[str, str]], str]:
    """east and west registered; the revision before east exported demo/web and its slice."""
    members = await hub.register("east", "west")
    listed = await hub.client.get("/api/v1/clusters/east/imports", headers=members["east"])
    start: str = listed.json()["metadata"]["resourceVersion"]
    assert (await hub.put("east", members["east"])).status_code == 201
    put = await hub.client.put(slice_path("east"), json=slice_body(), headers=members["east"])
    assert put.status_code == 201, put.text
    return members, start


async def _events(hub: Hub, path: str, headers: dict[str, str]) -> list[tuple[str, str, str]]:
    answer = await hub.client.get(path, headers=headers)
    assert answer.status_code == 200, answer.text
    return [
        (e["type"], e["object"]["kind"], e["object"]["metadata"]["name"])
        for e in watch_events(answer.text)
        if e["type"] != "BOOKMARK"
    ]


@pytest.mark.parametrize("route", ROUTES)
async def test_an_open_the_fast_path_declines_streams_the_same_events(
    hub: Hub, route: str
) -> None:
    members, start = await _changed(hub)
    base = f"/api/v1/clusters/east/{route}?watch=true&resourceVersion={start}&timeoutSeconds=1"
    expected = await _events(hub, base, members["east"])
    assert expected, "east's changes after the start revision"
    for token in (ADMIN, READER):
        assert await _events(hub, base, token) == expected
    for query in (
        f"watch=1&resourceVersion={start}&timeoutSeconds=1",
        f"watch=True&resourceVersion={start}&timeoutSeconds=1",
        f"watch=true&resourceVersion={start}&timeoutSeconds=1&allowWatchBookmarks=true",
        f"watch=true&resourceVersion=00{start}&timeoutSeconds=01",
    ):
        path = f"/api/v1/clusters/east/{route}?{query}"
        assert await _events(hub, path, members["east"]) == expected, query


@pytest.mark.parametrize("route", ROUTES)
async def test_a_watch_open_out_of_order_is_refused_as_the_route_refuses_it(
    hub: Hub, route: str
) -> None:
    members, start = await _changed(hub)
    query = f"watch=true&resourceVersion={start}&timeoutSeconds=1"
    east = f"/api/v1/clusters/east/{route}"
    for path, headers, status, field in (
        (f"{east}?{query}", members["west"], 403, None),  # another cluster's token
        (f"{east}?{query}", bearer("not-a-token"), 401, None),
        (f"{east}?{query}", {}, 401, None),
        (f"{east}?watch=true&resourceVersion=12a", members["east"], 422, "resourceVersion"),
        (f"{east}?watch=true&resourceVersion=-1", members["east"], 422, "resourceVersion"),
        (f"{east}?{query}&timeoutSeconds=0", members["east"], 422, "timeoutSeconds"),
        (f"{east}?watch=true&timeoutSeconds=0", members["east"], 422, "timeoutSeconds"),
        (f"{east}?{query}&limit=0", members["east"], 422, "limit"),
        (f"/api/v1/clusters/east%0A/{route}?{query}", ADMIN, 422, "cluster"),
    ):
        answer = await hub.client.get(path, headers=headers)
        assert answer.status_code == status, (path, answer.text)
        body = answer.json()
        assert body["kind"] == "Status", body
        if field is not None:
            fields = [cause.get("field") for cause in body["details"]["causes"]]
            assert field in fields, (path, fields)
