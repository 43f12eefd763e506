"""The import feed's watch (docs/reference.md#change-feeds): `GET
/api/v1/clusters/{c}/imports?watch=true`.

Every agent of the fleet holds this feed open, so what it promises is checked here on both
databases: a replay from a list's revision carries ServiceImports and EndpointSliceExports
(and no export records) in revision order; a live endpoint change in one cluster reaches
another cluster's watch as one event with its ports cut to what its source serves; one
change is read and encoded once for every watch (the bytes shared); a member reads only
under its own path; and a revision the history no longer holds is a 410.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from shared.constants import ANNOTATION_CHANGED_AT as CHANGED_AT
from shared.timefmt import parse_rfc3339, utcnow
from tests.hub.test_api_endpointslices import slice_body, slice_path
from tests.hub.test_api_support import (
    READER,
    Hub,
    at,
    port,
    running_hub,
    serving,
    watch_events,
)
from tests.hub.test_watch_fanout import until

DEADLINE = 30.0  # generous: a slow shared machine must not fail these


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url, watch_bookmark_seconds=0.3) as running:
        yield running


def _what(event: dict[str, Any]) -> tuple[str, str, str]:
    obj = event["object"]
    return event["type"], obj["kind"], obj["metadata"]["name"]


async def _revision(hub: Hub, headers: dict[str, str], cluster: str = "west") -> str:
    listed = await hub.client.get(f"/api/v1/clusters/{cluster}/imports", headers=headers)
    assert listed.status_code == 200, listed.text
    rv: str = listed.json()["metadata"]["resourceVersion"]
    return rv


async def _next_change(lines: AsyncIterator[str]) -> dict[str, Any]:
    async with asyncio.timeout(DEADLINE):
        async for line in lines:
            if line.strip():
                event: dict[str, Any] = json.loads(line)
                if event["type"] != "BOOKMARK":
                    return event
    raise AssertionError("the watch ended without the expected event")


async def test_replay_carries_imports_and_slices_in_revision_order(hub: Hub) -> None:
    members = await hub.register("east", "west")
    start = await _revision(hub, members["west"])
    assert (await hub.put("east", members["east"], created=at(0))).status_code == 201
    put = await hub.client.put(slice_path("east"), json=slice_body(), headers=members["east"])
    assert put.status_code == 201, put.text
    withdrawn = await hub.client.delete(
        "/api/v1/clusters/east/serviceexports/demo/web", headers=members["east"]
    )
    assert withdrawn.status_code == 200

    answer = await hub.client.get(
        f"/api/v1/clusters/west/imports?watch=true&resourceVersion={start}&timeoutSeconds=1",
        headers=members["west"],
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    events = [e for e in watch_events(answer.text) if e["type"] != "BOOKMARK"]
    # No InternalServiceExport: those belong to the export feed.
    assert [_what(e) for e in events] == [
        ("ADDED", "ServiceImport", "web"),
        ("ADDED", "EndpointSliceExport", "web-abcde"),
        ("DELETED", "EndpointSliceExport", "web-abcde"),
        ("DELETED", "ServiceImport", "web"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(set(versions))
    assert events[1]["object"]["spec"]["clusterId"] == "east"

    # Resuming from the middle gives exactly the rest.
    rest = await hub.client.get(
        f"/api/v1/clusters/west/imports?watch=true&resourceVersion={versions[1]}"
        "&timeoutSeconds=1",
        headers=members["west"],
    )
    assert [_what(e) for e in watch_events(rest.text) if e["type"] != "BOOKMARK"] == [
        _what(e) for e in events[2:]
    ]


async def test_an_endpoint_change_in_one_cluster_reaches_the_others_watch(hub: Hub) -> None:
    members = await hub.register("east", "west")
    await hub.put("east", members["east"], created=at(0), ports=[port(80, "http")])
    await hub.put("west", members["west"], created=at(5), ports=[port(80, "http")])
    body = slice_body(ports=[{"name": "http", "port": 8080}, {"name": "admin", "port": 9000}])
    assert (await hub.client.put(slice_path("east"), json=body, headers=members["east"])).is_success
    start = await _revision(hub, members["west"])
    async with (
        serving(hub.app) as url,
        httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client,
        client.stream(
            "GET",
            f"/api/v1/clusters/west/imports?watch=true&resourceVersion={start}"
            "&timeoutSeconds=60",
            headers=members["west"],
        ) as stream,
    ):
        assert stream.status_code == 200
        lines = stream.aiter_lines()
        # A pod's IP changes in east.
        moved = slice_body(
            ports=[{"name": "http", "port": 8080}, {"name": "admin", "port": 9000}],
            addresses=("10.1.0.99",),
        )
        answer = await hub.client.put(slice_path("east"), json=moved, headers=members["east"])
        assert answer.status_code == 200, answer.text
        event = await _next_change(lines)
        assert _what(event) == ("MODIFIED", "EndpointSliceExport", "web-abcde")
        spec = event["object"]["spec"]
        assert spec["endpoints"][0]["addresses"] == ["10.1.0.99"]
        # Only the ports the import has and east serves: `admin` is not an import port.
        assert [p["name"] for p in spec["ports"]] == ["http"]
        assert event["object"]["metadata"]["resourceVersion"] == (
            answer.json()["metadata"]["resourceVersion"]
        )
        # The hub's commit time rides along, so an agent can measure its import lag.
        changed = parse_rfc3339(event["object"]["metadata"]["annotations"][CHANGED_AT])
        assert abs((utcnow() - changed).total_seconds()) < DEADLINE
    # A listed object says what is, not when it changed.
    listed = await hub.client.get("/api/v1/clusters/west/imports", headers=members["west"])
    for item in listed.json()["items"]:
        assert CHANGED_AT not in (item["metadata"].get("annotations") or {})


async def test_one_change_is_encoded_once_for_every_watch(hub: Hub) -> None:
    members = await hub.register("east", "west")
    await hub.put("east", members["east"], created=at(0))
    start = await _revision(hub, members["west"])
    fanout = hub.store.import_feed.fanout
    async with (
        serving(hub.app) as url,
        httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client,
    ):
        async with asyncio.TaskGroup() as group:
            received: list[dict[str, Any]] = []

            async def watch(headers: dict[str, str], cluster: str) -> None:
                async with client.stream(
                    "GET",
                    f"/api/v1/clusters/{cluster}/imports?watch=true&resourceVersion={start}"
                    "&timeoutSeconds=60",
                    headers=headers,
                ) as stream:
                    assert stream.status_code == 200
                    received.append(await _next_change(stream.aiter_lines()))

            for index in range(5):
                cluster = "west" if index % 2 else "east"
                group.create_task(watch(members[cluster], cluster))
            await until(lambda: fanout.subscriber_count == 5, "five watches to subscribe")
            before = fanout.encodings
            fanned_before = fanout.deliveries
            body = slice_body()
            put = await hub.client.put(slice_path("east"), json=body, headers=members["east"])
            assert put.status_code == 201, put.text
        assert [_what(e) for e in received] == [("ADDED", "EndpointSliceExport", "web-abcde")] * 5
        assert fanout.encodings - before == 1
        assert fanout.deliveries - fanned_before == 5
        # The same, as an operator reads it.
        scraped = (await hub.client.get("/metrics")).text
        assert 'mcsync_hub_feed_events_encoded_total{feed="imports"}' in scraped
        fanned = [
            line for line in scraped.splitlines()
            if line.startswith('mcsync_hub_feed_events_fanned_out_total{feed="imports"}')
        ]  # fmt: skip
        assert fanned and float(fanned[0].split()[-1]) >= 5


async def test_a_member_watches_only_under_its_own_path(hub: Hub) -> None:
    members = await hub.register("east", "west")
    other = await hub.client.get(
        "/api/v1/clusters/east/imports?watch=true&timeoutSeconds=1", headers=members["west"]
    )
    assert other.status_code == 403
    reader = await hub.client.get(
        "/api/v1/clusters/east/imports?watch=true&timeoutSeconds=1", headers=READER
    )
    assert reader.status_code == 200


async def test_a_revision_the_history_no_longer_holds_is_410(database_url: str) -> None:
    async with running_hub(database_url, history_limit=2) as hub:
        east = (await hub.register("east"))["east"]
        for number in range(1, 8):
            await hub.put("east", east, ports=[port(number, "p")], resource_version=str(number))
        answer = await hub.client.get(
            "/api/v1/clusters/east/imports?watch=true&resourceVersion=1&timeoutSeconds=1",
            headers=east,
        )
        assert answer.status_code == 410
        assert answer.json()["reason"] == "Gone"
        relisted = await _revision(hub, east, "east")
        resumed = await hub.client.get(
            f"/api/v1/clusters/east/imports?watch=true&resourceVersion={relisted}"
            "&timeoutSeconds=1",
            headers=east,
        )
        assert resumed.status_code == 200
