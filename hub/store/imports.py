"""ServiceImports: read-only views of the rows the write path derives (one per key).

The stored status lists the exporting clusters without their state; the state
(`Ready` / `Stale`) is filled in here, from the clusters' heartbeats, at read time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import codec, paging
from hub.store.clusterstate import ClusterStates
from hub.store.context import StoreContext
from hub.store.errors import NotFound
from hub.store.feed import read_current_revision
from hub.store.results import Page
from hub.store.tables import clusters, service_imports
from shared.models import ObjectMeta, ServiceImport, ServiceImportSpec

_LIST_KIND = "serviceimports"


class ImportStore:
    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx

    async def _states(self, conn: AsyncConnection) -> dict[str, str]:
        """Every cluster's state as its ServiceImport entries say it (Ready or Stale)."""
        states = ClusterStates(self._ctx.cluster_ttl)
        rows = (await conn.execute(select(clusters.c.name, clusters.c.last_heartbeat))).all()
        return {name: states.of_export(hb) for name, hb in rows}

    def _model(self, row: Mapping[Any, Any], states: Mapping[str, str]) -> ServiceImport:
        return ServiceImport(
            metadata=ObjectMeta(
                name=row["name"],
                namespace=row["namespace"],
                resource_version=str(row["resource_version"]),
                creation_timestamp=row["created_at"],
                annotations={},
            ),
            spec=ServiceImportSpec.model_validate_json(row["spec"]),
            status=codec.import_status_with_states(row["status"], states),
        )

    async def get(self, namespace: str, name: str) -> ServiceImport:
        query = select(service_imports).where(
            service_imports.c.namespace == namespace,
            service_imports.c.name == name,
            service_imports.c.created_at.is_not(None),
        )
        async with self._ctx.read() as conn:
            row = (await conn.execute(query)).mappings().first()
            states = await self._states(conn) if row is not None else {}
        if row is None:
            raise NotFound(f"ServiceImport {namespace}/{name} not found")
        return self._model(row, states)

    async def list(
        self,
        *,
        namespace: str | None = None,
        conflict: bool | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Page[ServiceImport]:
        """ServiceImports in (namespace, name) order, filtered, a page at a time."""
        paging.check_limit(limit)
        query = (
            select(service_imports)
            # Committed rows always have created_at; a NULL one is an older hub's lock row.
            .where(service_imports.c.created_at.is_not(None))
            .order_by(service_imports.c.namespace, service_imports.c.name)
        )
        if namespace is not None:
            query = query.where(service_imports.c.namespace == namespace)
        if conflict is not None:
            query = query.where(service_imports.c.conflict == conflict)
        if continue_token is not None:
            after = paging.decode(_LIST_KIND, continue_token, width=2)
            query = query.where(
                tuple_(service_imports.c.namespace, service_imports.c.name) > tuple_(*after)
            )
        if limit is not None:
            query = query.limit(limit + 1)
        async with self._ctx.read() as conn:
            revision = await read_current_revision(conn)
            rows = (await conn.execute(query)).mappings().all()
            states = await self._states(conn)
        rows, token = paging.cut(rows, limit, _LIST_KIND, lambda r: (r["namespace"], r["name"]))
        return Page(
            items=[self._model(r, states) for r in rows],
            resource_version=str(revision),
            continue_token=token,
        )
