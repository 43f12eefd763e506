"""`GET /api/v1/serviceimports/{namespace}/{name}/importers`: the hub answers, for every
registered cluster, whether it imports the Service and why (the rows of `mcsync describe
import`), so the console shows the hub's reading of scopes and states instead of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.hub.test_api_support import ADMIN, READER, Hub, bearer, running_hub


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


async def _register(hub: Hub, name: str, **spec: Any) -> dict[str, str]:
    body: dict[str, Any] = {"metadata": {"name": name}}
    if spec:
        body["spec"] = spec
    answer = await hub.client.post("/api/v1/clusters", json=body, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    return bearer(answer.json()["token"])


async def test_each_cluster_with_the_hubs_reason(hub: Hub) -> None:
    east = await _register(hub, "east")
    await _register(hub, "edge", importNamespaces=["shop", "team-*"])
    await _register(hub, "north")
    await _register(hub, "team", importNamespaces=["de*"])
    beat = await hub.client.post(
        "/api/v1/clusters/east/heartbeat",
        json={"agentVersion": "0.1.0", "importedServices": 1, "importedEndpoints": 2},
        headers=east,
    )
    assert beat.status_code == 200, beat.text
    assert (await hub.put("east", east)).status_code == 201

    answer = await hub.client.get("/api/v1/serviceimports/demo/web/importers", headers=READER)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kind"] == "ImporterList"
    rows = {item["cluster"]: (item["imports"], item["why"]) for item in body["items"]}
    assert list(rows) == ["east", "edge", "north", "team"]
    assert rows["east"] == ("yes*", "Ready, following the import feed; it exports the "
                                    "Service too")
    assert rows["edge"][0] == "no"
    assert rows["edge"][1].startswith("its scope imports only namespaces shop, team-*, not demo")
    assert rows["north"][0] == "no" and "never sent a heartbeat" in rows["north"][1]
    assert rows["team"][0] == "no" and "never sent a heartbeat" in rows["team"][1]  # in scope


async def test_an_unknown_service_is_404(hub: Hub) -> None:
    answer = await hub.client.get("/api/v1/serviceimports/demo/none/importers", headers=READER)
    assert answer.status_code == 404
    assert answer.json()["kind"] == "Status"


async def test_with_cluster_selection_each_importer_gets_its_tiers_and_active_tier(
        hub: Hub) -> None:
    """The console's "Cluster selection" column: tiers from the clusters' properties, the
    active tier from the exporters' ready endpoints (docs/reference.md#cluster-selection)."""
    from tests.hub.test_api_endpointslices import slice_body, slice_path

    region = "region.topology.mcsync.io"
    tokens = {}
    for name, where in (("eu-1", "eu"), ("us-1", "us"), ("eu-2", "eu")):
        tokens[name] = await _register(hub, name)
        reported = await hub.client.put(f"/api/v1/clusters/{name}/properties",
                                        json={"properties": {region: where}},
                                        headers=tokens[name])
        assert reported.status_code == 200, reported.text
        beat = await hub.client.post(
            f"/api/v1/clusters/{name}/heartbeat",
            json={"agentVersion": "0.1.0", "importedServices": 1, "importedEndpoints": 1},
            headers=tokens[name])
        assert beat.status_code == 200, beat.text
    selectors = [{"propertySelector": {"matchProperties": {region: "@SameAsImporter@"}}},
                 {"propertySelector": {"matchExpressions": [{"key": region,
                                                             "operator": "Exists"}]}}]
    for exporter, ready in (("eu-1", False), ("us-1", True)):
        put = await hub.put(exporter, tokens[exporter], clusterSelectors=selectors)
        assert put.status_code == 201, put.text
        body = slice_body(f"web-{exporter}")
        body["spec"]["endpoints"][0]["conditions"]["ready"] = ready
        answer = await hub.client.put(slice_path(exporter, name=f"web-{exporter}"), json=body,
                                      headers=tokens[exporter])
        assert answer.status_code in (200, 201), answer.text

    answer = await hub.client.get("/api/v1/serviceimports/demo/web/importers", headers=READER)
    assert answer.status_code == 200, answer.text
    rows = {item["cluster"]: item for item in answer.json()["items"]}
    # eu-2's own tier (eu) has no ready endpoint: tier 2 (every region) is active.
    assert rows["eu-2"]["tiers"] == [["eu-1"], ["eu-1", "us-1"]]
    assert (rows["eu-2"]["activeTier"], rows["eu-2"]["activeClusters"]) == (2, ["eu-1", "us-1"])
    # us-1's own tier serves it.
    assert rows["us-1"]["tiers"] == [["us-1"], ["eu-1", "us-1"]]
    assert (rows["us-1"]["activeTier"], rows["us-1"]["activeClusters"]) == (1, ["us-1"])


async def test_without_cluster_selection_importers_carry_no_tiers(hub: Hub) -> None:
    east = await _register(hub, "east")
    assert (await hub.put("east", east)).status_code == 201
    answer = await hub.client.get("/api/v1/serviceimports/demo/web/importers", headers=READER)
    assert all("tiers" not in item for item in answer.json()["items"])
