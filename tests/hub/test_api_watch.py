"""The change feed over HTTP (docs/reference.md#change-feeds): replay, live push, bookmarks, 410,
shutdown.

Live streams go through a real uvicorn server on a loopback port (`serving`), because
httpx's ASGI transport only returns a response once the app has finished it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from hub.api.deps import context_of
from hub.app import begin_shutdown
from tests.hub.test_api_support import (
    ADMIN,
    READER,
    Hub,
    at,
    export_path,
    port,
    running_hub,
    serving,
    watch_events,
)

DEADLINE = 30.0  # generous: a slow shared machine must not fail these


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url, watch_bookmark_seconds=0.3) as running:
        yield running


def _changes(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (
            e["type"],
            e["object"]["spec"]["serviceReference"]["clusterId"],
            e["object"]["metadata"]["name"],
        )
        for e in events
        if e["type"] != "BOOKMARK"
    ]


async def test_watch_replays_changes_after_a_revision_in_order(hub: Hub) -> None:
    members = await hub.register("east", "west")
    start = (await hub.client.get("/api/v1/serviceexports", headers=READER)).json()
    rv0 = start["metadata"]["resourceVersion"]

    await hub.put("east", members["east"], name="web", created=at(0))
    await hub.put("east", members["east"], name="api")
    await hub.put("west", members["west"], name="web", created=at(60), ports=[port(81, "http")])
    await hub.client.delete(export_path("east", name="api"), headers=members["east"])

    answer = await hub.client.get(
        f"/api/v1/clusters/east/serviceexports?watch=true&resourceVersion={rv0}&timeoutSeconds=1",
        headers=members["east"],
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    events = watch_events(answer.text)
    # east/web is re-judged (MODIFIED) when west's clashing export arrives; west's own
    # records are not in east's feed.
    assert _changes(events) == [
        ("ADDED", "east", "web"),
        ("ADDED", "east", "api"),
        ("MODIFIED", "east", "web"),
        ("DELETED", "east", "api"),
    ]
    versions = [
        int(e["object"]["metadata"]["resourceVersion"]) for e in events if e["type"] != "BOOKMARK"
    ]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert all(v > int(rv0) for v in versions)

    # Resuming from the middle gives exactly the rest.
    middle = versions[1]
    rest = await hub.client.get(
        f"/api/v1/clusters/east/serviceexports?watch=true&resourceVersion={middle}"
        "&timeoutSeconds=1",
        headers=members["east"],
    )
    assert _changes(watch_events(rest.text)) == _changes(events)[2:]

    # The fleet-wide watch (reader) sees both clusters.
    fleet = await hub.client.get(
        f"/api/v1/serviceexports?watch=true&resourceVersion={rv0}&timeoutSeconds=1",
        headers=READER,
    )
    assert ("ADDED", "west", "web") in _changes(watch_events(fleet.text))
    forbidden = await hub.client.get(
        "/api/v1/serviceexports?watch=true&timeoutSeconds=1", headers=members["east"]
    )
    assert forbidden.status_code == 403


async def _next_event(lines: AsyncIterator[str], *, skip_bookmarks: bool) -> dict[str, Any]:
    async with asyncio.timeout(DEADLINE):
        async for line in lines:
            if not line.strip():
                continue
            event: dict[str, Any] = json.loads(line)
            if skip_bookmarks and event["type"] == "BOOKMARK":
                continue
            return event
    raise AssertionError("the watch ended without the expected event")


async def test_open_watch_receives_new_writes_and_bookmarks_while_idle(hub: Hub) -> None:
    members = await hub.register("east")
    async with (
        serving(hub.app) as url,
        httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client,
        client.stream(
            "GET",
            "/api/v1/clusters/east/serviceexports?watch=true&timeoutSeconds=60",
            headers=members["east"],
        ) as stream,
    ):
        assert stream.status_code == 200
        lines = stream.aiter_lines()

        # Idle: a BOOKMARK carrying the revision the watch has reached.
        idle = await _next_event(lines, skip_bookmarks=False)
        assert idle["type"] == "BOOKMARK"
        revision = (await hub.client.get("/api/v1/serviceexports", headers=READER)).json()
        assert (
            idle["object"]["metadata"]["resourceVersion"] == revision["metadata"]["resourceVersion"]
        )

        # A write made after the watch opened is pushed to it.
        stored = await hub.put("east", members["east"])
        assert stored.status_code == 201
        pushed = await _next_event(lines, skip_bookmarks=True)
        assert pushed["type"] == "ADDED"
        assert pushed["object"]["metadata"]["name"] == "web"
        assert (
            pushed["object"]["metadata"]["resourceVersion"]
            == stored.json()["metadata"]["resourceVersion"]
        )

        # Bookmarks after the push carry at least the pushed revision.
        later = await _next_event(lines, skip_bookmarks=False)
        assert later["type"] == "BOOKMARK"
        assert int(later["object"]["metadata"]["resourceVersion"]) >= int(
            stored.json()["metadata"]["resourceVersion"]
        )


async def test_watch_ends_when_the_hub_shuts_down(hub: Hub) -> None:
    await hub.register("east")
    async with (
        serving(hub.app) as url,
        httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client,
        client.stream(
            "GET", "/api/v1/serviceexports?watch=true&timeoutSeconds=600", headers=ADMIN
        ) as stream,
    ):
        assert stream.status_code == 200
        lines = stream.aiter_lines()
        assert (await _next_event(lines, skip_bookmarks=False))["type"] == "BOOKMARK"
        begin_shutdown(hub.app)
        async with asyncio.timeout(DEADLINE):
            async for _line in lines:
                pass  # drains whatever was in flight; the loop ends when the stream does


async def test_watch_from_a_compacted_revision_is_410(database_url: str) -> None:
    async with running_hub(database_url, history_limit=2) as hub:
        east = (await hub.register("east"))["east"]
        for number in range(1, 8):
            await hub.put("east", east, ports=[port(number, "p")], resource_version=str(number))
        answer = await hub.client.get(
            "/api/v1/clusters/east/serviceexports?watch=true&resourceVersion=1&timeoutSeconds=1",
            headers=east,
        )
        assert answer.status_code == 410
        status = answer.json()
        assert status["kind"] == "Status"
        assert status["reason"] == "Gone"
        assert "relist" in status["message"]

        # Relisting and watching from the list's revision works.
        listed = await hub.client.get("/api/v1/clusters/east/serviceexports", headers=east)
        rv = listed.json()["metadata"]["resourceVersion"]
        resumed = await hub.client.get(
            f"/api/v1/clusters/east/serviceexports?watch=true&resourceVersion={rv}"
            "&timeoutSeconds=1",
            headers=east,
        )
        assert resumed.status_code == 200


async def test_watcher_behind_the_history_gets_an_error_event_then_the_end(
    database_url: str,
) -> None:
    from hub.api.deps import context_of
    from hub.api.watch import ExportFeedSource, WatchStream

    async with running_hub(database_url, history_limit=2) as hub:
        east = (await hub.register("east"))["east"]
        start = await hub.store.feed.current_revision()
        stream = WatchStream(
            source=ExportFeedSource(hub.store.feed, "east"),
            ctx=context_of(hub.app),
            start=start,
            timeout_seconds=DEADLINE,
        )
        lines = stream.lines([])
        # The watcher does not get to read while the history moves past it.
        for number in range(1, 8):
            await hub.put("east", east, ports=[port(number, "p")], resource_version=str(number))
        async with asyncio.timeout(DEADLINE):
            events = [json.loads(line) async for line in lines]
        assert [e["type"] for e in events] == ["ERROR"]
        assert events[0]["object"]["code"] == 410
        assert events[0]["object"]["reason"] == "Gone"


async def test_watches_over_the_per_token_limit_are_429_naming_it(database_url: str) -> None:
    async with running_hub(database_url, watch_limit_per_token=2) as hub:
        members = await hub.register("east", "west")
        path = "/api/v1/clusters/{}/serviceexports?watch=true&timeoutSeconds=60"
        async with (
            serving(hub.app) as url,
            httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client,
            contextlib.AsyncExitStack() as held,
        ):
            for _ in range(2):
                stream = await held.enter_async_context(
                    client.stream("GET", path.format("east"), headers=members["east"])
                )
                assert stream.status_code == 200
            over = await client.get(path.format("east"), headers=members["east"])
            assert over.status_code == 429
            status = over.json()
            assert status["kind"] == "Status"
            assert status["code"] == 429
            assert status["reason"] == "TooManyRequests"
            assert "watch_limit_per_token = 2" in status["message"]
            assert "member of cluster 'east'" in status["message"]
            assert over.headers["Retry-After"]
            # The limit is per token: another member, and the admin, are not held back.
            for token, cluster in ((members["west"], "west"), (ADMIN, "east")):
                async with client.stream("GET", path.format(cluster), headers=token) as other:
                    assert other.status_code == 200
            # A list is no watch: never limited.
            listed = await client.get(
                "/api/v1/clusters/east/serviceexports", headers=members["east"]
            )
            assert listed.status_code == 200

        # The held watches ended with their connections: the token's slots are free again.
        ctx = context_of(hub.app)
        async with asyncio.timeout(DEADLINE):
            while ctx.watches_by_token:  # noqa: ASYNC110 (a condition, not an event)
                await asyncio.sleep(0.02)
        answer = await hub.client.get(
            "/api/v1/clusters/east/serviceexports?watch=true&timeoutSeconds=1",
            headers=members["east"],
        )
        assert answer.status_code == 200


async def test_a_watch_ends_and_frees_its_subscription_when_the_client_disconnects(
    hub: Hub,
) -> None:
    members = await hub.register("east")
    fanout = hub.store.feed.fanout
    ctx = context_of(hub.app)
    async with serving(hub.app) as url, httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client:
        async with client.stream(
            "GET",
            "/api/v1/clusters/east/serviceexports?watch=true&timeoutSeconds=600",
            headers=members["east"],
        ) as stream:
            assert stream.status_code == 200
            assert (await _next_event(stream.aiter_lines(), skip_bookmarks=False))["type"]
            assert fanout.subscriber_count == 1
        # The client hung up long before the watch's 600 s: the hub lets go at once.
        async with asyncio.timeout(DEADLINE):
            while fanout.subscriber_count or ctx.open_watches or ctx.watches_by_token:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
