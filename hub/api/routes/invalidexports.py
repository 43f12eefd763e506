"""`GET /api/v1/invalidexports`: ServiceExports that are `Valid=False` in their cluster.

Why a ServiceExport is not exported is known only in its cluster; each agent reports its
invalid ones in its heartbeat (docs/reference.md#cli, `mcsync exports --invalid`), so that an
operator asks the hub once instead of every cluster. What a cluster reports may be up to one
heartbeat interval old.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from hub.api.auth import ReaderAccess
from hub.api.deps import StoreDep
from hub.api.params import ClusterQuery, NamespaceQuery
from hub.api.status import documented
from hub.api.wire import wire
from shared.constants import API_PREFIX
from shared.models import InvalidServiceExportList

router = APIRouter(prefix=API_PREFIX, tags=["serviceexports"])


@router.get(
    "/invalidexports",
    response_model=InvalidServiceExportList,
    summary="ServiceExports that are Valid=False in their cluster, with the reason",
    responses=documented(401, 403, 422, 503),
)
async def list_invalid_exports(
    _access: ReaderAccess,
    store: StoreDep,
    namespace: NamespaceQuery = None,
    cluster: ClusterQuery = None,
) -> Response:
    answer = await store.invalid_exports.list(cluster_id=cluster, namespace=namespace)
    return wire(answer)
