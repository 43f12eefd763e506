"""`POST /api/v1/clusters/{cluster}/token`: rotate a member cluster's token
(docs/reference.md#credentials).

The answer is the cluster with its new token, shown this once (as at registration), and
`previousTokenExpires`: until then the replaced token keeps working, so the agent goes
on unrefused while its Secret is updated. The hub retires the old token earlier, as
soon as the agent first presents the new one. The grace period is the hub's
`--token-grace-seconds`, the same for every cluster, so that an admin cannot leave an old
token valid for ever by mistake.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from hub.api.auth import AdminAccess
from hub.api.deps import SettingsDep, StoreDep
from hub.api.jsonbody import StrictJsonRoute
from hub.api.params import ClusterPath
from hub.api.status import documented
from hub.logs import fields
from shared.constants import API_PREFIX
from shared.models import RotatedMemberCluster, to_wire

log = logging.getLogger("mcsync.hub.tokens")

router = APIRouter(prefix=API_PREFIX, tags=["clusters"], route_class=StrictJsonRoute)


@router.post(
    "/clusters/{cluster}/token",
    response_model=RotatedMemberCluster,
    summary="Issue a new member token; the old one works until previousTokenExpires",
    responses=documented(401, 403, 404, 422, 503),
)
async def rotate_token(
    cluster: ClusterPath, _access: AdminAccess, store: StoreDep, settings: SettingsDep
) -> Response:
    token, expires = await store.clusters.rotate_token(
        cluster, grace=timedelta(seconds=settings.token_grace_seconds)
    )
    record = await store.clusters.get(cluster)
    log.warning(
        "member token rotated",
        extra=fields(cluster=cluster, previous_token_expires=expires),
    )
    answer = RotatedMemberCluster(
        **record.model_dump(), token=token, previous_token_expires=expires
    )
    return JSONResponse(to_wire(answer))
