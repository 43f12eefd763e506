"""`POST /api/v1/clusters/{cluster}/token` (docs/reference.md#credentials): a member
token rotates without a refused request, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from hub.api.deps import context_of
from hub.store.tables import clusters
from tests.hub.test_api_support import ADMIN, READER, bearer, export_body, running_hub


async def register(hub: object, name: str) -> str:
    answer = await hub.client.post(  # type: ignore[attr-defined]
        "/api/v1/clusters", json={"metadata": {"name": name}}, headers=ADMIN
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["token"])


async def beat(hub: object, name: str, token: str) -> int:
    answer = await hub.client.post(  # type: ignore[attr-defined]
        f"/api/v1/clusters/{name}/heartbeat", json={"agentVersion": "0.1.0"},
        headers=bearer(token),
    )
    return int(answer.status_code)


async def stored_hashes(hub: object, name: str) -> tuple[str, str | None]:
    store = context_of(hub.app).store  # type: ignore[attr-defined]
    assert store is not None
    async with store._ctx.read() as conn:
        row = (
            await conn.execute(
                select(clusters.c.token_hash, clusters.c.previous_token_hash).where(
                    clusters.c.name == name
                )
            )
        ).one()
    return row.token_hash, row.previous_token_hash


async def test_old_token_works_until_the_agent_uses_the_new_one(database_url: str) -> None:
    async with running_hub(database_url) as hub:
        old = await register(hub, "east")
        answer = await hub.client.post("/api/v1/clusters/east/token", headers=ADMIN)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        new = body["token"]
        assert new != old and body["metadata"]["name"] == "east"
        assert body["previousTokenExpires"] is not None
        # Stored as hashes only, neither token in clear.
        current, previous = await stored_hashes(hub, "east")
        assert {current, previous}.isdisjoint({old, new}) and previous is not None
        # Both work meanwhile, for writes too …
        assert await beat(hub, "east", old) == 200
        put = await hub.client.put("/api/v1/clusters/east/serviceexports/demo/web",
                                   json=export_body("east"), headers=bearer(old))
        assert put.status_code in (200, 201), put.text
        # … until the first request with the new one: then the old one is refused.
        assert await beat(hub, "east", new) == 200
        assert await beat(hub, "east", old) == 401
        assert await stored_hashes(hub, "east") == (current, None)
        assert await beat(hub, "east", new) == 200


async def test_the_grace_period_ends_the_old_token(database_url: str) -> None:
    # A grace long enough for the first beat to land inside it on a loaded machine.
    async with running_hub(database_url, token_grace_seconds=3) as hub:
        old = await register(hub, "east")
        new = (await hub.client.post("/api/v1/clusters/east/token", headers=ADMIN)).json()["token"]
        assert await beat(hub, "east", old) == 200
        await asyncio.sleep(3.5)
        assert await beat(hub, "east", old) == 401
        assert await beat(hub, "east", new) == 200
    async with running_hub(database_url, token_grace_seconds=0) as hub:
        old = await register(hub, "west")
        answer = await hub.client.post("/api/v1/clusters/west/token", headers=ADMIN)
        assert answer.json().get("previousTokenExpires") is None
        assert await beat(hub, "west", old) == 401


async def test_only_the_admin_rotates_and_only_registered_clusters(database_url: str) -> None:
    async with running_hub(database_url) as hub:
        member = await register(hub, "east")
        for headers, status in ((READER, 403), (bearer(member), 403), ({}, 401)):
            answer = await hub.client.post("/api/v1/clusters/east/token", headers=headers)
            assert answer.status_code == status, answer.text
        missing = await hub.client.post("/api/v1/clusters/nowhere/token", headers=ADMIN)
        assert missing.status_code == 404 and missing.json()["kind"] == "Status"
        assert await beat(hub, "east", member) == 200  # refused rotations changed nothing
