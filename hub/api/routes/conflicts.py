"""`GET /api/v1/conflicts`: which exports of the fleet disagree with their key's decided
values, on which property, with both values and the winner that decided them.

`GET /api/v1/serviceexports?conflict=true` answers whole exports by their stored verdict;
this answers the question a fleet operator asks next — "which clusters run another `type`
than the service's winner, and what do they run?" — in one SQL query over the stored
decided-property columns (`hub.store.conflictquery`), paged like every list. Only the
properties the winner decides are listed (docs/reference.md#conflicts); ports and IP families are
merged, and their conflicts are read from each export's `Conflict` condition.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from hub.api.auth import ReaderAccess
from hub.api.deps import StoreDep
from hub.api.params import (
    ClusterQuery,
    ContinueQuery,
    LimitQuery,
    NameQuery,
    NamespaceQuery,
    list_meta,
    read_page,
)
from hub.api.status import documented
from hub.api.wire import wire
from shared.constants import API_PREFIX
from shared.models import ExportConflictList

router = APIRouter(prefix=API_PREFIX, tags=["serviceexports"])


@router.get(
    "/conflicts",
    response_model=ExportConflictList,
    summary="Exports that differ from their key's winner on a decided property, and how",
    responses=documented(401, 403, 422, 503),
)
async def list_conflicts(
    _access: ReaderAccess,
    store: StoreDep,
    namespace: NamespaceQuery = None,
    name: NameQuery = None,
    cluster: ClusterQuery = None,
    limit: LimitQuery = None,
    continue_: ContinueQuery = None,
) -> Response:
    page = await read_page(
        store.conflicts.list(
            namespace=namespace,
            name=name,
            cluster_id=cluster,
            limit=limit,
            continue_token=continue_,
        )
    )
    return wire(ExportConflictList(metadata=list_meta(page), items=page.items))
