"""Trust boundaries through the API (docs/reference.md#conflicts, #scope-and-limits), on both
databases.

Each break the red team found is a row here: a member exporting where it may not (another
namespace, the hub's denied ones), claiming an impossible `exportCreationTimestamp`,
sending what no importing cluster could write (lax JSON types, bad labels, addresses
Kubernetes refuses), reading namespaces outside its import scope, or creating records past
its quota. Every refusal names the rule, the limit or the field and value, and leaves
what is stored alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from hub.store.tables import cluster_usage, endpoint_slices, exports
from shared.timefmt import format_millis, utcnow
from tests.hub.test_api_endpointslices import slice_body, slice_path
from tests.hub.test_api_support import (
    ADMIN,
    Hub,
    at,
    bearer,
    export_body,
    export_path,
    running_hub,
    serving,
    watch_events,
)

DEADLINE = 20.0


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(
        database_url,
        max_exports_per_cluster=2,
        max_endpointslices_per_cluster=2,
        watch_bookmark_seconds=0.3,
    ) as running:
        yield running


async def _register(hub: Hub, name: str, **spec: Any) -> dict[str, str]:
    body: dict[str, Any] = {"metadata": {"name": name}}
    if spec:
        body["spec"] = spec
    answer = await hub.client.post("/api/v1/clusters", json=body, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    return bearer(answer.json()["token"])


async def _put(hub: Hub, headers: dict[str, str], body: dict[str, Any]) -> httpx.Response:
    ref = body["spec"]["serviceReference"]
    path = export_path(ref["clusterId"], ref["namespace"], ref["name"])
    return await hub.client.put(path, json=body, headers=headers)


def _message(answer: httpx.Response) -> str:
    return str(answer.json()["message"])


# --- item 3: lax types, labels; item 2: addresses ---------------------------------------------


def _port_true(b: dict[str, Any]) -> None:
    b["spec"]["ports"][0]["port"] = True


def _port_string(b: dict[str, Any]) -> None:
    b["spec"]["ports"][0]["port"] = "80"


def _label_long(b: dict[str, Any]) -> None:
    b["spec"]["exportedLabels"] = {"team": "x" * 64}


def _label_space(b: dict[str, Any]) -> None:
    b["spec"]["exportedLabels"] = {"team": "a b"}


def _generation_string(b: dict[str, Any]) -> None:
    b["spec"]["serviceReference"]["generation"] = "1"


# (case, mutation, the field named, the value named)
EXPORT_REFUSALS: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("port true", _port_true, "spec.ports[0].port", "true"),
    ("port as string", _port_string, "spec.ports[0].port", '"80"'),
    ("label value over 63", _label_long, "spec.exportedLabels", "longer than 63"),
    ("label value with a space", _label_space, "spec.exportedLabels", "'a b'"),
    ("generation as string", _generation_string, "spec.serviceReference.generation", '"1"'),
]


@pytest.mark.parametrize(
    ("mutate", "field", "value"),
    [case[1:] for case in EXPORT_REFUSALS],
    ids=[case[0] for case in EXPORT_REFUSALS],
)
async def test_an_export_kubernetes_would_refuse_is_422_naming_field_and_value(
    hub: Hub, mutate: Callable[[dict[str, Any]], None], field: str, value: str
) -> None:
    east = await _register(hub, "east")
    body = export_body("east")
    mutate(body)
    answer = await _put(hub, east, body)  # the PUT's fast path parses bytes: strict too
    assert answer.status_code == 422, answer.text
    assert field in _message(answer) and value in _message(answer), answer.text
    listed = await hub.client.get("/api/v1/serviceexports", headers=ADMIN)
    assert listed.json()["items"] == []


ADDRESSES = [
    ("IPv4", "127.0.0.1", "loopback"),
    ("IPv4", "169.254.169.254", "link-local"),
    ("IPv4", "0.0.0.0", "unspecified"),
    ("IPv4", "224.0.0.251", "link-local multicast"),
    ("IPv6", "fe80::1%eth0", "zone"),
    ("IPv6", "2001:DB8::1", "canonical"),
]


@pytest.mark.parametrize(("family", "address", "why"), ADDRESSES)
async def test_a_slice_address_kubernetes_would_refuse_is_422(
    hub: Hub, family: str, address: str, why: str
) -> None:
    east = await _register(hub, "east")
    assert (await _put(hub, east, export_body("east"))).status_code == 201
    body = slice_body(addresses=(address,), addressType=family)
    answer = await hub.client.put(slice_path("east"), json=body, headers=east)
    assert answer.status_code == 422, answer.text
    assert "spec.endpoints[0].addresses[0]" in _message(answer) or "endpoints[0]" in _message(
        answer
    )
    assert repr(address) in _message(answer) and why in _message(answer), answer.text
    # The full-state sync refuses it the same way.
    answer = await hub.client.put(
        "/api/v1/clusters/east/endpointslices", json={"items": [body]}, headers=east
    )
    assert answer.status_code == 422 and repr(address) in _message(answer), answer.text
    listed = await hub.client.get("/api/v1/endpointslices", headers=ADMIN)
    assert listed.json()["items"] == []


async def test_ready_must_be_a_boolean(hub: Hub) -> None:
    east = await _register(hub, "east")
    assert (await _put(hub, east, export_body("east"))).status_code == 201
    body = slice_body()
    body["spec"]["endpoints"][0]["conditions"]["ready"] = "yes"
    answer = await hub.client.put(slice_path("east"), json=body, headers=east)
    assert answer.status_code == 422, answer.text
    assert "conditions.ready" in _message(answer) and '"yes"' in _message(answer)


# --- item 1: timestamps -----------------------------------------------------------------------


async def test_export_creation_timestamp_is_bounded_by_2014_and_the_hubs_clock(hub: Hub) -> None:
    east = await _register(hub, "east")
    west = await _register(hub, "west")
    # west exported the Service first, legitimately.
    assert (await _put(hub, west, export_body("west", created=at(0)))).status_code == 201
    ahead = format_millis(utcnow() + timedelta(minutes=5))
    for created in ("1970-01-01T00:00:00.000Z", ahead):
        answer = await _put(hub, east, export_body("east", created=created))
        assert answer.status_code == 422, answer.text
        assert "exportCreationTimestamp" in _message(answer), answer.text
        sync = await hub.client.put(
            "/api/v1/clusters/east/serviceexports",
            json={"items": [export_body("east", created=created)]},
            headers=east,
        )
        assert sync.status_code == 422 and "items[0]." in _message(sync), sync.text
    imported = await hub.client.get("/api/v1/serviceimports/demo/web", headers=ADMIN)
    assert imported.json()["status"]["winningCluster"] == "west"
    # Half a minute ahead is clock skew, not a claim: accepted.
    near = format_millis(utcnow() + timedelta(seconds=30))
    assert (await _put(hub, east, export_body("east", created=near))).status_code == 201


# --- item 1: scope ----------------------------------------------------------------------------


async def test_export_scope_is_403_naming_the_rule_and_withdrawals_pass(hub: Hub) -> None:
    east = await _register(hub, "east", exportNamespaces=["team-*", "demo"])
    assert (await _put(hub, east, export_body("east", namespace="team-a"))).status_code == 201
    answer = await _put(hub, east, export_body("east", namespace="default"))
    assert answer.status_code == 403, answer.text
    assert "spec.exportNamespaces" in _message(answer) and "team-*" in _message(answer)
    # Slices: single and full-state sync.
    assert (await _put(hub, east, export_body("east"))).status_code == 201
    other = slice_body(namespace="default")
    answer = await hub.client.put(slice_path("east", "default"), json=other, headers=east)
    assert answer.status_code == 403 and "spec.exportNamespaces" in _message(answer)
    answer = await hub.client.put(
        "/api/v1/clusters/east/serviceexports",
        json={"items": [export_body("east"), export_body("east", namespace="default")]},
        headers=east,
    )
    assert answer.status_code == 403 and "'default'" in _message(answer), answer.text
    # Narrowed by the admin: what is stored may still be withdrawn.
    patched = await hub.client.patch(
        "/api/v1/clusters/east",
        json={"spec": {"exportNamespaces": ["other"]}},
        headers={**ADMIN, "Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["spec"] == {"exportNamespaces": ["other"]}
    assert (await _put(hub, east, export_body("east", ports=None))).status_code == 403
    withdrawn = await hub.client.delete(export_path("east", "team-a"), headers=east)
    assert withdrawn.status_code == 200
    # null: absent again, every namespace allowed.
    patched = await hub.client.patch(
        "/api/v1/clusters/east", json={"spec": {"exportNamespaces": None}}, headers=ADMIN
    )
    assert patched.json()["spec"] == {}
    assert (await _put(hub, east, export_body("east", namespace="default"))).status_code == 201


async def test_the_hubs_deny_list_holds_whatever_the_scope(database_url: str) -> None:
    async with running_hub(database_url, deny_export_namespace=["kube-*", "mcsync-system"]) as hub:
        east = await _register(hub, "east", exportNamespaces=["*"])
        for namespace, rule in (("kube-node-lease", "kube-*"), ("mcsync-system", "mcsync-system")):
            answer = await _put(hub, east, export_body("east", namespace=namespace))
            assert answer.status_code == 403, answer.text
            assert "--deny-export-namespace" in _message(answer) and repr(rule) in _message(answer)
            answer = await hub.client.put(
                slice_path("east", namespace), json=slice_body(namespace=namespace), headers=east
            )
            assert answer.status_code == 403 and "--deny-export-namespace" in _message(answer)
        assert (await _put(hub, east, export_body("east"))).status_code == 201


async def test_default_deny_list_covers_kubernetes_namespaces(hub: Hub) -> None:
    east = await _register(hub, "east")
    for namespace in ("kube-system", "kube-public", "kube-node-lease"):
        answer = await _put(hub, east, export_body("east", namespace=namespace))
        assert answer.status_code == 403, answer.text


async def test_patching_clusters_is_admin_only_and_validated(hub: Hub) -> None:
    east = await _register(hub, "east", importNamespaces=["demo"])
    path = "/api/v1/clusters/east"
    assert (await hub.client.patch(path, json={}, headers=east)).status_code == 403
    unknown = await hub.client.patch("/api/v1/clusters/nope", json={}, headers=ADMIN)
    assert unknown.status_code == 404
    bad = await hub.client.patch(
        path, json={"spec": {"exportNamespaces": ["Bad_Name"]}}, headers=ADMIN
    )
    assert bad.status_code == 422 and "Bad_Name" in _message(bad)
    typo = await hub.client.patch(path, json={"spec": {"exportNamespace": []}}, headers=ADMIN)
    assert typo.status_code == 422
    labelled = await hub.client.patch(
        path, json={"metadata": {"labels": {"env": "prod"}}}, headers=ADMIN
    )
    assert labelled.status_code == 200
    assert labelled.json()["metadata"]["labels"] == {"env": "prod"}
    assert labelled.json()["spec"] == {"importNamespaces": ["demo"]}  # kept
    unlabelled = await hub.client.patch(
        path, json={"metadata": {"labels": {"env": None}}}, headers=ADMIN
    )
    assert unlabelled.json()["metadata"]["labels"] == {}


async def test_the_import_feed_holds_only_the_import_scope(hub: Hub) -> None:
    east = await _register(hub, "east")
    west = await _register(hub, "west", importNamespaces=["demo", "team-*"])
    listed = await hub.client.get("/api/v1/clusters/west/imports", headers=west)
    start = listed.json()["metadata"]["resourceVersion"]
    for namespace in ("demo", "secret"):
        assert (await _put(hub, east, export_body("east", namespace=namespace))).is_success
        put = await hub.client.put(
            slice_path("east", namespace), json=slice_body(namespace=namespace), headers=east
        )
        assert put.status_code == 201, put.text

    def namespaces(items: list[dict[str, Any]]) -> set[str]:
        return {item["metadata"]["namespace"] for item in items}

    listed = await hub.client.get("/api/v1/clusters/west/imports?limit=1", headers=west)
    items = listed.json()["items"]
    while listed.json()["metadata"].get("continue"):
        token = listed.json()["metadata"]["continue"]
        listed = await hub.client.get(
            f"/api/v1/clusters/west/imports?limit=1&continue={token}", headers=west
        )
        items += listed.json()["items"]
    assert [i["kind"] for i in items] == ["ServiceImport", "EndpointSliceExport"]
    assert namespaces(items) == {"demo"}
    everything = await hub.client.get("/api/v1/clusters/east/imports", headers=east)
    assert namespaces(everything.json()["items"]) == {"demo", "secret"}

    # The watch's history replay: other namespaces' changes are bookmarks, not objects.
    replay = await hub.client.get(
        f"/api/v1/clusters/west/imports?watch=true&resourceVersion={start}&timeoutSeconds=1",
        headers=west,
    )
    events = [e for e in watch_events(replay.text) if e["type"] != "BOOKMARK"]
    assert len(events) == 2 and namespaces([e["object"] for e in events]) == {"demo"}

    # Live: a change in `secret` never reaches west; the next one in `demo` does.
    rv = (await hub.client.get("/api/v1/clusters/west/imports", headers=west)).json()
    async with (
        serving(hub.app) as url,
        httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client,
        client.stream(
            "GET",
            "/api/v1/clusters/west/imports?watch=true&timeoutSeconds=30"
            f"&resourceVersion={rv['metadata']['resourceVersion']}",
            headers=west,
        ) as stream,
    ):
        for namespace in ("secret", "demo"):
            moved = slice_body(namespace=namespace, addresses=("10.1.0.99",))
            answer = await hub.client.put(slice_path("east", namespace), json=moved, headers=east)
            assert answer.status_code == 200, answer.text
        async with asyncio.timeout(DEADLINE):
            async for line in stream.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["type"] == "BOOKMARK":
                    continue
                assert event["object"]["metadata"]["namespace"] == "demo", event
                break


# --- quotas -----------------------------------------------------------------------------------


async def test_export_quota_refuses_creates_only(hub: Hub) -> None:
    east = await _register(hub, "east")
    for name in ("a", "b"):
        assert (await _put(hub, east, export_body("east", name=name))).status_code == 201
    answer = await _put(hub, east, export_body("east", name="c"))
    assert answer.status_code == 403, answer.text
    assert "--max-exports-per-cluster 2" in _message(answer)
    # Updates and deletes pass; a delete makes room.
    updated = await _put(hub, east, export_body("east", name="a", resource_version="101"))
    assert updated.status_code == 200
    assert (await hub.client.delete(export_path("east", "demo", "b"), headers=east)).is_success
    assert (await _put(hub, east, export_body("east", name="c"))).status_code == 201
    # A sync is judged by the size it asks for.
    three = [export_body("east", name=n) for n in ("a", "c", "d")]
    answer = await hub.client.put(
        "/api/v1/clusters/east/serviceexports", json={"items": three}, headers=east
    )
    assert answer.status_code == 403 and "--max-exports-per-cluster" in _message(answer)
    swap = [export_body("east", name=n) for n in ("c", "d")]  # creates d, withdraws a
    answer = await hub.client.put(
        "/api/v1/clusters/east/serviceexports", json={"items": swap}, headers=east
    )
    assert answer.status_code == 200, answer.text
    assert await _usage(hub, "east") == (2, 0)


async def test_slice_quota_refuses_creates_only_and_counts_stay_exact(hub: Hub) -> None:
    east = await _register(hub, "east")
    assert (await _put(hub, east, export_body("east"))).status_code == 201
    for name in ("web-aaaaa", "web-bbbbb"):
        put = await hub.client.put(
            slice_path("east", name=name), json=slice_body(name), headers=east
        )
        assert put.status_code == 201, put.text
    answer = await hub.client.put(
        slice_path("east", name="web-ccccc"), json=slice_body("web-ccccc"), headers=east
    )
    assert answer.status_code == 403 and "--max-endpointslices-per-cluster 2" in _message(answer)
    moved = slice_body("web-aaaaa", addresses=("10.1.0.42",))
    assert (
        await hub.client.put(slice_path("east", name="web-aaaaa"), json=moved, headers=east)
    ).status_code == 200
    assert await _usage(hub, "east") == (1, 2)
    # Withdrawing the export takes its slices along, and their counts.
    assert (await hub.client.delete(export_path("east"), headers=east)).is_success
    assert await _usage(hub, "east") == (0, 0)
    # Deregistering forgets the counts; the name starts afresh.
    assert (await _put(hub, east, export_body("east"))).status_code == 201
    assert (await hub.client.delete("/api/v1/clusters/east", headers=ADMIN)).is_success
    assert await _usage(hub, "east") is None


async def _usage(hub: Hub, cluster: str) -> tuple[int, int] | None:
    """The stored counts, checked against the rows themselves."""
    ctx = hub.store._ctx
    async with ctx.read() as conn:
        row = (
            await conn.execute(
                select(cluster_usage.c.exports, cluster_usage.c.endpoint_slices).where(
                    cluster_usage.c.cluster_id == cluster
                )
            )
        ).first()
        rows = (
            len((await conn.execute(select(exports).where(exports.c.cluster_id == cluster))).all()),
            len(
                (
                    await conn.execute(
                        select(endpoint_slices).where(endpoint_slices.c.cluster_id == cluster)
                    )
                ).all()
            ),
        )
    if row is None:
        assert rows == (0, 0)
        return None
    assert (int(row[0]), int(row[1])) == rows
    return rows
