"""Shared pieces of the API tests (no tests here): a running hub app and request builders.

`running_hub` migrates the test database, builds the app with `create_app`, runs its
real lifespan (which opens the real Store) and talks to it through httpx's ASGI
transport. `serving` additionally puts the app behind a real uvicorn server on a loopback
port, for the watch tests: httpx's ASGI transport buffers a whole response, so a live
stream needs a real socket.

Kept in a `test_api_*` module beside the tests that use it; pytest collects it and finds
nothing to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from hub.api.deps import context_of
from hub.app import create_app
from hub.settings import HubSettings
from hub.store import Store, migrate

ADMIN_TOKEN = "admin-token-for-the-api-tests-0123456789"
READER_TOKEN = "reader-token-for-the-api-tests-0123456789"
T0 = "2026-01-01T12:00:00.000Z"


def at(seconds: int) -> str:
    """An RFC 3339 instant `seconds` after T0 (export creation timestamps)."""
    return f"2026-01-01T12:{seconds // 60:02d}:{seconds % 60:02d}.000Z"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


ADMIN = bearer(ADMIN_TOKEN)
READER = bearer(READER_TOKEN)


def port(number: int, name: str = "", protocol: str = "TCP") -> dict[str, Any]:
    return {"name": name, "protocol": protocol, "port": number}


def export_body(
    cluster: str,
    *,
    namespace: str = "demo",
    name: str = "web",
    created: str = T0,
    ports: list[dict[str, Any]] | None = None,
    resource_version: str = "100",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """An InternalServiceExport as an agent PUTs it, as JSON."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "mcsync.io/v1alpha1",
        "kind": "InternalServiceExport",
        "metadata": metadata,
        "spec": {
            "ports": ports if ports is not None else [port(80, "http")],
            "serviceReference": {
                "clusterId": cluster,
                "kind": "Service",
                "namespace": namespace,
                "name": name,
                "uid": f"uid-{cluster}-{namespace}-{name}",
                "resourceVersion": resource_version,
                "generation": 1,
                "exportedSince": created,
                "exportCreationTimestamp": created,
            },
            **spec,
        },
    }


def export_path(cluster: str, namespace: str = "demo", name: str = "web") -> str:
    return f"/api/v1/clusters/{cluster}/serviceexports/{namespace}/{name}"


def conflict_of(obj: dict[str, Any]) -> tuple[str, str]:
    for condition in obj["status"]["conditions"]:
        if condition["type"] == "Conflict":
            return condition["status"], condition["reason"]
    raise AssertionError(f"no Conflict condition in {obj['status']}")


def watch_events(text: str) -> list[dict[str, Any]]:
    """The events of a watch answer's body (newline-delimited JSON), blank lines skipped."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A tracer provider that keeps every finished span in memory, synchronously."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def settings_for(url: str, **overrides: Any) -> HubSettings:
    values: dict[str, Any] = {
        "database_url": url,
        "admin_token": SecretStr(ADMIN_TOKEN),
        "reader_token": SecretStr(READER_TOKEN),
    }
    values.update(overrides)
    return HubSettings(**values)


@dataclass
class Hub:
    app: FastAPI
    client: httpx.AsyncClient
    settings: HubSettings

    @property
    def store(self) -> Store:
        store = context_of(self.app).store
        assert store is not None
        return store

    async def register(self, *names: str) -> dict[str, dict[str, str]]:
        """Register clusters; answers each one's member Authorization header."""
        headers = {}
        for name in names:
            answer = await self.client.post(
                "/api/v1/clusters", json={"metadata": {"name": name}}, headers=ADMIN
            )
            assert answer.status_code == 201, answer.text
            headers[name] = bearer(answer.json()["token"])
        return headers

    async def put(self, cluster: str, headers: dict[str, str], **kwargs: Any) -> httpx.Response:
        body = export_body(cluster, **kwargs)
        path = export_path(cluster, body["metadata"]["namespace"], body["metadata"]["name"])
        return await self.client.put(path, json=body, headers=headers)

    async def snapshot(self) -> Any:
        """Everything stored that a rejected request must leave alone."""
        exports = await self.client.get("/api/v1/serviceexports", headers=ADMIN)
        imports = await self.client.get("/api/v1/serviceimports", headers=ADMIN)
        clusters = await self.client.get("/api/v1/clusters", headers=ADMIN)
        assert exports.status_code == imports.status_code == clusters.status_code == 200
        # Heartbeat-derived fields move with time; the records themselves must not.
        for item in clusters.json()["items"]:
            item["status"].pop("lastHeartbeatTime", None)
            item["status"].pop("state", None)
        return exports.json(), imports.json(), clusters.json()["items"]


@contextlib.asynccontextmanager
async def running_hub(
    url: str, *, tracer_provider: TracerProvider | None = None, **overrides: Any
) -> AsyncIterator[Hub]:
    """A migrated database, the app's real lifespan, and an ASGI client."""
    await migrate.upgrade_async(url)
    settings = settings_for(url, **overrides)
    app = create_app(settings, tracer_provider=tracer_provider)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://hub") as client:
            yield Hub(app=app, client=client, settings=settings)


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    """Serve `app` (lifespan already running) on a free loopback port; answers its URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    host, port_number = sock.getsockname()
    config = uvicorn.Config(
        app, lifespan="off", log_config=None, access_log=False, timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(30):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
        yield f"http://{host}:{port_number}"
    finally:
        server.should_exit = True
        await task
        sock.close()
