"""The namespaces each cluster holds within its import scope (docs/reference.md#scope-and-limits):
the agent reports them (`PUT …/clusters/{c}/namespaces`), the hub stores them (both
databases) and the importers view says "no (namespace absent)" where one is not there,
`yes` where it is, and `yes*` only for a cluster whose agent has not reported."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from hub.store import Store
from hub.store.errors import NotFound
from shared.constants import CLUSTER_NAMESPACES_MAX
from tests.hub.test_api_support import ADMIN, READER, Hub, bearer, running_hub
from tests.hub.test_store_support import opened_store


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, "east", "west") as s:
        yield s


async def test_a_report_replaces_the_clusters_namespaces(store: Store) -> None:
    assert await store.cluster_namespaces.present("demo") == {}
    assert await store.cluster_namespaces.held("east") is None
    assert await store.cluster_namespaces.put("east", ["demo", "shop"]) is True
    assert await store.cluster_namespaces.put("west", []) is True  # reported: none held
    assert await store.cluster_namespaces.present("demo") == {"east": True, "west": False}
    assert await store.cluster_namespaces.put("east", ["demo", "shop"]) is False  # unchanged
    assert await store.cluster_namespaces.put("east", ["shop", "team"]) is True
    assert await store.cluster_namespaces.held("east") == ["shop", "team"]
    assert await store.cluster_namespaces.present("demo") == {"east": False, "west": False}
    assert await store.cluster_namespaces.present("team") == {"east": True, "west": False}


async def test_the_largest_report_is_stored_and_emptied(store: Store) -> None:
    names = [f"ns-{i}" for i in range(CLUSTER_NAMESPACES_MAX)]
    assert await store.cluster_namespaces.put("east", names) is True
    assert len(await store.cluster_namespaces.held("east") or []) == CLUSTER_NAMESPACES_MAX
    assert await store.cluster_namespaces.put("east", []) is True
    assert await store.cluster_namespaces.held("east") == []


async def test_an_unregistered_cluster_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.cluster_namespaces.put("nowhere", ["demo"])


async def test_deregistering_forgets_the_namespaces(store: Store) -> None:
    await store.cluster_namespaces.put("east", ["demo"])
    await store.clusters.delete("east")
    assert await store.cluster_namespaces.present("demo") == {}
    assert await store.cluster_namespaces.held("east") is None


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


async def _ready(hub: Hub, name: str) -> dict[str, str]:
    """Register `name` and beat once as an importing agent."""
    answer = await hub.client.post("/api/v1/clusters", json={"metadata": {"name": name}},
                                   headers=ADMIN)
    assert answer.status_code == 201, answer.text
    token = bearer(answer.json()["token"])
    beat = await hub.client.post(
        f"/api/v1/clusters/{name}/heartbeat",
        json={"agentVersion": "0.1.0", "importedServices": 0, "importedEndpoints": 0},
        headers=token,
    )
    assert beat.status_code == 200, beat.text
    return token


async def _report(hub: Hub, name: str, token: dict[str, str], namespaces: Any) -> Any:
    return await hub.client.put(f"/api/v1/clusters/{name}/namespaces",
                                json={"namespaces": namespaces}, headers=token)


async def test_the_importers_view_says_where_the_namespace_is_absent(hub: Hub) -> None:
    east = await _ready(hub, "east")
    north = await _ready(hub, "north")
    await _ready(hub, "south")  # its agent has not reported
    assert (await _report(hub, "east", east, ["demo", "shop"])).status_code == 200
    answer = await _report(hub, "north", north, ["shop"])
    assert answer.status_code == 200, answer.text
    assert answer.json()["metadata"]["name"] == "north"
    assert (await hub.put("east", east)).status_code == 201

    answer = await hub.client.get("/api/v1/serviceimports/demo/web/importers", headers=READER)
    assert answer.status_code == 200, answer.text
    rows = {item["cluster"]: (item["imports"], item["why"]) for item in answer.json()["items"]}
    assert rows["east"] == ("yes", "Ready, following the import feed; namespace demo is "
                                   "there; it exports the Service too")
    assert rows["north"][0] == "no"
    assert rows["north"][1].startswith("namespace absent: its agent reports no namespace demo")
    assert rows["south"] == ("yes*", "Ready, following the import feed")

    # The namespace is created in north: its agent's next report turns the answer.
    assert (await _report(hub, "north", north, ["demo", "shop"])).status_code == 200
    answer = await hub.client.get("/api/v1/serviceimports/demo/web/importers", headers=READER)
    rows = {item["cluster"]: (item["imports"], item["why"]) for item in answer.json()["items"]}
    assert rows["north"][0] == "yes"


@pytest.mark.parametrize(("namespaces", "words"), [
    ([f"ns-{i}" for i in range(CLUSTER_NAMESPACES_MAX + 1)],
     f"{CLUSTER_NAMESPACES_MAX + 1} namespaces, at most {CLUSTER_NAMESPACES_MAX}"),
    (["Demo"], "namespace name 'Demo' is not a DNS-1123 label"),
    (["a" * 64], "is not a DNS-1123 label"),
    ("demo", "namespaces"),
], ids=["over-the-bound", "upper-case", "too-long", "not-a-list"])
async def test_a_report_the_hub_refuses_is_422_naming_it(
    hub: Hub, namespaces: Any, words: str
) -> None:
    east = await _ready(hub, "east")
    answer = await _report(hub, "east", east, namespaces)
    assert answer.status_code == 422, answer.text
    assert "namespaces" in answer.text
    assert words in answer.text


async def test_only_the_member_itself_reports(hub: Hub) -> None:
    east = await _ready(hub, "east")
    await _ready(hub, "west")
    answer = await _report(hub, "west", east, ["demo"])
    assert answer.status_code == 403, answer.text
    answer = await hub.client.put("/api/v1/clusters/east/namespaces",
                                  json={"namespaces": ["demo"]}, headers=READER)
    assert answer.status_code == 403, answer.text
