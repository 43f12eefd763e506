"""What the hub stores stays within what it accepts, whatever the write path
(docs/reference.md#scope-and-limits): continue tokens, merged annotation patches, the
scope on every write, full-state syncs of one cluster one at a time, and a record
stored too large by an older hub that can still be read, listed and removed."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.hub.test_api_support import (
    ADMIN,
    READER,
    Hub,
    export_body,
    export_path,
    running_hub,
)

PATCH = {"content-type": "application/merge-patch+json"}


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


def _token(kind: str, key: list[str]) -> str:
    raw = json.dumps({"v": 1, "kind": kind, "key": key}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("path", "kind", "width"),
    [
        ("/api/v1/serviceexports", "serviceexports", 3),
        ("/api/v1/serviceimports", "serviceimports", 2),
        ("/api/v1/endpointslices", "endpointslices", 4),
    ],
)
@pytest.mark.parametrize("bad", ["a\x00b", "A" * 3, "x" * 300, "a\nb"])
async def test_a_forged_continue_token_is_422_never_500(
    hub: Hub, path: str, kind: str, width: int, bad: str
) -> None:
    await hub.register("east")
    key = ["demo"] * (width - 1) + [bad]
    answer = await hub.client.get(path, params={"continue": _token(kind, key)}, headers=READER)
    assert answer.status_code == 422, answer.text
    assert answer.json()["reason"] == "Invalid"
    assert "continue" in answer.json()["message"]


def _big(prefix: str, count: int, size: int = 60_000, char: str = "x") -> dict[str, str]:
    return {f"{prefix}-{i}.example.com/note": char * size for i in range(count)}


async def _patch(hub: Hub, headers: dict[str, str], annotations: dict[str, Any]) -> Any:
    current = await hub.client.get(export_path("p"), headers=headers)
    assert current.status_code == 200, current.text
    rv = current.json()["metadata"]["resourceVersion"]
    body = {"metadata": {"resourceVersion": rv, "annotations": annotations}}
    return await hub.client.patch(export_path("p"), json=body, headers={**headers, **PATCH})


async def test_an_annotation_patch_is_judged_on_the_merged_annotations(hub: Hub) -> None:
    member = (await hub.register("p"))["p"]
    assert (await hub.put("p", member)).status_code == 201
    first = await _patch(hub, member, _big("a", 4))
    assert first.status_code == 200, first.text

    second = await _patch(hub, member, _big("b", 4))
    assert second.status_code == 422, second.text
    assert second.json()["details"]["causes"][0]["field"] == "metadata.annotations"
    assert "262144" in second.json()["message"]

    # Nothing of the refused patch was stored; every reader still reads every record.
    read = await hub.client.get(export_path("p"), headers=member)
    assert read.status_code == 200
    assert sorted(read.json()["metadata"]["annotations"]) == sorted(_big("a", 4))
    listed = await hub.client.get("/api/v1/serviceexports", headers=READER)
    assert listed.status_code == 200 and len(listed.json()["items"]) == 1

    # Taking annotations away, or replacing them, goes through.
    removed = await _patch(hub, member, dict.fromkeys(_big("a", 2)))
    assert removed.status_code == 200, removed.text
    assert len(removed.json()["metadata"]["annotations"]) == 2


async def test_annotation_sizes_count_bytes_as_kubernetes_does(hub: Hub) -> None:
    member = (await hub.register("p"))["p"]
    assert (await hub.put("p", member)).status_code == 201
    # 160,000 characters, 320,000 bytes of UTF-8: past Kubernetes' 256 KiB.
    wide = await _patch(hub, member, _big("w", 4, 40_000, "é"))
    assert wide.status_code == 422, wide.text
    narrow = await _patch(hub, member, _big("w", 3, 40_000, "é"))
    assert narrow.status_code == 200, narrow.text


async def test_an_annotation_patch_outside_the_export_scope_is_403(hub: Hub) -> None:
    member = (await hub.register("p"))["p"]
    assert (await hub.put("p", member)).status_code == 201
    narrowed = await hub.client.patch(
        "/api/v1/clusters/p",
        json={"spec": {"exportNamespaces": ["other"]}},
        headers={**ADMIN, **PATCH},
    )
    assert narrowed.status_code == 200, narrowed.text
    patched = await _patch(hub, member, {"note.example.com/a": "b"})
    assert patched.status_code == 403, patched.text
    assert "exportNamespaces" in patched.json()["message"]
    # Taking the export back always passes.
    assert (await hub.client.delete(export_path("p"), headers=member)).status_code == 200


async def _store_too_large(hub: Hub) -> None:
    """Make the stored record `p`'s annotations (and its history's) what an older hub let
    two patches store: 480,000 bytes."""
    from sqlalchemy import update

    from hub.store import codec
    from hub.store.tables import changes, exports

    text = codec.canonical_json(_big("old", 8))
    async with hub.store.engine.begin() as conn:
        await conn.execute(
            update(exports).where(exports.c.cluster_id == "p").values(annotations=text)
        )
        rows = (
            (await conn.execute(changes.select().where(changes.c.cluster_id == "p")))
            .mappings()
            .all()
        )
        for row in rows:
            document = json.loads(row["object"])
            document["metadata"]["annotations"] = json.loads(text)
            await conn.execute(
                update(changes)
                .where(changes.c.revision == row["revision"])
                .values(object=codec.canonical_json(document))
            )


async def test_a_record_stored_too_large_is_still_read_listed_watched_and_removed(
    database_url: str,
) -> None:
    async with running_hub(database_url) as hub:
        member = (await hub.register("p"))["p"]
        start = (await hub.client.get("/api/v1/serviceexports", headers=READER)).json()
        assert (await hub.put("p", member)).status_code == 201
        await _store_too_large(hub)
        read = await hub.client.get(export_path("p"), headers=READER)
        assert read.status_code == 200, read.text
        assert len(read.json()["metadata"]["annotations"]) == 8
        for path in ("/api/v1/serviceexports", "/api/v1/clusters/p/serviceexports"):
            listed = await hub.client.get(path, headers=READER)
            assert listed.status_code == 200, listed.text
        rv = start["metadata"]["resourceVersion"]
        watched = await hub.client.get(
            f"/api/v1/serviceexports?watch=true&resourceVersion={rv}&timeoutSeconds=1",
            headers=READER,
        )
        assert watched.status_code == 200, watched.text
        assert '"ADDED"' in watched.text
        # A PUT may not keep them under a new spec; one that sends its own may.
        kept = await hub.put("p", member, resource_version="101")
        assert kept.status_code == 422, kept.text
        replaced = await hub.put("p", member, resource_version="101", annotations={"a": "b"})
        assert replaced.status_code == 200, replaced.text
        # Withdrawn by its member.
        await _store_too_large(hub)
        assert (await hub.client.delete(export_path("p"), headers=member)).status_code == 200
        assert (await hub.put("p", member)).status_code == 201
        await _store_too_large(hub)

    # A hub starting on such a database says so (the log, and /readyz's message).
    async with running_hub(database_url) as hub:
        ready = await hub.client.get("/readyz")
        assert ready.status_code == 200
        assert "1 stored export has annotations past" in ready.json()["message"]
        deleted = await hub.client.delete("/api/v1/clusters/p", headers=ADMIN)
        assert deleted.status_code == 200, deleted.text
        listed = await hub.client.get("/api/v1/serviceexports", headers=READER)
        assert listed.json()["items"] == []


def _slice(name: str, service: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "mcsync.io/v1alpha1",
        "kind": "EndpointSliceExport",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {
            "serviceName": service,
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["10.1.0.7"], "conditions": {"ready": True}}],
        },
    }


async def test_concurrent_slice_syncs_store_exactly_one_of_them(database_url: str) -> None:
    async with running_hub(database_url, max_endpointslices_per_cluster=5) as hub:
        member = (await hub.register("q"))["q"]
        assert (await hub.put("q", member)).status_code == 201

        async def sync(round_: int) -> int:
            items = [_slice(f"web-r{round_}-{i}") for i in range(5)]
            answer = await hub.client.put(
                "/api/v1/clusters/q/endpointslices", json={"items": items}, headers=member
            )
            return answer.status_code

        codes = await asyncio.gather(*(sync(r) for r in range(10)))
        assert set(codes) <= {200, 403}, codes
        listed = await hub.client.get("/api/v1/endpointslices", headers=READER)
        names = [item["metadata"]["name"] for item in listed.json()["items"]]
        assert len(names) == 5, names
        assert len({name.split("-")[1] for name in names}) == 1, names  # one sync, whole


async def test_concurrent_export_syncs_store_exactly_one_of_them(database_url: str) -> None:
    async with running_hub(database_url, max_exports_per_cluster=5) as hub:
        member = (await hub.register("q"))["q"]

        async def sync(round_: int) -> int:
            items = [export_body("q", name=f"svc-r{round_}-{i}") for i in range(5)]
            answer = await hub.client.put(
                "/api/v1/clusters/q/serviceexports", json={"items": items}, headers=member
            )
            return answer.status_code

        codes = await asyncio.gather(*(sync(r) for r in range(10)))
        assert set(codes) <= {200, 403}, codes
        listed = await hub.client.get("/api/v1/clusters/q/serviceexports", headers=READER)
        names = [item["metadata"]["name"] for item in listed.json()["items"]]
        assert len(names) == 5, names
        assert len({name.split("-")[1] for name in names}) == 1, names


async def test_slice_syncs_through_two_replicas_store_exactly_one_of_them(
    database_url: str,
) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("one hub process serves a SQLite database: replicas need PostgreSQL")
    async with (
        running_hub(database_url, max_endpointslices_per_cluster=5) as one,
        running_hub(database_url, max_endpointslices_per_cluster=5) as other,
    ):
        member = (await one.register("q"))["q"]
        assert (await one.put("q", member)).status_code == 201

        async def sync(hub: Hub, round_: int) -> int:
            items = [_slice(f"web-r{round_}-{i}") for i in range(5)]
            answer = await hub.client.put(
                "/api/v1/clusters/q/endpointslices", json={"items": items}, headers=member
            )
            return answer.status_code

        codes = await asyncio.gather(*(sync((one, other)[r % 2], r) for r in range(10)))
        assert set(codes) <= {200, 403}, codes
        listed = await other.client.get("/api/v1/endpointslices", headers=READER)
        names = [item["metadata"]["name"] for item in listed.json()["items"]]
        assert len(names) == 5, names
        assert len({name.split("-")[1] for name in names}) == 1, names
