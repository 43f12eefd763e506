"""A many-star `exportNamespaces` glob cannot stall the hub (docs/reference.md#scope-and-limits):
the PUT into a long, almost matching namespace is refused at once, on SQLite and PostgreSQL,
and `--token-grace-seconds` is checked at start."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.hub.test_api_support import ADMIN, bearer, export_body, running_hub
from tests.hub.test_cli import run_hub

HOSTILE_GLOB = "*-" * 30 + "x"  # 30 stars, 61 characters: a valid pattern
LONG_NAMESPACE = "a-" * 31 + "b"  # 63 characters


async def test_a_many_star_glob_is_answered_at_once(database_url: str) -> None:
    async with running_hub(database_url) as hub:
        answer = await hub.client.post(
            "/api/v1/clusters",
            json={"metadata": {"name": "east"}, "spec": {"exportNamespaces": [HOSTILE_GLOB]}},
            headers=ADMIN,
        )
        assert answer.status_code == 201, answer.text
        token = answer.json()["token"]
        put = hub.client.put(
            f"/api/v1/clusters/east/serviceexports/{LONG_NAMESPACE}/web",
            json=export_body("east", namespace=LONG_NAMESPACE),
            headers=bearer(token),
        )
        # Generous: a backtracking matcher needs hours for this pattern, not seconds.
        refused = await asyncio.wait_for(put, timeout=60)
        assert refused.status_code == 403, refused.text
        assert "spec.exportNamespaces" in refused.json()["message"]
        matching = LONG_NAMESPACE[:-1] + "x"
        accepted = await hub.client.put(
            f"/api/v1/clusters/east/serviceexports/{matching}/web",
            json=export_body("east", namespace=matching), headers=bearer(token),
        )
        assert accepted.status_code in (200, 201), accepted.text


def test_a_bad_token_grace_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args, env, named in (
        (["--token-grace-seconds", "-1"], {}, "--token-grace-seconds"),
        ([], {"MCSYNC_TOKEN_GRACE_SECONDS": "soon"}, "MCSYNC_TOKEN_GRACE_SECONDS"),
    ):
        result = run_hub(args, cwd=tmp_path, env=env)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and named in lines[0], result.stderr
