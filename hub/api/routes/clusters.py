"""MemberCluster routes (docs/reference.md#rest-api): registration, listing, deregistration,
heartbeats.

Registration is the only moment a member token exists in clear: the store keeps its hash
and the answer carries it once, as the top-level `token` of a RegisteredMemberCluster.
The heartbeat answers the hub's version and `minAgentVersion`, which is how an agent
learns it is too old to export (docs/reference.md#failover); the hub only logs the mismatch, the
agent acts.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Body, Depends
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter, ValidationError

from hub.api.auth import (
    AdminAccess,
    MemberAccess,
    MemberOrReaderAccess,
    ReaderAccess,
    bearer_token,
)
from hub.api.deps import SettingsDep, StoreDep, context_of
from hub.api.fastpath import fast_path_route
from hub.api.jsonbody import StrictJsonRequest, StrictJsonRoute
from hub.api.params import ClusterPath, valid_path_labels
from hub.api.routes.exports import PATCH_CONTENT_TYPES, require_patch_content_type
from hub.api.status import documented
from hub.logs import fields
from hub.settings import HubSettings
from hub.store.heartbeats import HeartbeatOutcome
from shared.constants import API_PREFIX, CLUSTER_READY
from shared.models import (
    Heartbeat,
    HeartbeatResponse,
    MemberCluster,
    MemberClusterList,
    MemberClusterPatch,
    RegisteredMemberCluster,
    Timestamp,
    to_wire,
)
from shared.timefmt import utcnow
from shared.version import __version__, is_older

log = logging.getLogger("mcsync.hub.clusters")

router = APIRouter(prefix=API_PREFIX, tags=["clusters"], route_class=StrictJsonRoute)


@router.post(
    "/clusters",
    status_code=201,
    response_model=RegisteredMemberCluster,
    summary="Register a member cluster; the answer shows its token, once",
    responses=documented(401, 403, 409, 413, 422, 503),
)
async def register_cluster(
    cluster: MemberCluster, _access: AdminAccess, store: StoreDep
) -> Response:
    name = cluster.metadata.name
    registered, token = await store.clusters.register(
        name, cluster.metadata.labels or {}, cluster.spec
    )
    log.info("cluster registered", extra=fields(cluster=name))
    answer = RegisteredMemberCluster(**registered.model_dump(), token=token)
    return JSONResponse(to_wire(answer), status_code=201)


@router.patch(
    "/clusters/{cluster}",
    response_model=MemberCluster,
    summary="Merge-patch a cluster's metadata.labels and spec (its namespace scope)",
    responses=documented(401, 403, 404, 413, 415, 422, 503),
    dependencies=[Depends(require_patch_content_type)],
    openapi_extra={
        "requestBody": {
            "content": {
                t: {"schema": {"$ref": "#/components/schemas/MemberClusterPatch"}}
                for t in PATCH_CONTENT_TYPES
            },
            "required": True,
        }
    },
)
async def patch_cluster(
    cluster: ClusterPath,
    patch: Annotated[MemberClusterPatch, Body()],
    _access: AdminAccess,
    store: StoreDep,
) -> Response:
    """JSON merge patch (docs/reference.md#rest-api, #scope-and-limits): a label set to null is
    removed; a spec field set to null becomes absent (every namespace); fields left out are kept.
    The new scope holds for the cluster's next write and its next import list or watch."""
    spec = (
        {name: getattr(patch.spec, name) for name in patch.spec.model_fields_set}
        if patch.spec is not None
        else None
    )
    labels = patch.metadata.labels if patch.metadata is not None else None
    patched = await store.clusters.patch(cluster, labels=labels, spec=spec)
    log.info(
        "cluster patched",
        extra=fields(
            cluster=cluster,
            exportNamespaces=patched.spec.export_namespaces,
            importNamespaces=patched.spec.import_namespaces,
        ),
    )
    return JSONResponse(to_wire(patched))


@router.get(
    "/clusters",
    response_model=MemberClusterList,
    summary="Every registered cluster with its state, last heartbeat and export counts",
    responses=documented(401, 403, 503),
)
async def list_clusters(_access: ReaderAccess, store: StoreDep) -> Response:
    return JSONResponse(to_wire(MemberClusterList(items=await store.clusters.list())))


@router.get(
    "/clusters/{cluster}",
    response_model=MemberCluster,
    summary="One cluster (its own member token may read it too)",
    responses=documented(401, 403, 404, 422, 503),
)
async def get_cluster(
    cluster: ClusterPath, _access: MemberOrReaderAccess, store: StoreDep
) -> Response:
    return JSONResponse(to_wire(await store.clusters.get(cluster)))


@router.delete(
    "/clusters/{cluster}",
    response_model=MemberCluster,
    summary="Deregister a cluster, withdrawing all its exports",
    responses=documented(401, 403, 404, 422, 503),
)
async def delete_cluster(cluster: ClusterPath, _access: AdminAccess, store: StoreDep) -> Response:
    last = await store.clusters.delete(cluster)
    log.info(
        "cluster deregistered; its exports are withdrawn",
        extra=fields(cluster=cluster, exports=last.status.export_count),
    )
    return JSONResponse(to_wire(last))


_TIMESTAMP: TypeAdapter[Any] = TypeAdapter(Timestamp)


@lru_cache(maxsize=64)
def too_old(agent_version: str, min_agent_version: str) -> bool:
    """Whether an agent of `agent_version` is older than the hub's minimum (an unparseable
    version cannot be shown to be new enough). Cached: a fleet runs a handful of versions."""
    try:
        return is_older(agent_version, min_agent_version)
    except ValueError:
        return True


@lru_cache(maxsize=8)
def _answer_template(
    min_agent_version: str, cluster_ttl: float, clusterset_name: str | None
) -> dict[str, Any]:
    """The heartbeat answer as `to_wire` gives it, but for its time and allowance."""
    return to_wire(
        HeartbeatResponse(
            hub_version=__version__,
            min_agent_version=min_agent_version,
            server_time=utcnow(),
            state=CLUSTER_READY,  # as of the heartbeat just recorded
            clusterset_name=clusterset_name,
            cluster_ttl_seconds=cluster_ttl,
        )
    )


def heartbeat_response(settings: HubSettings, *, withdrawal_allowed: bool) -> Response:
    """The `HeartbeatResponse` of a recorded beat, encoded without building the model each
    time (every member beats several times per TTL)."""
    answer = dict(
        _answer_template(settings.min_agent_version, settings.cluster_ttl, settings.clusterset_name)
    )
    answer["serverTime"] = _TIMESTAMP.dump_python(utcnow(), mode="json")
    answer["withdrawalAllowed"] = withdrawal_allowed
    return Response(orjson.dumps(answer), media_type="application/json")


def _heartbeat_answer(
    cluster: str, beat: Heartbeat, outcome: HeartbeatOutcome, settings: HubSettings
) -> Response:
    """Log what the recorded beat changed, and answer it (both routes of the heartbeat)."""
    if outcome.given_back:
        log.info(
            "Stale cluster is back: its endpoints return to the import feed",
            extra=fields(cluster=cluster, exports=outcome.given_back),
        )
    if outcome.withdrawal_allowed:
        log.warning(
            "handing the agent the admin's allowance: its held mass withdrawal goes through",
            extra=fields(cluster=cluster),
        )
    if too_old(beat.agent_version, settings.min_agent_version):
        log.warning(
            "agent is older than minAgentVersion; it should stop exporting",
            extra=fields(
                cluster=cluster,
                agentVersion=beat.agent_version,
                minAgentVersion=settings.min_agent_version,
            ),
        )
    return heartbeat_response(settings, withdrawal_allowed=outcome.withdrawal_allowed)


async def heartbeat_fast(request: StrictJsonRequest) -> Response | None:
    """`heartbeat` for a member's beat entirely in order, without FastAPI's dependency
    solving and without a token lookup of its own: the beat is recorded in the heartbeat
    group commit only if the token is the path cluster's (`hub.store.heartbeats`). None
    for anything else (another role's token, a body or path not in order, a token that is
    not the cluster's), which `heartbeat` then answers (`hub.api.fastpath`)."""
    params = request.path_params
    if not valid_path_labels(params, _HEARTBEAT_PATH_NAMES):
        return None
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        return None
    ctx = context_of(request.app)
    store = ctx.store
    token = bearer_token(request)
    if store is None or token is None or ctx.credentials.role_of(token) is not None:
        return None
    try:
        beat = Heartbeat.model_validate_json(await request.body())
    except ValidationError:
        return None
    cluster = params["cluster"]
    outcome = await store.clusters.beat_with_token(cluster, beat, token=token)
    if outcome is None:
        return None
    return _heartbeat_answer(cluster, beat, outcome, ctx.settings)


async def heartbeat(
    cluster: ClusterPath,
    beat: Heartbeat,
    _access: MemberAccess,
    store: StoreDep,
    settings: SettingsDep,
) -> Response:
    outcome = await store.clusters.beat(
        cluster,
        agent_version=beat.agent_version,
        imported_services=beat.imported_services,
        imported_endpoints=beat.imported_endpoints,
        withdrawal_held=beat.withdrawal_held,
        invalid_exports=beat.invalid_exports,
    )
    return _heartbeat_answer(cluster, beat, outcome, settings)


_HEARTBEAT_PATH_NAMES = ("cluster",)

# Registered without the decorator only to give it its own route class: a member's beat in
# order is answered by `heartbeat_fast`, anything else by `heartbeat` (`hub.api.fastpath`).
router.add_api_route(
    "/clusters/{cluster}/heartbeat",
    heartbeat,
    methods=["POST"],
    response_model=HeartbeatResponse,
    summary="Member liveness; answers the hub's version and minAgentVersion",
    responses=documented(401, 403, 404, 413, 422, 503),
    route_class_override=fast_path_route(heartbeat_fast),
)


@router.post(
    "/clusters/{cluster}/allow-withdrawal",
    response_model=MemberCluster,
    summary="Let the cluster's held mass withdrawal through, once",
    description=(
        "Applies to the hold current now (409 when nothing is held), shows as "
        "`status.withdrawalAllowed` while armed, and lapses when that hold clears."
    ),
    responses=documented(401, 403, 404, 409, 422, 503),
)
async def allow_withdrawal(cluster: ClusterPath, _access: AdminAccess, store: StoreDep) -> Response:
    record = await store.clusters.allow_withdrawal(cluster)
    log.warning(
        "an admin allowed the cluster's next held mass withdrawal, once",
        extra=fields(cluster=cluster),
    )
    return JSONResponse(to_wire(record))
