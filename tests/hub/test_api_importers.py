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
