"""`GET /api/v1/whoami`: the role each kind of token gives, and 401 for the rest."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.hub.test_api_support import ADMIN, READER, Hub, bearer, running_hub


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


async def test_each_token_learns_its_role(hub: Hub) -> None:
    members = await hub.register("east")
    for headers, expected in (
        (ADMIN, {"role": "admin"}),
        (READER, {"role": "reader"}),
        (members["east"], {"role": "member", "cluster": "east"}),
    ):
        answer = await hub.client.get("/api/v1/whoami", headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.json() == expected
    for headers in ({}, bearer("not-a-token")):
        answer = await hub.client.get("/api/v1/whoami", headers=headers)
        assert answer.status_code == 401
        assert answer.json()["kind"] == "Status"
