"""`PUT /clusters/{cluster}/namespaces` (that member): every namespace the member's cluster
holds within its import scope, replacing what the hub had (docs/reference.md#rest-api,
docs/reference.md#scope-and-limits).

The agent sends it when the set changes (`member.imports.namespacesreport`); the hub keeps
it (`hub.store.clusternamespaces`) only to answer where a Service is imported
(`GET /serviceimports/{ns}/{name}/importers`, `shared.importreach`): "no (namespace
absent)" instead of `yes*`. More than `CLUSTER_NAMESPACES_MAX` names, or a name that is no
namespace's, is a 422 naming `namespaces`.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from hub.api.auth import MemberAccess
from hub.api.deps import StoreDep
from hub.api.jsonbody import StrictJsonRoute
from hub.api.params import ClusterPath
from hub.api.status import documented
from hub.logs import fields
from shared.constants import API_PREFIX
from shared.models import ClusterNamespacesReport, MemberCluster, to_wire

log = logging.getLogger("mcsync.hub.clusters")

router = APIRouter(prefix=API_PREFIX, tags=["clusters"], route_class=StrictJsonRoute)


@router.put(
    "/clusters/{cluster}/namespaces",
    response_model=MemberCluster,
    summary="Report every namespace the member's cluster holds within its import scope "
    "(replaces what the hub has)",
    responses=documented(401, 403, 404, 413, 422, 503),
)
async def put_namespaces(
    cluster: ClusterPath,
    report: ClusterNamespacesReport,
    _access: MemberAccess,
    store: StoreDep,
) -> Response:
    """At most 10,000 names, each a DNS-1123 label; more, or another name, is a 422 naming
    `namespaces`. An unchanged report writes only when it was received."""
    if await store.cluster_namespaces.put(cluster, report.namespaces):
        log.info(
            "cluster namespaces changed",
            extra=fields(cluster=cluster, namespaces=len(report.namespaces)),
        )
    return JSONResponse(to_wire(await store.clusters.get(cluster)))
