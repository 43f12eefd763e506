"""InternalServiceExport routes (docs/reference.md#rest-api): a member's exports, and the fleet-wide
list.

Each handler reads top to bottom: access rule (in the signature), path/body agreement,
one store call, one decision log line, the answer. The store judges conflicts inside its
own transaction, so a handler never computes a verdict; it only reports what the store
answered. A request refused here (401/403/413/422) never reaches the store, so nothing
stored changes on a rejected request.

Answers are rendered by `hub.api.wire` (camelCase, no nulls) — the same form the agent
sends — rather than FastAPI's response serialisation; the `response_model` declarations
still document them in OpenAPI.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import Response
from pydantic import ValidationError

from hub.api.admission import check_export
from hub.api.auth import (
    MemberAccess,
    MemberOrReaderAccess,
    ReaderAccess,
    bearer_token,
    member_refusal,
    principal_of,
)
from hub.api.deps import ContextDep, HubContext, StoreDep, context_of
from hub.api.fastpath import fast_path_route
from hub.api.gcpause import GcPausedJsonRoute
from hub.api.jsonbody import StrictJsonRequest, StrictJsonRoute
from hub.api.params import (
    ClusterPath,
    ClusterQuery,
    ListOptions,
    ListOptionsDep,
    NamePath,
    NamespacePath,
    WatchOptionsDep,
    list_meta,
    parse_revision,
    read_page,
    valid_path_labels,
)
from hub.api.status import ApiError, documented
from hub.api.sync import apply_sync
from hub.api.watch import WATCH_RESPONSE, ExportFeedSource, open_watch
from hub.api.watchpath import fast_watch
from hub.api.wire import wire
from hub.logs import fields
from hub.store import Store
from shared.conditions import CONFLICT
from shared.constants import API_PREFIX
from shared.models import (
    AnnotationPatch,
    InternalServiceExport,
    InternalServiceExportList,
    SyncResult,
)
from shared.timefmt import utcnow

log = logging.getLogger("mcsync.hub.exports")

router = APIRouter(prefix=API_PREFIX, tags=["serviceexports"], route_class=StrictJsonRoute)

ONE = "/clusters/{cluster}/serviceexports/{namespace}/{name}"
COLLECTION = "/clusters/{cluster}/serviceexports"
PATCH_CONTENT_TYPES = ("application/merge-patch+json", "application/json")


def _check_agreement(
    export: InternalServiceExport, *, cluster: str, namespace: str, name: str, prefix: str = ""
) -> None:
    """422 unless the body describes the export the path names."""
    ref = export.spec.service_reference
    if ref.cluster_id != cluster:
        raise ApiError.differs_from_path(
            f"{prefix}spec.serviceReference.clusterId", ref.cluster_id, "cluster", cluster
        )
    if ref.namespace != namespace:
        raise ApiError.differs_from_path(
            f"{prefix}spec.serviceReference.namespace", ref.namespace, "namespace", namespace
        )
    if export.metadata.name != name:
        raise ApiError.differs_from_path(
            f"{prefix}metadata.name", export.metadata.name, "name", name
        )


def _verdict(export: InternalServiceExport) -> str:
    condition = export.condition(CONFLICT)
    return f"{condition.status}/{condition.reason}" if condition else "none"


def _log_decision(
    message: str, export: InternalServiceExport, *, cluster: str, **extra: object
) -> None:
    namespace = export.metadata.namespace or export.spec.service_reference.namespace
    log.info(
        message,
        extra=fields(
            key=f"{namespace}/{export.metadata.name}",  # the agent's lines use the same key
            cluster=cluster,
            namespace=namespace,
            name=export.metadata.name,
            resourceVersion=export.metadata.resource_version,
            verdict=_verdict(export),
            **extra,
        ),
    )


async def _list(store: Store, *, cluster_id: str | None, options: ListOptions) -> Response:
    page = await read_page(
        store.exports.list(
            cluster_id=cluster_id,
            namespace=options.namespace,
            name=options.name,
            conflict=options.conflict,
            limit=options.limit,
            continue_token=options.continue_token,
        )
    )
    return wire(
        InternalServiceExportList(
            metadata=list_meta(page),
            items=page.items,
        )
    )


async def _put(
    ctx: HubContext,
    store: Store,
    export: InternalServiceExport,
    *,
    cluster: str,
    namespace: str,
    name: str,
) -> Response:
    _check_agreement(export, cluster=cluster, namespace=namespace, name=name)
    check_export(ctx.settings.deny_export_namespace, export, now=utcnow())
    result = await store.exports.put(cluster, export)
    outcome = "created" if result.created else "replaced" if result.changed else "unchanged"
    ctx.metrics.export_writes.labels(outcome).inc()
    _log_decision(f"export {outcome}", result.object, cluster=cluster)
    return wire(result.object, status_code=201 if result.created else 200)


_PUT_PATH_NAMES = ("cluster", "namespace", "name")


async def put_export_fast(request: StrictJsonRequest) -> Response | None:
    """`put_export` for a request entirely in order, without FastAPI's dependency solving
    (`hub.api.fastpath`); None for anything else, which `put_export` then answers."""
    params = request.path_params
    if not valid_path_labels(params, _PUT_PATH_NAMES):
        return None
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        return None
    ctx = context_of(request.app)
    store = ctx.store
    token = bearer_token(request)
    if store is None or token is None:
        return None
    body = await request.body()
    try:
        # One pass from bytes to model. pydantic's JSON parser refuses what
        # `hub.api.jsonbody` refuses (lone surrogates, bytes that are not UTF-8, NaN) and
        # keeps long integers exact, so every field sees what `strict_loads` would give.
        export = InternalServiceExport.model_validate_json(body)
    except ValidationError:
        return None
    principal = await principal_of(ctx, store, token)
    cluster = params["cluster"]
    if principal is None or member_refusal(principal, cluster) is not None:
        return None
    return await _put(
        ctx, store, export, cluster=cluster, namespace=params["namespace"], name=params["name"]
    )


async def put_export(
    cluster: ClusterPath,
    namespace: NamespacePath,
    name: NamePath,
    export: InternalServiceExport,
    _access: MemberAccess,
    store: StoreDep,
    ctx: ContextDep,
) -> Response:
    """200 when replaced or unchanged, 201 when created; answers the stored object with
    its verdict. 404 when the cluster is not registered."""
    return await _put(ctx, store, export, cluster=cluster, namespace=namespace, name=name)


# Registered without the decorator only to give it its own route class: a request in
# order is answered by `put_export_fast`, anything else by `put_export` (`hub.api.fastpath`).
router.add_api_route(
    ONE,
    put_export,
    methods=["PUT"],
    response_model=InternalServiceExport,
    summary="Create or replace one export (idempotent)",
    responses={
        201: {"model": InternalServiceExport, "description": "created"},
        **documented(401, 403, 404, 413, 422, 503),
    },
    route_class_override=fast_path_route(put_export_fast),
)


@router.get(
    ONE,
    response_model=InternalServiceExport,
    summary="Read one export",
    responses=documented(401, 403, 404, 422, 503),
)
async def get_export(
    cluster: ClusterPath,
    namespace: NamespacePath,
    name: NamePath,
    _access: MemberOrReaderAccess,
    store: StoreDep,
) -> Response:
    return wire(await store.exports.get(cluster, namespace, name))


@router.delete(
    ONE,
    response_model=InternalServiceExport,
    summary="Withdraw one export; answers its last state",
    responses=documented(401, 403, 404, 422, 503),
)
async def delete_export(
    cluster: ClusterPath,
    namespace: NamespacePath,
    name: NamePath,
    _access: MemberAccess,
    store: StoreDep,
    ctx: ContextDep,
) -> Response:
    last = await store.exports.delete(cluster, namespace, name)
    ctx.metrics.export_writes.labels("withdrawn").inc()
    _log_decision("export withdrawn", last, cluster=cluster)
    return wire(last)


async def require_patch_content_type(request: Request) -> None:
    """415 unless the body is a JSON merge patch (or plain JSON)."""
    raw = request.headers.get("content-type", "")
    media_type = raw.split(";", 1)[0].strip().lower()
    if media_type not in PATCH_CONTENT_TYPES:
        raise ApiError(
            415,
            f"PATCH takes {' or '.join(PATCH_CONTENT_TYPES)}, "
            f"not {media_type or 'no content type'}",
        )


@router.patch(
    ONE,
    response_model=InternalServiceExport,
    summary="Merge-patch metadata.annotations under a resourceVersion precondition",
    responses=documented(401, 403, 404, 409, 413, 415, 422, 503),
    dependencies=[Depends(require_patch_content_type)],
    openapi_extra={
        "requestBody": {
            "content": {
                t: {"schema": {"$ref": "#/components/schemas/AnnotationPatch"}}
                for t in PATCH_CONTENT_TYPES
            },
            "required": True,
        }
    },
)
async def patch_export(
    cluster: ClusterPath,
    namespace: NamespacePath,
    name: NamePath,
    patch: Annotated[AnnotationPatch, Body()],
    _access: MemberAccess,
    store: StoreDep,
    ctx: ContextDep,
) -> Response:
    """409 when `metadata.resourceVersion` is not the stored one (nothing is written); a
    null annotation value removes the key. A resourceVersion that is no revision at all
    (`abc`, `-1`) is the client's mistake, not a lost race: 422."""
    parse_revision("metadata.resourceVersion", patch.metadata.resource_version)
    patched = await store.exports.patch_annotations(
        cluster,
        namespace,
        name,
        resource_version=patch.metadata.resource_version,
        annotations=patch.metadata.annotations,
    )
    ctx.metrics.export_writes.labels("annotated").inc()
    _log_decision(
        "export annotations patched",
        patched,
        cluster=cluster,
        keys=",".join(sorted(patch.metadata.annotations)),
    )
    return wire(patched)


async def list_cluster_exports_fast(request: StrictJsonRequest) -> Response | None:
    """An agent's export watch open, entirely in order, without FastAPI's dependency
    solving (`hub.api.watchpath`); None for anything else, which `list_cluster_exports`
    answers."""
    fast = await fast_watch(request)
    if fast is None:
        return None
    return await open_watch(
        source=ExportFeedSource(fast.store.feed, fast.cluster),
        ctx=fast.ctx,
        options=fast.options,
        principal=fast.principal,
    )


async def list_cluster_exports(
    cluster: ClusterPath,
    access: MemberOrReaderAccess,
    options: ListOptionsDep,
    watch: WatchOptionsDep,
    store: StoreDep,
    ctx: ContextDep,
) -> Response:
    if watch.watch:
        return await open_watch(
            source=ExportFeedSource(store.feed, cluster),
            ctx=ctx,
            options=watch,
            principal=access,
        )
    return await _list(store, cluster_id=cluster, options=options)


# Registered without the decorator only to give it its own route class: an agent's watch
# open in order is answered by `list_cluster_exports_fast`, anything else by
# `list_cluster_exports` (`hub.api.fastpath`).
router.add_api_route(
    COLLECTION,
    list_cluster_exports,
    methods=["GET"],
    response_model=InternalServiceExportList,
    summary="List one cluster's exports, or watch them (watch=true)",
    responses={200: WATCH_RESPONSE, **documented(401, 403, 410, 422, 429, 503, 504)},
    route_class_override=fast_path_route(list_cluster_exports_fast),
)


async def sync_cluster_exports(
    cluster: ClusterPath,
    exports: InternalServiceExportList,
    _access: MemberAccess,
    store: StoreDep,
    ctx: ContextDep,
) -> Response:
    now = utcnow()
    for index, export in enumerate(exports.items):
        ref = export.spec.service_reference
        _check_agreement(
            export,
            cluster=cluster,
            namespace=ref.namespace,
            name=ref.name,
            prefix=f"items[{index}].",
        )
        check_export(ctx.settings.deny_export_namespace, export, now=now, prefix=f"items[{index}].")
    result = await apply_sync(
        log, "exports synced", cluster, store.exports.sync(cluster, exports.items)
    )
    for outcome, count in (
        ("created", result.created),
        ("replaced", result.updated),
        ("unchanged", result.unchanged),
        ("withdrawn", result.withdrawn),
    ):
        if count:
            ctx.metrics.export_writes.labels(outcome).inc(count)
    return wire(result)


# Registered without the decorator only to give it its own route class: the whole request
# runs with the cyclic garbage collector paused (see `hub.api.gcpause`).
router.add_api_route(
    COLLECTION,
    sync_cluster_exports,
    methods=["PUT"],
    response_model=SyncResult,
    summary="Full-state sync: upsert the given exports, withdraw the cluster's others",
    description=(
        "One sync of a cluster at a time. A sync that would withdraw more than half of at "
        "least 10 stored exports is held (409, the cluster carries `WithdrawalHeld`) until "
        "an admin allows it once (`POST /api/v1/clusters/{cluster}/allow-withdrawal`); see "
        "docs/reference.md#failover."
    ),
    responses=documented(401, 403, 404, 409, 413, 422, 503),
    route_class_override=GcPausedJsonRoute,
)


@router.get(
    "/serviceexports",
    response_model=InternalServiceExportList,
    summary="List every export of the fleet, or watch them all (watch=true)",
    responses={200: WATCH_RESPONSE, **documented(401, 403, 410, 422, 429, 503, 504)},
)
async def list_all_exports(
    access: ReaderAccess,
    options: ListOptionsDep,
    watch: WatchOptionsDep,
    store: StoreDep,
    ctx: ContextDep,
    cluster: ClusterQuery = None,
) -> Response:
    if watch.watch:
        return await open_watch(
            source=ExportFeedSource(store.feed, cluster),
            ctx=ctx,
            options=watch,
            principal=access,
        )
    return await _list(store, cluster_id=cluster, options=options)
