"""The fleet's invalid ServiceExports, as each cluster's agent last reported them
(docs/reference.md#flags).

An invalid ServiceExport is never exported, so the hub learns of it only from the agent's
heartbeat (`member.export.invalidexports` says why that way). The report is kept whole, as one
JSON value on the cluster's row (`clusters.invalid_exports`): it is replaced by each beat
that carries one, goes with the cluster when it is deregistered, and takes no part in
conflicts or imports. Reading them is a reader's diagnostic (`mcsync exports --invalid`):
one query over the clusters that reported any, filtered by cluster in SQL and by
namespace here (a cluster lists at most `INVALID_EXPORTS_MAX`).
"""

from __future__ import annotations

import json

from sqlalchemy import select

from hub.store import codec
from hub.store.context import StoreContext
from hub.store.tables import clusters
from shared.models import (
    InvalidExports,
    InvalidServiceExport,
    InvalidServiceExportList,
    to_wire,
)


def stored_report(report: InvalidExports) -> str:
    """What `clusters.invalid_exports` holds for `report`."""
    return codec.canonical_json(to_wire(report))


def invalid_total(stored: str | None) -> int:
    """How many invalid ServiceExports a stored report counts (listed or not)."""
    if not stored:
        return 0
    total = json.loads(stored).get("total", 0)
    return total if isinstance(total, int) else 0


class InvalidExportStore:
    """Reads of the reported invalid ServiceExports; the heartbeat writes them."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx

    async def list(
        self, *, cluster_id: str | None = None, namespace: str | None = None
    ) -> InvalidServiceExportList:
        """Every reported invalid ServiceExport, by cluster, namespace and name."""
        query = (
            select(clusters.c.name, clusters.c.invalid_exports)
            .where(clusters.c.invalid_exports.is_not(None))
            .order_by(clusters.c.name)
        )
        if cluster_id is not None:
            query = query.where(clusters.c.name == cluster_id)
        async with self._ctx.read() as conn:
            rows = (await conn.execute(query)).all()
        answer = InvalidServiceExportList()
        for name, text in rows:
            report = InvalidExports.model_validate_json(text)
            if report.total > len(report.items):
                answer.truncated[name] = report.total
            answer.items.extend(
                InvalidServiceExport(
                    cluster=name,
                    namespace=item.namespace,
                    name=item.name,
                    reason=item.reason,
                    message=item.message,
                )
                for item in report.items
                if namespace is None or item.namespace == namespace
            )
        return answer
