"""The hub's mass-withdrawal guard of a member's full-state sync, and the one-shot
allowance of both guards (docs/reference.md#failover): a sync that would withdraw more
than half of at least 10 stored exports is held (409 naming the rule, WithdrawalHeld on
the cluster) until an admin allows it once; an ordinary DELETE is never held; an
allowance needs a hold, is shown while armed and lapses when its hold clears."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.hub.test_api_support import ADMIN, READER, Hub, export_body, export_path, running_hub

SYNC = "/api/v1/clusters/q/serviceexports"
ALLOW = "/api/v1/clusters/q/allow-withdrawal"


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


def _items(count: int) -> list[dict[str, Any]]:
    return [export_body("q", name=f"svc-{i}") for i in range(count)]


async def _names(hub: Hub) -> list[str]:
    listed = await hub.client.get(SYNC, headers=READER)
    assert listed.status_code == 200, listed.text
    return [item["metadata"]["name"] for item in listed.json()["items"]]


async def _cluster(hub: Hub) -> dict[str, Any]:
    answer = await hub.client.get("/api/v1/clusters/q", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    status: dict[str, Any] = answer.json()["status"]
    return status


async def test_a_sync_emptying_the_cluster_is_held_until_an_admin_allows_it(hub: Hub) -> None:
    member = (await hub.register("q"))["q"]
    synced = await hub.client.put(SYNC, json={"items": _items(12)}, headers=member)
    assert synced.status_code == 200, synced.text

    held = await hub.client.put(SYNC, json={"items": []}, headers=member)
    assert held.status_code == 409, held.text
    assert "more than half" in held.json()["message"]
    assert "mcsync clusters allow-withdrawal q" in held.json()["message"]
    assert len(await _names(hub)) == 12  # nothing written
    status = await _cluster(hub)
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"]) == ("WithdrawalHeld", "True")
    assert "would withdraw 12 of the cluster's 12" in condition["message"]
    assert not status.get("withdrawalAllowed")

    # Held again while nobody allows it.
    assert (await hub.client.put(SYNC, json={"items": []}, headers=member)).status_code == 409

    allowed = await hub.client.post(ALLOW, headers=ADMIN)
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["status"]["withdrawalAllowed"] is True
    emptied = await hub.client.put(SYNC, json={"items": []}, headers=member)
    assert emptied.status_code == 200, emptied.text
    assert emptied.json()["withdrawn"] == 12
    status = await _cluster(hub)
    assert status["conditions"] == [] and not status.get("withdrawalAllowed")


async def test_half_or_fewer_and_small_clusters_are_never_held(hub: Hub) -> None:
    member = (await hub.register("q"))["q"]
    assert (await hub.client.put(SYNC, json={"items": _items(12)}, headers=member)).is_success
    half = await hub.client.put(SYNC, json={"items": _items(6)}, headers=member)
    assert half.status_code == 200 and half.json()["withdrawn"] == 6
    small = await hub.client.put(SYNC, json={"items": []}, headers=member)  # 6 < 10
    assert small.status_code == 200 and small.json()["withdrawn"] == 6


async def test_an_ordinary_delete_is_never_held(hub: Hub) -> None:
    member = (await hub.register("q"))["q"]
    assert (await hub.client.put(SYNC, json={"items": _items(10)}, headers=member)).is_success
    for i in range(10):
        gone = await hub.client.delete(export_path("q", name=f"svc-{i}"), headers=member)
        assert gone.status_code == 200, gone.text
    assert await _names(hub) == []


async def test_the_hold_clears_when_the_exports_come_back(hub: Hub) -> None:
    member = (await hub.register("q"))["q"]
    assert (await hub.client.put(SYNC, json={"items": _items(12)}, headers=member)).is_success
    assert (await hub.client.put(SYNC, json={"items": []}, headers=member)).status_code == 409
    assert (await hub.client.post(ALLOW, headers=ADMIN)).status_code == 200

    # The member sends its whole set again: the hold clears, and the allowance with it.
    whole = await hub.client.put(SYNC, json={"items": _items(12)}, headers=member)
    assert whole.status_code == 200, whole.text
    status = await _cluster(hub)
    assert status["conditions"] == [] and not status.get("withdrawalAllowed")
    # A later mass withdrawal is held afresh.
    assert (await hub.client.put(SYNC, json={"items": []}, headers=member)).status_code == 409
    assert len(await _names(hub)) == 12


async def test_an_allowance_needs_a_hold(hub: Hub) -> None:
    await hub.register("q")
    refused = await hub.client.post(ALLOW, headers=ADMIN)
    assert refused.status_code == 409, refused.text
    assert "holds no mass withdrawal" in refused.json()["message"]
    assert not (await _cluster(hub)).get("withdrawalAllowed")
