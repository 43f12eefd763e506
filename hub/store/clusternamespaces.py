"""The namespaces each cluster holds within its import scope, as its agent reports them
(docs/reference.md#scope-and-limits), for the importers view (`shared.importreach`).

An agent imports only into namespaces that exist in its cluster (namespace sameness,
docs/reference.md#import-path); the hub cannot see them, so each agent reports the names
it holds (exists, not being deleted, watched, not denied) whenever they change
(`PUT …/clusters/{c}/namespaces`, the whole list). Kept one row a name
(`cluster_namespaces`), indexed by namespace: the importers view of one Service asks
which clusters hold its namespace, one indexed read, however many namespaces the fleet
has. `namespace_reports` says which clusters have reported at all: of the others the hub
says `yes*`, as it cannot check.

A report writes only the difference from what is stored (an agent's first report after a
restart is usually equal: one read). Nothing else reads the names, so no history row and
no feed: a namespace's appearance changes no import, only what the hub says of it.

Lock order (`hub.store.locks`): the cluster's row (`hub.store.clusterrow`, as a
properties report locks it), then these rows; no key, no revision.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store.clusterrow import lock_reporting_cluster
from hub.store.context import StoreContext
from hub.store.tables import cluster_namespaces, clusters, namespace_reports
from shared.timefmt import utcnow

__all__ = ["ClusterNamespacesStore", "forget_namespaces"]

# Names a statement at most: SQLite's bound parameters are limited, and a report may hold
# 10,000 names (`shared.constants.CLUSTER_NAMESPACES_MAX`).
_CHUNK = 500


class ClusterNamespacesStore:
    """Stores each cluster's reported namespaces; answers who holds one."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx

    async def put(self, cluster: str, namespaces: Sequence[str]) -> bool:
        """Replace `cluster`'s reported namespaces (validated by the caller's model); True
        when the stored names changed or it is the cluster's first report. NotFound when
        the cluster is not registered."""
        wanted = set(namespaces)
        async with self._ctx.write() as conn:
            await lock_reporting_cluster(conn, self._ctx, cluster, clusters.c.name)
            held = set(
                (
                    await conn.execute(
                        select(cluster_namespaces.c.namespace).where(
                            cluster_namespaces.c.cluster_id == cluster
                        )
                    )
                ).scalars()
            )
            gone, new = sorted(held - wanted), sorted(wanted - held)
            for i in range(0, len(gone), _CHUNK):
                await conn.execute(
                    delete(cluster_namespaces).where(
                        cluster_namespaces.c.cluster_id == cluster,
                        cluster_namespaces.c.namespace.in_(gone[i : i + _CHUNK]),
                    )
                )
            for i in range(0, len(new), _CHUNK):
                await conn.execute(
                    insert(cluster_namespaces),
                    [{"cluster_id": cluster, "namespace": n} for n in new[i : i + _CHUNK]],
                )
            first = await _mark_reported(conn, cluster)
        return first or bool(gone or new)

    async def present(self, namespace: str) -> dict[str, bool]:
        """Per cluster that has reported: whether it holds `namespace`. A cluster left out
        has not reported (or is not registered)."""
        async with self._ctx.read() as conn:
            reported = (await conn.execute(select(namespace_reports.c.cluster_id))).scalars()
            answer = dict.fromkeys(reported, False)
            holding = (
                await conn.execute(
                    select(cluster_namespaces.c.cluster_id).where(
                        cluster_namespaces.c.namespace == namespace
                    )
                )
            ).scalars()
            for cluster in holding:
                if cluster in answer:
                    answer[cluster] = True
        return answer

    async def held(self, cluster: str) -> list[str] | None:
        """`cluster`'s reported namespaces, by name; None when it has not reported."""
        async with self._ctx.read() as conn:
            reported = (
                await conn.execute(
                    select(namespace_reports.c.cluster_id).where(
                        namespace_reports.c.cluster_id == cluster
                    )
                )
            ).first()
            if reported is None:
                return None
            names = (
                await conn.execute(
                    select(cluster_namespaces.c.namespace)
                    .where(cluster_namespaces.c.cluster_id == cluster)
                    .order_by(cluster_namespaces.c.namespace)
                )
            ).scalars()
            return list(names)


async def _mark_reported(conn: AsyncConnection, cluster: str) -> bool:
    """Record that `cluster` reported now; True when it is its first report."""
    now = utcnow()
    updated = await conn.execute(
        update(namespace_reports)
        .where(namespace_reports.c.cluster_id == cluster)
        .values(reported_at=now)
    )
    if updated.rowcount:
        return False
    await conn.execute(insert(namespace_reports).values(cluster_id=cluster, reported_at=now))
    return True


async def forget_namespaces(conn: AsyncConnection, cluster: str) -> None:
    """A deregistered cluster's reported namespaces go with its registration (in the
    transaction that deletes it)."""
    await conn.execute(delete(cluster_namespaces).where(cluster_namespaces.c.cluster_id == cluster))
    await conn.execute(delete(namespace_reports).where(namespace_reports.c.cluster_id == cluster))
