"""The heartbeat answer carries the hub's `--clusterset-name` (docs/reference.md#export-path,
KEP-2149), which agents write into the About API's `clusterset.k8s.io`; a hub that names none leaves
it out."""

from __future__ import annotations

import pytest

from tests.hub.test_api_support import running_hub


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, None),
        ({"clusterset_name": "prod.example.com"}, "prod.example.com"),
    ],
)
async def test_heartbeat_answers_the_clusterset_name(
    database_url: str, overrides: dict[str, str], expected: str | None
) -> None:
    async with running_hub(database_url, **overrides) as hub:
        members = await hub.register("east")
        answer = await hub.client.post(
            "/api/v1/clusters/east/heartbeat", json={"agentVersion": "0.1.0"},
            headers=members["east"],
        )
        assert answer.status_code == 200, answer.text
        assert answer.json().get("clustersetName") == expected
