"""Heartbeats at fleet scale (docs/reference.md#fleet-scale), on both databases.

A member's in-order heartbeat is answered by the route's fast path and recorded in a
group commit with every beat that arrives with it (`hub.store.heartbeats`); anything else
goes through the declared route. Either way the answer is the same `HeartbeatResponse`,
and a refused beat records nothing: another cluster's token is 403, an unknown token 401,
a body out of order 422 naming the field.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from hub.store.errors import NotFound
from hub.store.heartbeats import HeartbeatOutcome
from hub.store.locks import lock_clusters, lock_keys
from hub.store.tables import clusters
from shared.models import Heartbeat, HeartbeatResponse
from shared.version import __version__
from tests.hub.test_api_endpointslices import slice_body, slice_path
from tests.hub.test_api_support import ADMIN, Hub, at, bearer, running_hub
from tests.hub.test_store_withdrawals import age

AGENT = {"agentVersion": "0.1.0", "importedServices": 3, "importedEndpoints": 30}


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


def beat_path(cluster: str) -> str:
    return f"/api/v1/clusters/{cluster}/heartbeat"


async def cluster(hub: Hub, name: str) -> dict[str, object]:
    answer = await hub.client.get(f"/api/v1/clusters/{name}", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    status: dict[str, object] = answer.json()["status"]
    return status


async def test_many_beats_at_once_share_transactions_and_each_is_recorded(hub: Hub) -> None:
    names = [f"c{i}" for i in range(40)]
    members = await hub.register(*names)
    batches_before = hub.store.clusters._beats.batches

    answers = await asyncio.gather(
        *(hub.client.post(beat_path(n), json=AGENT, headers=members[n]) for n in names)
    )
    for answer in answers:
        assert answer.status_code == 200, answer.text
        parsed = HeartbeatResponse.model_validate(answer.json())
        assert parsed.hub_version == __version__
        assert parsed.state == "Ready"
        assert parsed.cluster_ttl_seconds == hub.settings.cluster_ttl
        assert parsed.withdrawal_allowed is False
    assert hub.store.clusters._beats.batches - batches_before < len(names)
    for name in names:
        status = await cluster(hub, name)
        assert status["state"] == "Ready"
        assert status["importedServices"] == 3
        assert status["agentVersion"] == "0.1.0"


async def test_the_fast_answer_is_the_declared_routes_answer(hub: Hub) -> None:
    members = await hub.register("east")
    fast = await hub.client.post(beat_path("east"), json=AGENT, headers=members["east"])
    # The admin's beat goes the declared route (the fast path takes members' beats only).
    declared = await hub.client.post(beat_path("east"), json=AGENT, headers=ADMIN)
    assert fast.status_code == declared.status_code == 200
    one, other = fast.json(), declared.json()
    assert one.pop("serverTime") and other.pop("serverTime")
    assert one == other


async def test_a_refused_beat_records_nothing_and_says_why(hub: Hub) -> None:
    members = await hub.register("east", "west")
    foreign = await hub.client.post(beat_path("east"), json=AGENT, headers=members["west"])
    assert foreign.status_code == 403, foreign.text
    unknown = await hub.client.post(
        beat_path("east"), json=AGENT, headers={"Authorization": "Bearer nobody"}
    )
    assert unknown.status_code == 401, unknown.text
    bad = await hub.client.post(
        beat_path("east"), json={"agentVersion": ""}, headers=members["east"]
    )
    assert bad.status_code == 422, bad.text
    assert "agentVersion" in bad.text
    missing = await hub.client.post(beat_path("gone"), json=AGENT, headers=ADMIN)
    assert missing.status_code == 404, missing.text
    assert (await cluster(hub, "east"))["state"] == "Pending"


async def test_a_held_withdrawal_takes_the_allowance_once_through_the_fast_path(
    hub: Hub,
) -> None:
    members = await hub.register("east")
    hold = {"since": "2026-01-01T00:00:00Z", "exports": 20, "wouldWithdraw": 15}
    first = await hub.client.post(
        beat_path("east"), json={**AGENT, "withdrawalHeld": hold}, headers=members["east"]
    )
    assert first.json()["withdrawalAllowed"] is False
    allowed = await hub.client.post("/api/v1/clusters/east/allow-withdrawal", headers=ADMIN)
    assert allowed.status_code == 200, allowed.text
    taken = await asyncio.gather(
        *(
            hub.client.post(
                beat_path("east"), json={**AGENT, "withdrawalHeld": hold}, headers=members["east"]
            )
            for _ in range(3)
        )
    )
    assert [a.json()["withdrawalAllowed"] for a in taken].count(True) == 1


async def test_a_cluster_whose_row_is_held_does_not_hold_up_the_others_beats(
    hub: Hub, database_url: str
) -> None:
    """A transaction holding one cluster's row FOR UPDATE (the staleness sweep, a delete, a
    scope patch) holds up that cluster's beat until commit; the beats of every other
    cluster in the same batch are answered meanwhile, and the held cluster's beat once the
    transaction commits."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer at a time: no other transaction can hold a row")
    members = await hub.register("east", "west")
    engine = hub.store.engine
    async with engine.connect() as conn, conn.begin():
        await conn.execute(
            select(clusters.c.name).where(clusters.c.name == "east").with_for_update()
        )
        east = asyncio.create_task(
            hub.client.post(beat_path("east"), json=AGENT, headers=members["east"])
        )
        west = await asyncio.wait_for(
            hub.client.post(beat_path("west"), json=AGENT, headers=members["west"]), 30
        )
        assert west.status_code == 200, west.text
        assert not east.done()
    answer = await asyncio.wait_for(east, 30)
    assert answer.status_code == 200, answer.text
    assert (await cluster(hub, "east"))["state"] == "Ready"


async def test_a_beat_is_recorded_while_its_own_clusters_write_is_in_flight(
    hub: Hub, database_url: str
) -> None:
    """A write of a cluster's exports or slices holds its cluster's row and its keys until
    commit (`hub.store.locks`, steps 1 and 2), and on a starved hub that can be many
    seconds. The cluster's heartbeat must not wait for it: a cluster that keeps beating is
    never judged Stale because its own writes are slow (docs/reference.md#fleet-scale).
    On PostgreSQL the beat is answered and recorded while the write is open, and a sweep
    then finds the cluster Ready; SQLite has one writer at a time, so there the beat is
    answered once the write commits."""
    members = await hub.register("east", "west")
    ctx = hub.store._ctx
    await age(hub.store, "east")  # the last beat long ago: without a new one it is Stale
    postgres = database_url.startswith("postgresql")
    async with ctx.write() as conn:
        await lock_clusters(conn, ctx, ["east"])  # what every write of east takes first
        await lock_keys(conn, ctx, [("team", "svc")])
        beat = asyncio.create_task(
            hub.client.post(beat_path("east"), json=AGENT, headers=members["east"])
        )
        if postgres:
            answer = await asyncio.wait_for(asyncio.shield(beat), 30)
            assert answer.status_code == 200, answer.text
            assert answer.json()["state"] == "Ready"
            swept = await asyncio.wait_for(hub.store.withdrawals.sweep(), 30)
            assert "east" not in swept.fleet.stale
            assert (await cluster(hub, "east"))["state"] == "Ready"
        else:
            await asyncio.sleep(0.2)  # the beat waits for the database's only writer
    answer = await asyncio.wait_for(beat, 30)
    assert answer.status_code == 200, answer.text
    assert (await cluster(hub, "east"))["state"] == "Ready"
    assert "east" not in (await hub.store.withdrawals.sweep()).fleet.stale


async def test_a_scope_patch_waits_for_the_clusters_write_in_flight(
    hub: Hub, database_url: str
) -> None:
    """A write checks the scope it locked its cluster's row with, and a scope patch waits
    for it (docs/reference.md#scope-and-limits: the patch takes effect for the NEXT write),
    though a beat does not (above). SQLite: the database's one writer orders them."""
    members = await hub.register("east")
    ctx = hub.store._ctx
    async with ctx.write() as conn:
        await lock_clusters(conn, ctx, ["east"])
        patch = asyncio.create_task(
            hub.client.patch(
                "/api/v1/clusters/east",
                json={"spec": {"exportNamespaces": ["other"]}},
                headers={**ADMIN, "Content-Type": "application/merge-patch+json"},
            )
        )
        if database_url.startswith("postgresql"):
            beat = await asyncio.wait_for(
                hub.client.post(beat_path("east"), json=AGENT, headers=members["east"]), 30
            )
            assert beat.status_code == 200, beat.text
            assert not patch.done()
    patched = await asyncio.wait_for(patch, 30)
    assert patched.status_code == 200, patched.text
    assert patched.json()["spec"]["exportNamespaces"] == ["other"]


def token_of(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


async def test_one_batch_answers_every_outcome_of_a_beat(hub: Hub) -> None:
    """Beats of one batch each get their own answer: recorded, a Stale cluster's beat
    giving its withheld endpoints back to the import feed at once (docs/reference.md#failover),
    a token that is not the cluster's recording nothing (None: the route then says why),
    an unknown cluster (None with a token, NotFound once authenticated)."""
    members = await hub.register("east", "west", "north")
    for index, name in enumerate(("east", "west", "north")):
        await hub.client.post(beat_path(name), json=AGENT, headers=members[name])
        assert (await hub.put(name, members[name], created=at(index))).status_code == 201
        put = await hub.client.put(
            slice_path(name, name=f"web-{name}"),
            json=slice_body(f"web-{name}", addresses=(f"10.0.{index}.7",)),
            headers=members[name],
        )
        assert put.status_code == 201, put.text
    await age(hub.store, "east")
    swept = await hub.store.withdrawals.sweep()
    assert "east" in swept.fleet.stale
    assert (await cluster(hub, "east"))["endpointsWithdrawn"] is True

    beat = Heartbeat(agent_version="0.1.0", imported_services=1)
    store = hub.store.clusters
    back, west, foreign, unknown = await asyncio.gather(
        store.beat_with_token("east", beat, token=token_of(members["east"])),
        store.beat_with_token("west", beat, token=token_of(members["west"])),
        store.beat_with_token("north", beat, token=token_of(members["west"])),
        store.beat_with_token("gone", beat, token=token_of(members["east"])),
    )
    assert back == HeartbeatOutcome(withdrawal_allowed=False, given_back=1)
    assert west == HeartbeatOutcome(withdrawal_allowed=False, given_back=0)
    assert foreign is None and unknown is None
    with pytest.raises(NotFound):
        await store.beat("gone", agent_version="0.1.0")

    east = await cluster(hub, "east")
    assert (east["state"], east["endpointsWithdrawn"]) == ("Ready", False)
    assert "east" not in (await hub.store.withdrawals.sweep()).fleet.stale
    listed = await hub.client.get("/api/v1/clusters/west/imports", headers=members["west"])
    names = {i["metadata"]["name"] for i in listed.json()["items"]}
    assert {"web-east", "web-west", "web-north"} <= names
    north = await cluster(hub, "north")
    assert north["importedServices"] == 3  # as before: the foreign token's beat wrote nothing
    assert (await cluster(hub, "west"))["importedServices"] == 1


async def test_a_rotated_clusters_beats_in_a_batch(hub: Hub) -> None:
    """docs/reference.md#credentials: after a rotation the previous token's beat is not
    recorded by the batch's own check (the route's long way accepts it within the grace,
    and keeps it), and the first beat with the new token retires the previous one."""
    members = await hub.register("east", "west")
    old = token_of(members["east"])
    rotated = await hub.client.post("/api/v1/clusters/east/token", headers=ADMIN)
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["token"]
    beat = Heartbeat(agent_version="0.1.0")
    store = hub.store.clusters
    with_old, other = await asyncio.gather(
        store.beat_with_token("east", beat, token=old),
        store.beat_with_token("west", beat, token=token_of(members["west"])),
    )
    assert with_old is None and other is not None
    answer = await hub.client.post(beat_path("east"), json=AGENT, headers=bearer(old))
    assert answer.status_code == 200, answer.text  # the long way: still within the grace
    assert await previous_hash("east", hub) is not None
    assert await store.beat_with_token("east", beat, token=new) == HeartbeatOutcome(False)
    assert await previous_hash("east", hub) is None
    answer = await hub.client.post(beat_path("east"), json=AGENT, headers=bearer(old))
    assert answer.status_code == 401, answer.text
    answer = await hub.client.post(beat_path("east"), json=AGENT, headers=bearer(new))
    assert answer.status_code == 200, answer.text


async def previous_hash(name: str, hub: Hub) -> str | None:
    async with hub.store._ctx.read() as conn:
        found = await conn.execute(
            select(clusters.c.previous_token_hash).where(clusters.c.name == name)
        )
        value = found.scalar_one()
    return None if value is None else str(value)
