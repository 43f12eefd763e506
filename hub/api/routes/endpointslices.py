"""EndpointSliceExport routes (docs/reference.md#import-path, #rest-api): a member's slices, and the
fleet-wide list.

Access is the exports': a member token writes only under its own
`/api/v1/clusters/{cluster}/…`, readers (and that member) read. Each handler reads top to
bottom: access rule (in the signature), path/body agreement, one store call, one decision
log line, the answer. A slice for a Service its cluster does not export is the store's
`Conflict` (409, saying so); a request refused here (401/403/413/422) never reaches the
store, so nothing stored changes on a rejected request.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from hub.api.admission import check_namespace
from hub.api.auth import MemberAccess, MemberOrReaderAccess, ReaderAccess
from hub.api.deps import SettingsDep, StoreDep
from hub.api.gcpause import GcPausedJsonRoute
from hub.api.jsonbody import StrictJsonRoute
from hub.api.params import (
    ClusterPath,
    ClusterQuery,
    ContinueQuery,
    LimitQuery,
    NamespacePath,
    NamespaceQuery,
    list_meta,
    read_page,
)
from hub.api.status import ApiError, documented
from hub.api.sync import apply_sync
from hub.api.wire import wire
from hub.logs import fields
from hub.store import Store
from shared.constants import API_PREFIX
from shared.models import (
    DNS1035_LABEL_RE,
    DNS1123_SUBDOMAIN_RE,
    EndpointSliceExport,
    EndpointSliceExportList,
    SyncResult,
)

log = logging.getLogger("mcsync.hub.endpointslices")

router = APIRouter(prefix=API_PREFIX, tags=["endpointslices"], route_class=StrictJsonRoute)

ONE = "/clusters/{cluster}/endpointslices/{namespace}/{slice}"
COLLECTION = "/clusters/{cluster}/endpointslices"

SlicePath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=253,
        pattern=DNS1123_SUBDOMAIN_RE.pattern,
        description="name of the source cluster's EndpointSlice (DNS-1123 subdomain)",
    ),
]


def _check_agreement(
    item: EndpointSliceExport,
    *,
    cluster: str,
    namespace: str | None,
    name: str | None,
    prefix: str = "",
) -> None:
    """422 unless the body describes the slice the path names (None: the path names none)."""
    if name is not None and item.metadata.name != name:
        raise ApiError.differs_from_path(
            f"{prefix}metadata.name", item.metadata.name, "slice name", name
        )
    if item.metadata.namespace is None:
        if namespace is None:
            raise ApiError.invalid(f"{prefix}metadata.namespace", "is required")
        item.metadata.namespace = namespace
    elif namespace is not None and item.metadata.namespace != namespace:
        raise ApiError.differs_from_path(
            f"{prefix}metadata.namespace", item.metadata.namespace, "namespace", namespace
        )
    if item.spec.cluster_id not in (None, cluster):
        raise ApiError.differs_from_path(
            f"{prefix}spec.clusterId", item.spec.cluster_id, "cluster", cluster
        )


def _log_decision(message: str, item: EndpointSliceExport, *, cluster: str) -> None:
    namespace = item.metadata.namespace or ""
    log.info(
        message,
        extra=fields(
            key=f"{namespace}/{item.spec.service_name}",
            cluster=cluster,
            namespace=namespace,
            name=item.metadata.name,
            service=item.spec.service_name,
            resourceVersion=item.metadata.resource_version,
            endpoints=len(item.spec.endpoints),
        ),
    )


@router.put(
    ONE,
    response_model=EndpointSliceExport,
    summary="Create or replace one EndpointSliceExport (idempotent)",
    responses={
        201: {"model": EndpointSliceExport, "description": "created"},
        **documented(401, 403, 404, 409, 413, 422, 503),
    },
)
async def put_slice(
    cluster: ClusterPath,
    namespace: NamespacePath,
    slice: SlicePath,
    body: EndpointSliceExport,
    _access: MemberAccess,
    store: StoreDep,
    settings: SettingsDep,
) -> Response:
    """200 when replaced or unchanged, 201 when created. 404 when the cluster is not
    registered; 409 when the cluster does not export the slice's Service; 403 outside
    the cluster's scope or past its quota (docs/reference.md#scope-and-limits)."""
    _check_agreement(body, cluster=cluster, namespace=namespace, name=slice)
    check_namespace(
        settings.deny_export_namespace, namespace, what=f"EndpointSliceExport {slice!r}"
    )
    try:
        result = await store.endpointslices.put(cluster, body)
    except ValueError as exc:  # pragma: no cover - _check_agreement refuses it first
        raise ApiError.invalid("spec.clusterId", str(exc)) from None
    outcome = "created" if result.created else "replaced" if result.changed else "unchanged"
    _log_decision(f"endpointslice {outcome}", result.object, cluster=cluster)
    return wire(result.object, status_code=201 if result.created else 200)


@router.get(
    ONE,
    response_model=EndpointSliceExport,
    summary="Read one EndpointSliceExport, as its source cluster sent it",
    responses=documented(401, 403, 404, 422, 503),
)
async def get_slice(
    cluster: ClusterPath,
    namespace: NamespacePath,
    slice: SlicePath,
    _access: MemberOrReaderAccess,
    store: StoreDep,
) -> Response:
    return wire(await store.endpointslices.get(cluster, namespace, slice))


@router.delete(
    ONE,
    response_model=EndpointSliceExport,
    summary="Withdraw one EndpointSliceExport; answers its last state",
    responses=documented(401, 403, 404, 422, 503),
)
async def delete_slice(
    cluster: ClusterPath,
    namespace: NamespacePath,
    slice: SlicePath,
    _access: MemberAccess,
    store: StoreDep,
) -> Response:
    last = await store.endpointslices.delete(cluster, namespace, slice)
    _log_decision("endpointslice withdrawn", last, cluster=cluster)
    return wire(last)


async def sync_cluster_slices(
    cluster: ClusterPath,
    body: EndpointSliceExportList,
    _access: MemberAccess,
    store: StoreDep,
    settings: SettingsDep,
) -> Response:
    for index, item in enumerate(body.items):
        _check_agreement(
            item, cluster=cluster, namespace=None, name=None, prefix=f"items[{index}]."
        )
        check_namespace(
            settings.deny_export_namespace,
            item.metadata.namespace or "",
            what=f"EndpointSliceExport {item.metadata.name!r}",
        )
    result = await apply_sync(
        log, "endpointslices synced", cluster, store.endpointslices.sync(cluster, body.items)
    )
    return wire(result)


# As the export sync: its own route class, so the request runs with the cyclic garbage
# collector paused (`hub.api.gcpause`).
router.add_api_route(
    COLLECTION,
    sync_cluster_slices,
    methods=["PUT"],
    response_model=SyncResult,
    summary="Full-state sync: upsert the given EndpointSliceExports, withdraw the cluster's others",
    responses=documented(401, 403, 404, 409, 413, 422, 503),
    route_class_override=GcPausedJsonRoute,
)


ServiceQuery = Annotated[
    str | None,
    Query(max_length=63, pattern=DNS1035_LABEL_RE.pattern, description="only this Service"),
]


async def _list(
    store: Store,
    *,
    cluster: str | None,
    namespace: str | None,
    name: str | None,
    limit: int | None,
    continue_: str | None,
) -> Response:
    page = await read_page(
        store.endpointslices.list(
            cluster_id=cluster,
            namespace=namespace,
            service_name=name,
            limit=limit,
            continue_token=continue_,
        )
    )
    return wire(
        EndpointSliceExportList(
            metadata=list_meta(page),
            items=page.items,
        )
    )


@router.get(
    COLLECTION,
    response_model=EndpointSliceExportList,
    summary="List one cluster's EndpointSliceExports (its agent's relist)",
    responses=documented(401, 403, 422, 503),
)
async def list_cluster_slices(
    cluster: ClusterPath,
    _access: MemberOrReaderAccess,
    store: StoreDep,
    namespace: NamespaceQuery = None,
    name: ServiceQuery = None,
    limit: LimitQuery = None,
    continue_: ContinueQuery = None,
) -> Response:
    return await _list(
        store, cluster=cluster, namespace=namespace, name=name, limit=limit, continue_=continue_
    )


@router.get(
    "/endpointslices",
    response_model=EndpointSliceExportList,
    summary="Every EndpointSliceExport of the fleet, as the source clusters sent them",
    responses=documented(401, 403, 422, 503),
)
async def list_slices(
    _access: ReaderAccess,
    store: StoreDep,
    namespace: NamespaceQuery = None,
    name: ServiceQuery = None,
    cluster: ClusterQuery = None,
    limit: LimitQuery = None,
    continue_: ContinueQuery = None,
) -> Response:
    return await _list(
        store, cluster=cluster, namespace=namespace, name=name, limit=limit, continue_=continue_
    )
