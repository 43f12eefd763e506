"""Export to a subset (`mcsync.io/import-clusters`, docs/reference.md#cluster-selection):
the hub leaves a key out of the import list and watch of every cluster whose reported
properties its selector does not match; when the selector or a cluster's properties
change, the key appears in (ADDED: the ServiceImport and its slices) or disappears from
(DELETED: the slices, then the ServiceImport) that cluster's feed, and only that
cluster's. A watch started between two such changes sees exactly what its cluster saw
then. On SQLite and PostgreSQL.

The selector travels as the exports' `importClusters` (the agent reads it from the
ServiceExport's annotation); the winner's is the ServiceImport's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.hub.test_api_endpointslices import slice_body, slice_path
from tests.hub.test_api_support import (
    ADMIN,
    READER,
    Hub,
    at,
    bearer,
    running_hub,
    serving,
    watch_events,
)

REGION = "region.topology.mcsync.io"
EU = {"matchProperties": {REGION: "eu"}}
US = {"matchExpressions": [{"key": REGION, "operator": "In", "values": ["us"]}]}


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url, watch_bookmark_seconds=0.3) as running:
        yield running


async def _props(hub: Hub, members: dict[str, dict[str, str]], cluster: str,
                 region: str) -> None:
    answer = await hub.client.put(f"/api/v1/clusters/{cluster}/properties",
                                  json={"properties": {REGION: region}},
                                  headers=members[cluster])
    assert answer.status_code == 200, answer.text


async def _listed(hub: Hub, cluster: str) -> list[tuple[str, str]]:
    answer = await hub.client.get(f"/api/v1/clusters/{cluster}/imports", headers=READER)
    assert answer.status_code == 200, answer.text
    return [(i["kind"], i["metadata"]["name"]) for i in answer.json()["items"]]


async def _revision(hub: Hub) -> str:
    answer = await hub.client.get("/api/v1/clusters/east/imports", headers=READER)
    rv: str = answer.json()["metadata"]["resourceVersion"]
    return rv


async def _watched(hub: Hub, cluster: str, start: str) -> list[tuple[str, str, str]]:
    answer = await hub.client.get(
        f"/api/v1/clusters/{cluster}/imports?watch=true&resourceVersion={start}"
        "&timeoutSeconds=1",
        headers=READER,
    )
    assert answer.status_code == 200, answer.text
    return [
        (e["type"], e["object"]["kind"], e["object"]["metadata"]["name"])
        for e in watch_events(answer.text)
        if e["type"] != "BOOKMARK"
    ]


IMPORT, SLICE = "ServiceImport", "EndpointSliceExport"
DEADLINE = 20.0


async def test_import_clusters_keeps_a_key_out_and_gives_it_back(hub: Hub) -> None:
    members = await hub.register("east", "west", "north")
    for cluster, region in (("east", "eu"), ("west", "us"), ("north", "eu")):
        await _props(hub, members, cluster, region)
    start = await _revision(hub)

    # 1. Exported to eu only: west never hears of it.
    assert (await hub.put("east", members["east"], created=at(0),
                          importClusters=EU)).status_code == 201
    put = await hub.client.put(slice_path("east"), json=slice_body(), headers=members["east"])
    assert put.status_code == 201, put.text
    assert await _listed(hub, "west") == []
    assert await _listed(hub, "north") == [(IMPORT, "web"), (SLICE, "web-abcde")]
    first = await _revision(hub)

    # 2. The selector turns to us: west gets it whole, north loses it.
    moved = await hub.put("east", members["east"], created=at(0), importClusters=US)
    assert moved.status_code == 200, moved.text
    assert await _listed(hub, "west") == [(IMPORT, "web"), (SLICE, "web-abcde")]
    assert await _listed(hub, "north") == []
    second = await _revision(hub)

    # 3. west moves to eu: out again; north moves to us: in.
    await _props(hub, members, "west", "eu")
    await _props(hub, members, "north", "us")
    assert await _listed(hub, "west") == []
    assert await _listed(hub, "north") == [(IMPORT, "web"), (SLICE, "web-abcde")]

    # 1. says "not yours" once, as a DELETED of what west never had (nothing to delete).
    assert await _watched(hub, "west", start) == [
        ("DELETED", IMPORT, "web"),  # 1.
        ("ADDED", IMPORT, "web"), ("ADDED", SLICE, "web-abcde"),  # 2.
        ("DELETED", SLICE, "web-abcde"), ("DELETED", IMPORT, "web"),  # 3.
    ]
    assert await _watched(hub, "north", start) == [
        ("ADDED", IMPORT, "web"), ("ADDED", SLICE, "web-abcde"),  # 1.
        ("DELETED", SLICE, "web-abcde"), ("DELETED", IMPORT, "web"),  # 2.
        ("ADDED", IMPORT, "web"), ("ADDED", SLICE, "web-abcde"),  # 3.
    ]
    # east (eu), the exporter, is an importer like any: in at 1., out at 2.; it hears
    # none of the rows meant for west or north.
    assert await _watched(hub, "east", start) == [
        ("ADDED", IMPORT, "web"), ("ADDED", SLICE, "web-abcde"),  # 1.
        ("DELETED", SLICE, "web-abcde"), ("DELETED", IMPORT, "web"),  # 2.
    ]
    # Watches started between the changes see what their cluster saw from there.
    assert await _watched(hub, "west", first) == (await _watched(hub, "west", start))[1:]
    assert await _watched(hub, "west", second) == [
        ("DELETED", SLICE, "web-abcde"), ("DELETED", IMPORT, "web"),
    ]
    assert await _watched(hub, "north", second) == [
        ("ADDED", IMPORT, "web"), ("ADDED", SLICE, "web-abcde"),
    ]

    # 4. An endpoint change reaches only the clusters let in.
    later = await _revision(hub)
    changed = await hub.client.put(slice_path("east"), json=slice_body(addresses=("10.1.0.9",)),
                                   headers=members["east"])
    assert changed.status_code == 200, changed.text
    assert await _watched(hub, "west", later) == []
    assert await _watched(hub, "north", later) == [("MODIFIED", SLICE, "web-abcde")]


async def test_a_cluster_registered_later_is_judged_before_it_reports(hub: Hub) -> None:
    members = await hub.register("east")
    await _props(hub, members, "east", "eu")
    assert (await hub.put("east", members["east"], created=at(0),
                          importClusters=EU)).status_code == 201
    late = await hub.register("late")
    assert await _listed(hub, "late") == []  # no properties yet: matches nothing
    start = await _revision(hub)
    await _props(hub, {**members, **late}, "late", "eu")
    assert await _listed(hub, "late") == [(IMPORT, "web")]
    assert await _watched(hub, "late", start) == [("ADDED", IMPORT, "web")]
    # The selector goes: everybody imports it, nobody is left out.
    await _props(hub, {**members, **late}, "late", "us")
    assert await _listed(hub, "late") == []
    assert (await hub.put("east", members["east"], created=at(0))).status_code == 200
    assert await _listed(hub, "late") == [(IMPORT, "web")]


async def test_a_scoped_watch_starts_from_its_scope_and_its_exclusions(hub: Hub) -> None:
    """An import watch starts from its cluster's import scope and from the keys it is left
    out of at its start revision, whether it names that revision (the exclusions now,
    corrected by the markers since) or starts from now (the exclusions now): both read
    with the scope in one statement (`importselection.import_watch_start`)."""
    members = await hub.register("east")
    answer = await hub.client.post(
        "/api/v1/clusters",
        json={"metadata": {"name": "west"}, "spec": {"importNamespaces": ["demo"]}},
        headers=ADMIN,
    )
    assert answer.status_code == 201, answer.text
    members["west"] = bearer(answer.json()["token"])
    await _props(hub, members, "east", "eu")
    await _props(hub, members, "west", "us")
    # demo/web: eu only, west is left out; demo/api: everyone; other/web: not west's scope.
    for namespace, name, spec in (("demo", "web", {"importClusters": EU}), ("demo", "api", {}),
                                  ("other", "web", {})):
        put = await hub.put("east", members["east"], created=at(0), namespace=namespace,
                            name=name, **spec)
        assert put.status_code == 201, put.text
    start = await _revision(hub)
    expected = [
        ("ADDED", SLICE, "api-abcde"),  # the one change of its scope it is not left out of
        ("ADDED", IMPORT, "web"), ("ADDED", SLICE, "web-abcde"),  # let in
    ]
    seen: list[tuple[str, str, str]] = []
    async with (
        serving(hub.app) as url,
        httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client,
        client.stream(
            "GET", "/api/v1/clusters/west/imports?watch=true&timeoutSeconds=30",
            headers=members["west"],
        ) as stream,
    ):
        assert stream.status_code == 200
        for namespace, service, name in (("demo", "web", "web-abcde"),
                                         ("other", "web", "web-abcde"),
                                         ("demo", "api", "api-abcde")):
            put = await hub.client.put(
                slice_path("east", namespace, name),
                json=slice_body(name, namespace=namespace, service=service),
                headers=members["east"],
            )
            assert put.status_code == 201, put.text
        await _props(hub, members, "west", "eu")
        async with asyncio.timeout(DEADLINE):
            async for line in stream.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["type"] == "BOOKMARK":
                    continue
                assert event["object"]["metadata"]["namespace"] == "demo", event
                seen.append(
                    (event["type"], event["object"]["kind"], event["object"]["metadata"]["name"])
                )
                if len(seen) == len(expected):
                    break
    assert seen == expected
    # From `start`, west is let in now: the marker since says it was left out then.
    assert await _watched(hub, "west", start) == expected
