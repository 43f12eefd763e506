"""EndpointSliceExport routes and the cluster import list end to end (docs/reference.md#import-path,
#rest-api, #scope-and-limits): created / unchanged / replaced, 409 for a Service not exported, 422
#naming each bad field, 403 outside the member's own path, 413 over the body limit, slices withdrawn
#with
their export and their cluster, and the import list's cut ports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.hub.test_api_support import ADMIN, READER, Hub, at, export_path, port, running_hub

LIMIT = 64 * 1024


def slice_body(
    name: str = "web-abcde",
    *,
    namespace: str = "demo",
    service: str = "web",
    ports: list[dict[str, Any]] | None = None,
    addresses: tuple[str, ...] = ("10.1.0.7",),
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "mcsync.io/v1alpha1",
        "kind": "EndpointSliceExport",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "serviceName": service,
            "addressType": "IPv4",
            "ports": ports if ports is not None else [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
            **spec,
        },
    }


def slice_path(cluster: str, namespace: str = "demo", name: str = "web-abcde") -> str:
    return f"/api/v1/clusters/{cluster}/endpointslices/{namespace}/{name}"


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url, max_body_bytes=LIMIT) as running:
        yield running


@pytest.fixture
async def members(hub: Hub) -> dict[str, dict[str, str]]:
    """east and west registered, each exporting demo/web."""
    headers = await hub.register("east", "west")
    for cluster, created in (("east", at(0)), ("west", at(5))):
        answer = await hub.put(cluster, headers[cluster], created=created)
        assert answer.status_code == 201, answer.text
    return headers


async def slices(hub: Hub, **params: str) -> list[str]:
    answer = await hub.client.get("/api/v1/endpointslices", params=params, headers=READER)
    assert answer.status_code == 200, answer.text
    assert answer.json()["kind"] == "EndpointSliceExportList"
    return [item["metadata"]["name"] for item in answer.json()["items"]]


async def test_put_creates_then_unchanged_then_replaces(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    east = members["east"]
    created = await hub.client.put(slice_path("east"), json=slice_body(), headers=east)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["kind"] == "EndpointSliceExport"
    assert body["spec"]["clusterId"] == "east"
    rv = body["metadata"]["resourceVersion"]

    again = await hub.client.put(slice_path("east"), json=slice_body(), headers=east)
    assert again.status_code == 200
    assert again.json() == body  # no new revision, nothing written

    replaced = await hub.client.put(
        slice_path("east"), json=slice_body(addresses=("10.1.0.8",)), headers=east
    )
    assert replaced.status_code == 200
    assert int(replaced.json()["metadata"]["resourceVersion"]) > int(rv)
    read = await hub.client.get(slice_path("east"), headers=READER)
    assert read.status_code == 200 and read.json() == replaced.json()

    gone = await hub.client.delete(slice_path("east"), headers=east)
    assert gone.status_code == 200
    assert gone.json()["spec"]["endpoints"][0]["addresses"] == ["10.1.0.8"]
    missing = await hub.client.delete(slice_path("east"), headers=east)
    assert missing.status_code == 404
    assert missing.json()["reason"] == "NotFound"


async def test_slice_of_a_service_not_exported_is_409_saying_so(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    answer = await hub.client.put(
        slice_path("east", name="api-1"),
        json=slice_body("api-1", service="api"),
        headers=members["east"],
    )
    assert answer.status_code == 409
    status = answer.json()
    assert status["kind"] == "Status" and status["reason"] == "Conflict"
    assert "'east' does not export Service demo/api" in status["message"]
    assert await slices(hub) == []


async def test_unregistered_cluster_is_404(hub: Hub) -> None:
    answer = await hub.client.put(slice_path("ghost"), json=slice_body(), headers=ADMIN)
    assert answer.status_code == 404
    assert "ghost" in answer.json()["message"]


@pytest.mark.parametrize(
    ("path", "change", "field", "words"),
    [
        (
            None,
            {"metadata": {"name": "web-other", "namespace": "demo"}},
            "metadata.name",
            "differs",
        ),
        (
            None,
            {"metadata": {"name": "web-abcde", "namespace": "prod"}},
            "metadata.namespace",
            "differs",
        ),
        (None, {"spec": {"clusterId": "west"}}, "spec.clusterId", "differs from the cluster"),
        (None, {"spec": {"addressType": "IPv5"}}, "spec.addressType", ""),
        (
            None,
            {"spec": {"endpoints": [{"addresses": ["10.0.0.256"]}]}},
            "spec",
            "endpoints[0].addresses[0]",
        ),
        (
            None,
            {"spec": {"addressType": "IPv6", "endpoints": [{"addresses": ["10.0.0.1"]}]}},
            "spec",
            "endpoints[0].addresses[0]",
        ),
        (None, {"spec": {"endpoints": [{"addresses": ["10.0.0.1"]}] * 1001}}, "spec.endpoints", ""),
        (
            None,
            {"spec": {"ports": [{"name": "Not_A_Label", "port": 80}]}},
            "spec.ports[0].name",
            "DNS-1123",
        ),
        (
            None,
            {"spec": {"ports": [{"name": "http", "protocol": "ICMP", "port": 80}]}},
            "spec.ports[0].protocol",
            "",
        ),
        (None, {"spec": {"serviceName": "Web"}}, "spec.serviceName", ""),
        ("Bad_Name", {"metadata": {"name": "Bad_Name", "namespace": "demo"}}, "slice", ""),
    ],
)
async def test_bad_input_is_422_naming_the_field(
    hub: Hub,
    members: dict[str, dict[str, str]],
    path: str | None,
    change: dict[str, Any],
    field: str,
    words: str,
) -> None:
    body = slice_body()
    body["metadata"] = change.get("metadata", body["metadata"])
    body["spec"] = {**body["spec"], **change.get("spec", {})}
    answer = await hub.client.put(
        slice_path("east", name=path or "web-abcde"), json=body, headers=members["east"]
    )
    assert answer.status_code == 422, answer.text
    status = answer.json()
    assert field in [cause.get("field") for cause in status["details"]["causes"]], status
    assert words in status["message"]
    assert await slices(hub) == []


async def test_a_member_writes_only_under_its_own_path(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    east, west = members["east"], members["west"]
    body = slice_body()
    for method, headers in (("PUT", west), ("DELETE", west), ("PUT", READER)):
        answer = await hub.client.request(method, slice_path("east"), json=body, headers=headers)
        assert answer.status_code == 403, (method, answer.text)
    sync = await hub.client.put(
        "/api/v1/clusters/east/endpointslices", json={"items": []}, headers=west
    )
    assert sync.status_code == 403
    # the fleet-wide list is for readers; a member's own import list is its own
    assert (await hub.client.get("/api/v1/endpointslices", headers=east)).status_code == 403
    assert (await hub.client.get("/api/v1/clusters/west/imports", headers=east)).status_code == 403
    assert (await hub.client.get("/api/v1/clusters/east/imports", headers=east)).status_code == 200
    assert (
        await hub.client.get("/api/v1/clusters/east/imports", headers=READER)
    ).status_code == 200
    assert (await hub.client.get(slice_path("east"))).status_code == 401
    assert await slices(hub) == []


async def test_a_body_over_the_limit_is_413(hub: Hub, members: dict[str, dict[str, str]]) -> None:
    body = slice_body(addresses=tuple(f"10.0.{i // 250}.{i % 250 + 1}" for i in range(1000)))
    body["spec"]["endpoints"] = [dict(e, hostname="h" * 60) for e in body["spec"]["endpoints"]]
    answer = await hub.client.put(slice_path("east"), json=body, headers=members["east"])
    assert answer.status_code == 413
    assert answer.json()["kind"] == "Status"
    assert await slices(hub) == []


async def test_withdrawing_the_export_withdraws_its_slices(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    east, west = members["east"], members["west"]
    for cluster, headers in (("east", east), ("west", west)):
        name = f"web-{cluster}"
        answer = await hub.client.put(
            slice_path(cluster, name=name), json=slice_body(name), headers=headers
        )
        assert answer.status_code == 201, answer.text
    assert (await hub.client.delete(export_path("east"), headers=east)).status_code == 200
    assert await slices(hub) == ["web-west"]
    assert (
        await hub.client.get(slice_path("east", name="web-east"), headers=east)
    ).status_code == 404


async def test_deregistering_the_cluster_withdraws_its_slices(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    for cluster in ("east", "west"):
        name = f"web-{cluster}"
        answer = await hub.client.put(
            slice_path(cluster, name=name), json=slice_body(name), headers=members[cluster]
        )
        assert answer.status_code == 201, answer.text
    assert (await hub.client.delete("/api/v1/clusters/east", headers=ADMIN)).status_code == 200
    assert await slices(hub) == ["web-west"]


async def test_sync_upserts_withdraws_and_refuses_bad_items(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    east = members["east"]
    path = "/api/v1/clusters/east/endpointslices"
    first = await hub.client.put(
        path, json={"items": [slice_body("web-1"), slice_body("web-2")]}, headers=east
    )
    assert first.status_code == 200, first.text
    result = first.json()
    assert result["kind"] == "SyncResult"
    assert (result["created"], result["updated"], result["unchanged"], result["withdrawn"]) == (
        2,
        0,
        0,
        0,
    )

    second = await hub.client.put(
        path, json={"items": [slice_body("web-1"), slice_body("web-3")]}, headers=east
    )
    result = second.json()
    assert (result["created"], result["updated"], result["unchanged"], result["withdrawn"]) == (
        1,
        0,
        1,
        1,
    )
    assert await slices(hub) == ["web-1", "web-3"]

    no_namespace = slice_body("web-4")
    del no_namespace["metadata"]["namespace"]
    for items, code, field in (
        ([slice_body("web-1"), no_namespace], 422, "items[1].metadata.namespace"),
        ([slice_body("web-1", clusterId="west")], 422, "items[0].spec.clusterId"),
        ([slice_body("web-1"), slice_body("web-1")], 422, "items"),
        ([slice_body("api-1", service="api")], 409, None),
    ):
        answer = await hub.client.put(path, json={"items": items}, headers=east)
        assert answer.status_code == code, answer.text
        if field is not None:
            assert field in [c.get("field") for c in answer.json()["details"]["causes"]]
    assert await slices(hub) == ["web-1", "web-3"]


async def test_list_filters_and_pages(hub: Hub, members: dict[str, dict[str, str]]) -> None:
    for cluster in ("east", "west"):
        answer = await hub.client.put(
            f"/api/v1/clusters/{cluster}/endpointslices",
            json={"items": [slice_body(f"web-{cluster}-{i}") for i in range(3)]},
            headers=members[cluster],
        )
        assert answer.status_code == 200, answer.text
    everything = await slices(hub)
    assert len(everything) == 6
    assert await slices(hub, cluster="west") == ["web-west-0", "web-west-1", "web-west-2"]
    assert await slices(hub, namespace="demo", name="web", cluster="east") == [
        "web-east-0",
        "web-east-1",
        "web-east-2",
    ]
    assert await slices(hub, name="api") == []
    names, token = [], None
    while True:
        params = {"limit": "4", **({"continue": token} if token else {})}
        page = (
            await hub.client.get("/api/v1/endpointslices", params=params, headers=READER)
        ).json()
        names += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == everything
    bad = await hub.client.get("/api/v1/endpointslices", params={"continue": "x"}, headers=READER)
    assert bad.status_code == 422


async def test_the_import_list_carries_each_slice_cut_to_its_source_ports(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    # west declares metrics too: the union has it, served by west alone
    west = members["west"]
    both = [port(80, "http"), port(9090, "metrics")]
    assert (await hub.put("west", west, created=at(5), ports=both)).status_code == 200
    ports = [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9100}]
    for cluster in ("east", "west"):
        name = f"web-{cluster}"
        answer = await hub.client.put(
            slice_path(cluster, name=name),
            json=slice_body(name, ports=ports),
            headers=members[cluster],
        )
        assert answer.status_code == 201, answer.text

    answer = await hub.client.get("/api/v1/clusters/east/imports", headers=members["east"])
    assert answer.status_code == 200
    listing = answer.json()
    assert listing["kind"] == "ClusterImportList"
    revision = int(listing["metadata"]["resourceVersion"])
    assert revision == await hub.store.feed.current_revision()
    items = listing["items"]
    assert [(i["kind"], i["metadata"]["name"]) for i in items] == [
        ("ServiceImport", "web"),
        ("EndpointSliceExport", "web-east"),
        ("EndpointSliceExport", "web-west"),
    ]
    assert [p["name"] for p in items[1]["spec"]["ports"]] == ["http"]
    assert [p["name"] for p in items[2]["spec"]["ports"]] == ["http", "metrics"]
    # the same for every cluster: imports are fleet-wide
    west_view = await hub.client.get("/api/v1/clusters/west/imports", headers=west)
    assert west_view.json()["items"] == items

    first = await hub.client.get(
        "/api/v1/clusters/east/imports", params={"limit": 2}, headers=READER
    )
    token = first.json()["metadata"]["continue"]
    rest = await hub.client.get(
        "/api/v1/clusters/east/imports", params={"limit": 2, "continue": token}, headers=READER
    )
    assert [*first.json()["items"], *rest.json()["items"]] == items
    assert "continue" not in rest.json()["metadata"]


async def test_stored_slices_are_a_metric_from_zero(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    def value(text: str) -> float:
        for line in text.splitlines():
            if line.startswith("mcsync_hub_endpointslice_exports "):
                return float(line.split()[1])
        raise AssertionError("mcsync_hub_endpointslice_exports is missing")

    assert value((await hub.client.get("/metrics")).text) == 0
    answer = await hub.client.put(slice_path("east"), json=slice_body(), headers=members["east"])
    assert answer.status_code == 201
    assert value((await hub.client.get("/metrics")).text) == 1


async def test_a_member_lists_its_own_slices_a_page_at_a_time(
    hub: Hub, members: dict[str, dict[str, str]]
) -> None:
    for cluster in ("east", "west"):
        answer = await hub.client.put(
            f"/api/v1/clusters/{cluster}/endpointslices",
            json={"items": [slice_body(f"web-{cluster}-{i}") for i in range(3)]},
            headers=members[cluster],
        )
        assert answer.status_code == 200, answer.text
    east = members["east"]
    path = "/api/v1/clusters/east/endpointslices"
    names, token = [], None
    while True:
        params = {"limit": "2", **({"continue": token} if token else {})}
        answer = await hub.client.get(path, params=params, headers=east)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert page["kind"] == "EndpointSliceExportList"
        names += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == ["web-east-0", "web-east-1", "web-east-2"]
    assert (await hub.client.get(path, headers=READER)).status_code == 200
    other = await hub.client.get("/api/v1/clusters/west/endpointslices", headers=east)
    assert other.status_code == 403
