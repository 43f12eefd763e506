"""ServiceImports: read-only views of the rows the write path derives (one per key).

The stored status lists the exporting clusters without their state; the state
(`Ready` / `Stale`) is filled in here, from the clusters' heartbeats, at read time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import exists, func, literal, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import codec, paging
from hub.store.clusterstate import ClusterStates
from hub.store.context import StoreContext
from hub.store.errors import NotFound
from hub.store.results import Page
from hub.store.revisions import read_current_revision
from hub.store.tables import clusters, exports, service_imports
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
        search: str | None = None,
    ) -> Page[ServiceImport]:
        """ServiceImports in (namespace, name) order, filtered, a page at a time.

        `search` (the console's search field, docs/reference.md#console): every whitespace-separated
        word, case-insensitively, a substring of "namespace/name" or of an exporting cluster's
        id. It is answered in SQL with the same keyset paging: the query walks the rows in
        key order (ix_service_imports_conflict_key when `conflict` is given, the primary
        key otherwise), tests each row's key and probes its exports by key
        (ix_exports_key_cluster), and stops at `limit + 1` matches. A common word costs
        about a page of rows; a rare one scans up to the whole table inside the database
        (a few ms at 10,000 services), never loading a non-matching row into Python.
        """
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
        for word in (search or "").lower().split():
            query = query.where(_matches(word))
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


def _matches(word: str) -> Any:
    """`word` (lowercase) is a substring of the row's "namespace/name" or of the id of a
    cluster exporting its key. LIKE's wildcards are escaped, so the word is literal."""
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    pattern = f"%{escaped}%"
    key = func.lower(service_imports.c.namespace + literal("/") + service_imports.c.name)
    exporter = exists().where(
        exports.c.namespace == service_imports.c.namespace,
        exports.c.name == service_imports.c.name,
        func.lower(exports.c.cluster_id).like(pattern, escape="\\"),
    )
    return or_(key.like(pattern, escape="\\"), exporter)
