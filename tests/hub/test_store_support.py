"""Builders shared by the store tests (no tests here): exports as an agent would send them.

Kept in a `test_store_*` module so that it lives beside the tests that use it; pytest
collects it and finds nothing to run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from hub.store import Store, migrate
from shared.models import InternalServiceExport, InternalServiceExportSpec, ObjectMeta

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """A fixed instant `seconds` after T0 (export creation timestamps)."""
    return T0 + timedelta(seconds=seconds)


def port(number: int, name: str = "", protocol: str = "TCP") -> dict[str, Any]:
    return {"name": name, "protocol": protocol, "port": number}


def make_export(
    cluster: str,
    *,
    namespace: str = "demo",
    name: str = "web",
    created: datetime = T0,
    ports: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    resource_version: str = "100",
    **spec: Any,
) -> InternalServiceExport:
    """An InternalServiceExport of `cluster` for namespace/name; extra kwargs go to the spec."""
    body = {
        "ports": ports if ports is not None else [port(80, "http")],
        "serviceReference": {
            "clusterId": cluster,
            "namespace": namespace,
            "name": name,
            "uid": f"uid-{cluster}-{namespace}-{name}",
            "resourceVersion": resource_version,
            "generation": 1,
            "exportedSince": created.isoformat(),
            "exportCreationTimestamp": created.isoformat(),
        },
        **spec,
    }
    return InternalServiceExport(
        metadata=ObjectMeta(name=name, namespace=namespace, annotations=annotations),
        spec=InternalServiceExportSpec.model_validate(body),
    )


async def open_store(url: str, **options: Any) -> Store:
    """Migrate the fresh database at `url` to head and open a Store on it."""
    await migrate.upgrade_async(url)
    return await Store.open(url, **options)


@asynccontextmanager
async def opened_store(url: str, *clusters: str, **options: Any) -> AsyncIterator[Store]:
    """A Store on the fresh database at `url` (`open_store`) with `clusters` registered;
    closed on the way out. What the store tests' `store` fixtures yield."""
    store = await open_store(url, **options)
    try:
        await register(store, *clusters)
        yield store
    finally:
        await store.close()


async def register(store: Store, *names: str) -> dict[str, str]:
    """Register clusters; answers their member tokens by name."""
    tokens = {}
    for name in names:
        _, tokens[name] = await store.clusters.register(name, {})
    return tokens


def conflict_of(export: InternalServiceExport) -> tuple[str, str]:
    condition = export.condition("Conflict")
    assert condition is not None, f"{export.metadata.name} has no Conflict condition"
    return condition.status, condition.reason
