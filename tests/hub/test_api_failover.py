"""Failover over the API (docs/reference.md#failover, #rest-api), on both databases, with the app's
real lifespan (its staleness sweeper included): the heartbeat answers the hub's TTL; a cluster
whose heartbeats stop leaves the import list by itself, comes back with its next
heartbeat, and the metrics say so; the mass-withdrawal hold shows as a condition and
`allow-withdrawal` lets the next held repair through once; bad input is refused by name."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.hub.test_api_endpointslices import slice_body, slice_path
from tests.hub.test_api_support import ADMIN, Hub, at, running_hub

TTL = 3.0  # the shortest the hub accepts
DEADLINE = 30.0  # generous: a slow shared machine must not fail these
AGENT = {"agentVersion": "0.1.0"}


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url, cluster_ttl=TTL) as running:
        yield running


async def heartbeat(hub: Hub, cluster: str, headers: dict[str, str], **body: Any) -> Any:
    answer = await hub.client.post(
        f"/api/v1/clusters/{cluster}/heartbeat", json={**AGENT, **body}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


async def imported_slices(hub: Hub, headers: dict[str, str]) -> set[str]:
    listed = await hub.client.get("/api/v1/clusters/west/imports", headers=headers)
    assert listed.status_code == 200, listed.text
    return {
        item["metadata"]["name"]
        for item in listed.json()["items"]
        if item["kind"] == "EndpointSliceExport"
    }


async def metric(hub: Hub, name: str) -> float:
    text = (await hub.client.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} is not exposed")


@contextlib.asynccontextmanager
async def beating(hub: Hub, members: dict[str, dict[str, str]], *names: str) -> AsyncIterator[None]:
    """Keep `names` heartbeating, as their agents would, while the block runs."""

    async def loop() -> None:
        while True:
            for name in names:
                await heartbeat(hub, name, members[name])
            await asyncio.sleep(TTL / 6)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_quiet_cluster_leaves_the_import_feed_and_its_heartbeat_brings_it_back(
    hub: Hub,
) -> None:
    for name in ("stale_panic", "endpointslices_withdrawn", "endpoints_withdrawn_clusters"):
        assert await metric(hub, f"mcsync_hub_{name}") == 0  # exist from the start
    members = await hub.register("east", "west", "north")
    for index, name in enumerate(("east", "west", "north")):
        answer = await heartbeat(hub, name, members[name])
        assert answer["clusterTtlSeconds"] == TTL
        assert answer["withdrawalAllowed"] is False
        assert (await hub.put(name, members[name], created=at(index))).status_code == 201
        put = await hub.client.put(
            slice_path(name, name=f"web-{name}"),
            json=slice_body(f"web-{name}", addresses=(f"10.0.{index}.7",)),
            headers=members[name],
        )
        assert put.status_code == 201, put.text
    every = {"web-east", "web-west", "web-north"}
    assert await imported_slices(hub, members["west"]) == every

    async with beating(hub, members, "west", "north"), asyncio.timeout(DEADLINE):
        # The sweeper's work, not polled by anything but this test.
        while await imported_slices(hub, members["west"]) != every - {"web-east"}:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        east = (await hub.client.get("/api/v1/clusters/east", headers=ADMIN)).json()
        assert (east["status"]["state"], east["status"]["endpointsWithdrawn"]) == ("Stale", True)
        assert await metric(hub, "mcsync_hub_endpointslices_withdrawn") == 1
        assert await metric(hub, "mcsync_hub_stale_panic") == 0
        # Its export record is kept, only said to be Stale.
        kept = await hub.client.get("/api/v1/clusters/east/serviceexports/demo/web", headers=ADMIN)
        assert kept.json()["status"]["clusterState"] == "Stale"

        await heartbeat(hub, "east", members["east"])
        assert await imported_slices(hub, members["west"]) == every  # at once
        east = (await hub.client.get("/api/v1/clusters/east", headers=ADMIN)).json()
        assert east["status"]["endpointsWithdrawn"] is False


async def test_the_withdrawal_hold_and_allow_withdrawal(hub: Hub) -> None:
    members = await hub.register("east")
    hold = {"wouldWithdraw": 15, "exports": 20, "since": "2026-11-28T04:00:00Z"}
    await heartbeat(hub, "east", members["east"], withdrawalHeld=hold)
    east = (await hub.client.get("/api/v1/clusters/east", headers=ADMIN)).json()
    (condition,) = east["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "WithdrawalHeld",
        "True",
        "MassWithdrawal",
    )
    assert "mcsync clusters allow-withdrawal east" in condition["message"]

    path = "/api/v1/clusters/{}/allow-withdrawal"
    assert (await hub.client.post(path.format("east"), headers=members["east"])).status_code == 403
    unknown = await hub.client.post(path.format("nowhere"), headers=ADMIN)
    assert unknown.status_code == 404
    assert "nowhere" in unknown.json()["message"]
    assert (await hub.client.post(path.format("east"), headers=ADMIN)).status_code == 200

    answers = [
        (await heartbeat(hub, "east", members["east"], withdrawalHeld=hold))["withdrawalAllowed"]
        for _ in range(2)
    ]
    assert answers == [True, False]  # one-shot
    await heartbeat(hub, "east", members["east"])  # the hold is gone
    east = (await hub.client.get("/api/v1/clusters/east", headers=ADMIN)).json()
    assert east["status"]["conditions"] == []


@pytest.mark.parametrize(
    ("hold", "field"),
    [
        ({"wouldWithdraw": -1, "exports": 20, "since": "2026-11-28T04:00:00Z"}, "wouldWithdraw"),
        ({"wouldWithdraw": 1, "exports": "20", "since": "2026-11-28T04:00:00Z"}, "exports"),
        ({"wouldWithdraw": 1, "exports": 20}, "since"),
    ],
)
async def test_a_malformed_hold_is_422_naming_the_field(
    hub: Hub, hold: dict[str, Any], field: str
) -> None:
    members = await hub.register("east")
    answer = await hub.client.post(
        "/api/v1/clusters/east/heartbeat",
        json={**AGENT, "withdrawalHeld": hold},
        headers=members["east"],
    )
    assert answer.status_code == 422
    assert field in answer.text
