"""Who may do what (docs/reference.md#credentials), through the real app, store and database."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.hub.test_api_support import (
    ADMIN,
    READER,
    Hub,
    bearer,
    export_body,
    export_path,
    running_hub,
)


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


async def test_no_token_or_unknown_token_is_401_with_bearer_challenge(hub: Hub) -> None:
    for headers in ({}, bearer("not-a-token"), {"Authorization": "Basic Zm9vOmJhcg=="}):
        answer = await hub.client.get("/api/v1/clusters", headers=headers)
        assert answer.status_code == 401
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        status = answer.json()
        assert status["kind"] == "Status"
        assert status["reason"] == "Unauthorized"


async def test_member_token_acts_only_under_its_own_cluster(hub: Hub) -> None:
    members = await hub.register("east", "west")
    east = members["east"]

    own = await hub.put("east", east)
    assert own.status_code == 201, own.text
    assert (await hub.client.get(export_path("east"), headers=east)).status_code == 200
    assert (await hub.client.get("/api/v1/clusters/east", headers=east)).status_code == 200
    heartbeat = await hub.client.post(
        "/api/v1/clusters/east/heartbeat", json={"agentVersion": "0.1.0"}, headers=east
    )
    assert heartbeat.status_code == 200

    # Another cluster's paths, and the reader/admin routes, are forbidden.
    forbidden = [
        hub.client.put(export_path("west"), json=export_body("west"), headers=east),
        hub.client.get(export_path("west"), headers=east),
        hub.client.get("/api/v1/clusters/west", headers=east),
        hub.client.get("/api/v1/clusters/west/serviceexports", headers=east),
        hub.client.get("/api/v1/clusters", headers=east),
        hub.client.get("/api/v1/serviceexports", headers=east),
        hub.client.get("/api/v1/serviceimports", headers=east),
        hub.client.post("/api/v1/clusters", json={"metadata": {"name": "x"}}, headers=east),
        hub.client.delete("/api/v1/clusters/east", headers=east),
    ]
    for request in forbidden:
        answer: httpx.Response = await request
        assert answer.status_code == 403, (answer.request.method, answer.request.url, answer.text)
        assert answer.json()["reason"] == "Forbidden"

    # Nothing was written under west, and east is still registered.
    assert (await hub.client.get(export_path("west"), headers=ADMIN)).status_code == 404
    assert (await hub.client.get("/api/v1/clusters/east", headers=ADMIN)).status_code == 200


async def test_reader_reads_everything_and_writes_nothing(hub: Hub) -> None:
    members = await hub.register("east")
    assert (await hub.put("east", members["east"])).status_code == 201
    before = await hub.snapshot()

    for path in (
        "/api/v1/clusters",
        "/api/v1/clusters/east",
        "/api/v1/clusters/east/serviceexports",
        export_path("east"),
        "/api/v1/serviceexports",
        "/api/v1/serviceimports",
        "/api/v1/serviceimports/demo/web",
    ):
        answer = await hub.client.get(path, headers=READER)
        assert answer.status_code == 200, (path, answer.text)

    writes = [
        hub.client.put(export_path("east"), json=export_body("east", ports=[]), headers=READER),
        hub.client.delete(export_path("east"), headers=READER),
        hub.client.patch(
            export_path("east"),
            json={"metadata": {"resourceVersion": "1", "annotations": {"a": "b"}}},
            headers=READER,
        ),
        hub.client.post("/api/v1/clusters", json={"metadata": {"name": "x"}}, headers=READER),
        hub.client.delete("/api/v1/clusters/east", headers=READER),
        hub.client.post(
            "/api/v1/clusters/east/heartbeat", json={"agentVersion": "0.1.0"}, headers=READER
        ),
    ]
    for request in writes:
        answer = await request
        assert answer.status_code == 403, (answer.request.method, answer.request.url)
    assert await hub.snapshot() == before


async def test_admin_can_do_everything(hub: Hub) -> None:
    await hub.register("east")
    assert (await hub.put("east", ADMIN)).status_code == 201
    assert (await hub.client.get(export_path("east"), headers=ADMIN)).status_code == 200
    assert (await hub.client.get("/api/v1/serviceexports", headers=ADMIN)).status_code == 200
    beat = await hub.client.post(
        "/api/v1/clusters/east/heartbeat", json={"agentVersion": "0.1.0"}, headers=ADMIN
    )
    assert beat.status_code == 200
    assert (await hub.client.delete(export_path("east"), headers=ADMIN)).status_code == 200
    gone = await hub.client.delete("/api/v1/clusters/east", headers=ADMIN)
    assert gone.status_code == 200
    assert (await hub.client.get("/api/v1/clusters/east", headers=ADMIN)).status_code == 404


async def test_deregistered_cluster_token_stops_working(hub: Hub) -> None:
    members = await hub.register("east")
    assert (await hub.client.delete("/api/v1/clusters/east", headers=ADMIN)).status_code == 200
    answer = await hub.client.get("/api/v1/clusters/east", headers=members["east"])
    assert answer.status_code == 401


async def test_token_is_shown_once_and_never_in_metrics(hub: Hub) -> None:
    members = await hub.register("east")
    token = members["east"]["Authorization"].removeprefix("Bearer ")
    again = await hub.client.get("/api/v1/clusters/east", headers=members["east"])
    assert token not in again.text
    await hub.client.get("/api/v1/clusters", headers=bearer(token + "x"))
    metrics = await hub.client.get("/metrics")
    assert metrics.status_code == 200
    for secret in (token, ADMIN_TOKEN_VALUE, READER_TOKEN_VALUE):
        assert secret not in metrics.text


ADMIN_TOKEN_VALUE = ADMIN["Authorization"].removeprefix("Bearer ")
READER_TOKEN_VALUE = READER["Authorization"].removeprefix("Bearer ")


async def test_operational_routes_need_no_token(hub: Hub) -> None:
    assert (await hub.client.get("/healthz")).status_code == 200
    ready = await hub.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    version = (await hub.client.get("/api/v1/version")).json()
    assert version["minAgentVersion"] == hub.settings.min_agent_version
    assert version["apiVersion"] == "mcsync.io/v1alpha1"
    openapi = (await hub.client.get("/openapi.json")).json()
    assert "/api/v1/clusters/{cluster}/serviceexports/{namespace}/{name}" in openapi["paths"]


async def test_request_log_lines_carry_the_route_template_and_never_a_token(
    hub: Hub, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from hub.logs import JsonFormatter, TextFormatter

    caplog.set_level(logging.INFO)
    members = await hub.register("east")
    token = members["east"]["Authorization"].removeprefix("Bearer ")
    await hub.client.get("/api/v1/clusters/east", headers=members["east"])
    await hub.client.get("/api/v1/clusters", headers=bearer("wrong-" + token))

    requests = [r for r in caplog.records if r.name == "mcsync.hub.requests"]
    lines = [json.loads(JsonFormatter().format(r)) for r in requests]
    assert {"method": "GET", "route": "/api/v1/clusters/{cluster}", "status": 200}.items() <= (
        next(line for line in lines if line.get("path") == "/api/v1/clusters/east").items()
    )
    assert any(line["status"] == 401 for line in lines)
    for record in caplog.records:
        for formatter in (JsonFormatter(), TextFormatter()):
            text = formatter.format(record)
            for secret in (token, ADMIN_TOKEN_VALUE, READER_TOKEN_VALUE):
                assert secret not in text


# --- member isolation, every verb (issue: reliability and security under hostile input) --


@pytest.mark.reliability
async def test_member_token_on_any_path_of_another_cluster_is_403_and_changes_nothing(
    hub: Hub,
) -> None:
    members = await hub.register("east", "west")
    east = members["east"]
    assert (await hub.put("west", members["west"])).status_code == 201
    before = await hub.snapshot()
    west_export = export_path("west")
    patch = {"metadata": {"resourceVersion": "1", "annotations": {"a": "b"}}}
    attempts = [
        ("PUT", west_export, export_body("west")),
        ("GET", west_export, None),
        ("DELETE", west_export, None),
        ("PATCH", west_export, patch),
        ("GET", "/api/v1/clusters/west/serviceexports", None),
        ("GET", "/api/v1/clusters/west/serviceexports?watch=true&timeoutSeconds=1", None),
        ("PUT", "/api/v1/clusters/west/serviceexports", {"items": []}),
        ("POST", "/api/v1/clusters/west/heartbeat", {"agentVersion": "0.1.0"}),
        ("GET", "/api/v1/clusters/west", None),
        ("DELETE", "/api/v1/clusters/west", None),
    ]
    for method, path, body in attempts:
        headers = dict(east)
        if method == "PATCH":
            headers["Content-Type"] = "application/merge-patch+json"
        answer = await hub.client.request(
            method, path, headers=headers, content=None if body is None else json.dumps(body)
        )
        assert answer.status_code == 403, (method, path, answer.status_code, answer.text)
        assert answer.json()["reason"] == "Forbidden"
    assert await hub.snapshot() == before


@pytest.mark.reliability
async def test_member_tokens_are_stored_only_as_sha256_hashes(hub: Hub) -> None:
    import hashlib

    from sqlalchemy import MetaData, String, Text, select

    members = await hub.register("east", "west")
    tokens = {name: h["Authorization"].removeprefix("Bearer ") for name, h in members.items()}
    assert (await hub.put("east", members["east"])).status_code == 201
    metadata = MetaData()
    async with hub.store.engine.connect() as conn:
        await conn.run_sync(metadata.reflect)
        hashes = {
            row.name: row.token_hash
            for row in await conn.execute(select(metadata.tables["clusters"]))
        }
        # No text column of any table holds a token, in any row.
        for table in metadata.sorted_tables:
            text_columns = [c for c in table.columns if isinstance(c.type, (String, Text))]
            for row in await conn.execute(select(*text_columns)) if text_columns else []:
                for value in row:
                    for token in tokens.values():
                        assert token not in str(value), (table.name, "holds a member token")
    assert hashes == {
        name: hashlib.sha256(token.encode()).hexdigest() for name, token in tokens.items()
    }


@pytest.mark.reliability
async def test_configured_tokens_are_compared_in_constant_time(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admin and reader tokens go through hmac.compare_digest; a member token is never
    compared at all, only its sha256 looked up (a hash reveals nothing about the token)."""
    import hmac

    import hub.api.credentials as credentials

    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(credentials.hmac, "compare_digest", spy)
    guess = ADMIN_TOKEN_VALUE[:-1] + "x"  # all but the last character right
    assert (await hub.client.get("/api/v1/clusters", headers=bearer(guess))).status_code == 401
    assert (guess.encode(), ADMIN_TOKEN_VALUE.encode()) in compared
    assert (guess.encode(), READER_TOKEN_VALUE.encode()) in compared
