"""Export routes end to end (docs/reference.md#conflicts, #rest-api): PUT/GET/DELETE/PATCH,
verdicts, lists, sync."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.hub.test_api_support import (
    ADMIN,
    READER,
    Hub,
    at,
    conflict_of,
    export_body,
    export_path,
    port,
    running_hub,
)


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


async def test_put_creates_then_replaces_and_reput_is_idempotent(hub: Hub) -> None:
    east = (await hub.register("east"))["east"]

    created = await hub.put("east", east)
    assert created.status_code == 201, created.text
    first = created.json()
    assert first["kind"] == "InternalServiceExport"
    assert conflict_of(first) == ("False", "NoConflicts")
    rv = first["metadata"]["resourceVersion"]

    again = await hub.put("east", east)
    assert again.status_code == 200
    assert again.json()["metadata"]["resourceVersion"] == rv

    replaced = await hub.put("east", east, ports=[port(8080, "http")], resource_version="101")
    assert replaced.status_code == 200
    assert int(replaced.json()["metadata"]["resourceVersion"]) > int(rv)
    assert replaced.json()["spec"]["ports"][0]["port"] == 8080

    read = await hub.client.get(export_path("east"), headers=east)
    assert read.status_code == 200
    assert (
        read.json()["metadata"]["resourceVersion"] == replaced.json()["metadata"]["resourceVersion"]
    )


async def test_put_for_unregistered_cluster_is_404(hub: Hub) -> None:
    answer = await hub.client.put(export_path("ghost"), json=export_body("ghost"), headers=ADMIN)
    assert answer.status_code == 404
    assert answer.json()["reason"] == "NotFound"
    assert "ghost" in answer.json()["message"]


async def test_port_conflict_marks_both_and_withdrawing_the_winner_rejudges(hub: Hub) -> None:
    members = await hub.register("east", "west")
    older = await hub.put("east", members["east"], created=at(0), ports=[port(80, "http")])
    newer = await hub.put("west", members["west"], created=at(60), ports=[port(81, "http")])
    assert older.status_code == 201 and newer.status_code == 201

    east = (await hub.client.get(export_path("east"), headers=ADMIN)).json()
    west = newer.json()
    assert conflict_of(east) == ("True", "PortConflict")
    assert conflict_of(west) == ("True", "PortConflict")
    assert "east" in west["status"]["conditions"][0]["message"] or any(
        "east" in c["message"] for c in west["status"]["conditions"]
    )

    imported = await hub.client.get("/api/v1/serviceimports/demo/web", headers=READER)
    assert imported.status_code == 200
    assert imported.json()["status"]["conflicts"] == ["PortConflict"]
    conflicting = await hub.client.get("/api/v1/serviceimports?conflict=true", headers=READER)
    assert [i["metadata"]["name"] for i in conflicting.json()["items"]] == ["web"]

    withdrawn = await hub.client.delete(export_path("east"), headers=members["east"])
    assert withdrawn.status_code == 200
    assert withdrawn.json()["metadata"]["name"] == "web"  # the last state

    west_now = (await hub.client.get(export_path("west"), headers=ADMIN)).json()
    assert conflict_of(west_now) == ("False", "NoConflicts")
    assert (await hub.client.get(export_path("east"), headers=ADMIN)).status_code == 404
    again = await hub.client.delete(export_path("east"), headers=members["east"])
    assert again.status_code == 404


async def test_patch_annotations_with_resource_version_precondition(hub: Hub) -> None:
    east = (await hub.register("east"))["east"]
    stored = (await hub.put("east", east, annotations={"keep": "me"})).json()
    rv = stored["metadata"]["resourceVersion"]
    key = "mcsync.io/last-observed-resource-version"

    patched = await hub.client.patch(
        export_path("east"),
        json={"metadata": {"resourceVersion": rv, "annotations": {key: "100"}}},
        headers={**east, "Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body["metadata"]["annotations"] == {"keep": "me", key: "100"}
    new_rv = body["metadata"]["resourceVersion"]
    assert int(new_rv) > int(rv)

    # The old resourceVersion is stale now: 409, and nothing changes.
    stale = await hub.client.patch(
        export_path("east"),
        json={"metadata": {"resourceVersion": rv, "annotations": {key: "999", "keep": None}}},
        headers={**east, "Content-Type": "application/merge-patch+json"},
    )
    assert stale.status_code == 409
    assert stale.json()["reason"] == "Conflict"
    current = (await hub.client.get(export_path("east"), headers=east)).json()
    assert current["metadata"]["annotations"] == {"keep": "me", key: "100"}
    assert current["metadata"]["resourceVersion"] == new_rv

    # Plain application/json is accepted too; null removes a key.
    removed = await hub.client.patch(
        export_path("east"),
        json={"metadata": {"resourceVersion": new_rv, "annotations": {"keep": None}}},
        headers=east,
    )
    assert removed.status_code == 200
    assert removed.json()["metadata"]["annotations"] == {key: "100"}

    wrong_type = await hub.client.patch(
        export_path("east"), content=b"keep=me", headers={**east, "Content-Type": "text/plain"}
    )
    assert wrong_type.status_code == 415
    missing = await hub.client.patch(
        export_path("east", name="nope"),
        json={"metadata": {"resourceVersion": "1", "annotations": {}}},
        headers=east,
    )
    assert missing.status_code == 404


async def test_lists_filter_and_page_with_continue(hub: Hub) -> None:
    members = await hub.register("east", "west")
    for name in ("alpha", "beta", "gamma", "delta"):
        assert (await hub.put("east", members["east"], name=name)).status_code == 201
    # west clashes with east on "alpha" only.
    await hub.put("west", members["west"], name="alpha", created=at(60), ports=[port(9, "http")])
    await hub.put("west", members["west"], name="beta", namespace="other")

    everything = (await hub.client.get("/api/v1/serviceexports", headers=READER)).json()
    assert everything["kind"] == "InternalServiceExportList"
    assert len(everything["items"]) == 6
    assert int(everything["metadata"]["resourceVersion"]) > 0

    async def names(query: str) -> list[tuple[str, str, str]]:
        answer = await hub.client.get(f"/api/v1/serviceexports?{query}", headers=READER)
        assert answer.status_code == 200, answer.text
        return [
            (
                i["spec"]["serviceReference"]["clusterId"],
                i["metadata"]["namespace"],
                i["metadata"]["name"],
            )
            for i in answer.json()["items"]
        ]

    assert await names("conflict=true") == [("east", "demo", "alpha"), ("west", "demo", "alpha")]
    assert len(await names("conflict=false")) == 4
    assert await names("namespace=other") == [("west", "other", "beta")]
    assert await names("name=beta") == [("east", "demo", "beta"), ("west", "other", "beta")]
    assert await names("cluster=west&namespace=demo") == [("west", "demo", "alpha")]

    # Paging: 2 per page across 3 pages gives every item exactly once, in order.
    seen: list[str] = []
    query = "limit=2"
    pages = 0
    while True:
        page = await hub.client.get(f"/api/v1/serviceexports?{query}", headers=READER)
        assert page.status_code == 200
        body = page.json()
        assert len(body["items"]) <= 2
        seen += [
            f"{i['spec']['serviceReference']['clusterId']}/{i['metadata']['namespace']}/"
            f"{i['metadata']['name']}"
            for i in body["items"]
        ]
        pages += 1
        token = body["metadata"].get("continue")
        if not token:
            break
        query = f"limit=2&continue={token}"
    assert pages == 3
    assert len(seen) == len(set(seen)) == 6

    own = await hub.client.get("/api/v1/clusters/east/serviceexports", headers=members["east"])
    assert {i["metadata"]["name"] for i in own.json()["items"]} == {
        "alpha",
        "beta",
        "gamma",
        "delta",
    }
    bad = await hub.client.get("/api/v1/serviceexports?limit=2&continue=garbage", headers=READER)
    assert bad.status_code == 422
    assert bad.json()["details"]["causes"][0]["field"] == "continue"


async def test_full_state_sync_upserts_and_withdraws(hub: Hub) -> None:
    east = (await hub.register("east"))["east"]
    for name in ("keep", "change", "drop"):
        await hub.put("east", east, name=name)

    body: dict[str, Any] = {
        "apiVersion": "mcsync.io/v1alpha1",
        "kind": "InternalServiceExportList",
        "items": [
            export_body("east", name="keep"),
            export_body("east", name="change", ports=[port(443, "https")], resource_version="7"),
            export_body("east", name="fresh"),
        ],
    }
    answer = await hub.client.put("/api/v1/clusters/east/serviceexports", json=body, headers=east)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert (result["created"], result["updated"], result["unchanged"], result["withdrawn"]) == (
        1,
        1,
        1,
        1,
    )
    listed = await hub.client.get("/api/v1/clusters/east/serviceexports", headers=east)
    assert sorted(i["metadata"]["name"] for i in listed.json()["items"]) == [
        "change",
        "fresh",
        "keep",
    ]

    # An item of another cluster is refused, naming the item; nothing changes.
    before = await hub.snapshot()
    body["items"].append(export_body("west", name="stray"))
    refused = await hub.client.put("/api/v1/clusters/east/serviceexports", json=body, headers=east)
    assert refused.status_code == 422
    assert refused.json()["details"]["causes"][0]["field"] == (
        "items[3].spec.serviceReference.clusterId"
    )
    duplicate = {**body, "items": [export_body("east", name="keep")] * 2}
    twice = await hub.client.put(
        "/api/v1/clusters/east/serviceexports", json=duplicate, headers=east
    )
    assert twice.status_code == 422
    assert await hub.snapshot() == before


async def test_cluster_records_and_heartbeat(hub: Hub) -> None:
    east = (await hub.register("east"))["east"]
    await hub.put("east", east)
    duplicate = await hub.client.post(
        "/api/v1/clusters", json={"metadata": {"name": "east"}}, headers=ADMIN
    )
    assert duplicate.status_code == 409
    assert duplicate.json()["reason"] == "AlreadyExists"

    beat = await hub.client.post(
        "/api/v1/clusters/east/heartbeat", json={"agentVersion": "0.1.0"}, headers=east
    )
    assert beat.status_code == 200
    answer = beat.json()
    assert answer["minAgentVersion"] == hub.settings.min_agent_version
    assert answer["hubVersion"]
    assert answer["state"] == "Ready"

    record = (await hub.client.get("/api/v1/clusters/east", headers=east)).json()
    assert record["status"]["state"] == "Ready"
    assert record["status"]["exportCount"] == 1
    assert record["status"]["agentVersion"] == "0.1.0"
    assert "importedServices" not in record["status"]  # this agent has not said

    # An importing agent says what its cluster holds of the fleet's imports.
    beat = await hub.client.post(
        "/api/v1/clusters/east/heartbeat",
        json={"agentVersion": "0.1.0", "importedServices": 12, "importedEndpoints": 340},
        headers=east,
    )
    assert beat.status_code == 200
    record = (await hub.client.get("/api/v1/clusters/east", headers=east)).json()
    assert (record["status"]["importedServices"], record["status"]["importedEndpoints"]) == (
        12,
        340,
    )
    negative = await hub.client.post(
        "/api/v1/clusters/east/heartbeat",
        json={"agentVersion": "0.1.0", "importedServices": -1},
        headers=east,
    )
    assert negative.status_code == 422
    assert "importedServices" in negative.text
    listed = (await hub.client.get("/api/v1/clusters", headers=READER)).json()
    assert [c["metadata"]["name"] for c in listed["items"]] == ["east"]

    deleted = await hub.client.delete("/api/v1/clusters/east", headers=ADMIN)
    assert deleted.status_code == 200
    exports = await hub.client.get("/api/v1/serviceexports", headers=READER)
    assert exports.json()["items"] == []
