"""The row of a cluster that reports something of itself, locked for the report
(`hub.store.locks`: the cluster's row comes first in the lock order).

Its properties (`hub.store.clusterproperties`) and the namespaces it holds
(`hub.store.clusternamespaces`) are written under this lock: a deregistration marks the
row `deleting` under the same lock, so a report either lands before it (and is deleted
with the cluster) or finds the cluster gone (NotFound), never half of each.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Row, select
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store.context import StoreContext
from hub.store.errors import NotFound
from hub.store.tables import clusters

__all__ = ["lock_reporting_cluster"]


async def lock_reporting_cluster(
    conn: AsyncConnection, ctx: StoreContext, cluster: str, column: Column[Any]
) -> Row[Any]:
    """`column` of `cluster`'s row, locked; NotFound when the cluster is not registered
    (or is being deregistered)."""
    row = (
        await conn.execute(
            ctx.locks.exclusive(
                select(column).where(clusters.c.name == cluster, clusters.c.deleting.is_(False)),
                of=clusters,
            )
        )
    ).first()
    if row is None:
        raise NotFound(f"cluster {cluster!r} is not registered")
    return row
