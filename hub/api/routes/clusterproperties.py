"""Cluster-property routes (docs/reference.md#cluster-properties): a member reports its
cluster's ClusterProperty objects, and reads the whole fleet's.

* `PUT /clusters/{cluster}/properties` (that member): every ClusterProperty of its cluster
  at once, replacing what the hub had; answers the MemberCluster. The agent sends it only
  when its properties changed, and an unchanged report writes nothing.
* `GET /clusters/{cluster}/fleetproperties` (that member, reader): every cluster's
  reported properties, a list and then, with `watch=true`, a watch of their changes
  (ADDED / MODIFIED / DELETED `ClusterProperties` objects), with the same list-then-watch,
  relist-on-410 protocol as the import feed. The importing agent's cluster selection
  reads it (`member.imports.propertiesfeed`). A feed of its own rather than a kind inside the
  import feed: docs/decisions.md says why.

Both are per-cluster paths so that a member token reads them as it reads its imports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from hub.api.auth import MemberAccess, MemberOrReaderAccess
from hub.api.deps import ContextDep, StoreDep
from hub.api.jsonbody import StrictJsonRoute
from hub.api.params import ClusterPath, WatchOptionsDep
from hub.api.status import documented
from hub.api.watch import WATCH_RESPONSE, open_watch
from hub.logs import fields
from hub.store.clusterproperties import ClusterPropertiesStore
from hub.store.fanout import BufferLimits, Subscription
from shared.constants import API_PREFIX
from shared.models import (
    ClusterPropertiesList,
    ClusterPropertiesReport,
    ListMeta,
    MemberCluster,
    WatchEvent,
    to_wire,
)

log = logging.getLogger("mcsync.hub.clusters")

router = APIRouter(prefix=API_PREFIX, tags=["clusters"], route_class=StrictJsonRoute)


@dataclass(frozen=True)
class PropertiesFeedSource:
    """The fleet's cluster-properties changes as a `hub.api.watch.WatchSource`."""

    store: ClusterPropertiesStore

    @property
    def label(self) -> str:
        return "properties"

    async def current_revision(self) -> int:
        return await self.store.current_revision()

    async def changes_since(self, revision: int, limit: int) -> list[WatchEvent]:
        return await self.store.changes_since(revision=revision, limit=limit)

    def subscribe(self, *, limits: BufferLimits, on_overflow: Callable[[], object]) -> Subscription:
        return self.store.subscribe(limits=limits, on_overflow=on_overflow)


@router.put(
    "/clusters/{cluster}/properties",
    response_model=MemberCluster,
    summary="Report every ClusterProperty of the member's cluster (replaces what the hub has)",
    responses=documented(401, 403, 404, 413, 422, 503),
)
async def put_properties(
    cluster: ClusterPath,
    report: ClusterPropertiesReport,
    _access: MemberAccess,
    store: StoreDep,
) -> Response:
    """At most 64 properties, names DNS subdomains, values of 1 to 1024 characters; more
    or longer is a 422 naming `properties`. An unchanged report writes nothing."""
    changed = await store.cluster_properties.put(cluster, report.properties)
    if changed:
        log.info(
            "cluster properties changed",
            extra=fields(cluster=cluster, properties=len(report.properties)),
        )
    return JSONResponse(to_wire(await store.clusters.get(cluster)))


@router.get(
    "/clusters/{cluster}/fleetproperties",
    response_model=ClusterPropertiesList,
    summary="Every cluster's reported properties, or watch their changes (watch=true)",
    responses={200: WATCH_RESPONSE, **documented(401, 403, 410, 422, 429, 503, 504)},
)
async def fleet_properties(
    cluster: ClusterPath,
    access: MemberOrReaderAccess,
    watch: WatchOptionsDep,
    store: StoreDep,
    ctx: ContextDep,
) -> Response:
    """`metadata.resourceVersion` is the revision to watch from. A cluster that never
    reported is not listed; a deregistered one's properties are DELETED."""
    if watch.watch:
        source = PropertiesFeedSource(store.cluster_properties)
        return await open_watch(source=source, ctx=ctx, options=watch, principal=access)
    items, revision = await store.cluster_properties.list_all()
    answer = ClusterPropertiesList(metadata=ListMeta(resource_version=revision), items=items)
    return JSONResponse(to_wire(answer))
