"""Unauthenticated operational routes: liveness, readiness, metrics and versions.

`/healthz` answers as long as the process serves HTTP (a restart would not help a
database outage, so liveness deliberately ignores the database). `/readyz` answers 200
only when the database answers AND its schema is at the newest migration, so a load
balancer stops sending traffic to a replica that could only answer 503 — and a replica
started with `--no-migrate` before the migration job ran stays out of rotation until it
has. On PostgreSQL "answers" means a writable primary answers (docs/reference.md#ha-postgresql):
during a failover `/readyz` is 503 and its message says "no writable primary" and why, which is
what `mcsync status` shows, beside the metric `mcsync_hub_database_primary_writable`.
Both answer a shared `Status` either way, so a probe's log says why.

"Writable" is tried, not assumed: `/readyz` runs a write that changes nothing in a
transaction it rolls back (`Store.probe_write`), so a database that answers reads but
refuses writes (a read-only file, a read-only role or transaction default, a server out
of disk that went read-only) keeps the replica out of rotation with the database's own
words. And a record an older hub stored past the annotation limit
(docs/reference.md#annotations), found once at start-up (`report_oversized`), is named
in the ready answer's message: the hub serves it, but it should be fixed or withdrawn.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from hub.api.deps import ContextDep
from hub.api.status import documented, status_response, unavailable_status
from hub.logs import fields
from hub.store import DatabaseUnavailable, Store
from hub.store import migrate as migrations
from shared.constants import API_PREFIX
from shared.models import Status, VersionInfo, to_wire
from shared.validation import ANNOTATIONS_TOTAL_MAX
from shared.version import __version__

log = logging.getLogger("mcsync.hub.health")

router = APIRouter(tags=["operations"])

_SHOWN = 5


async def report_oversized(store: Store) -> None:
    """At start-up: log each record an older hub stored past the annotation limit (a few
    by name); `/readyz` then says how many. A database that does not answer now is the
    readiness probe's business, not a reason not to start."""
    try:
        if not await store.schema_at_head():
            return  # checked by the first ready probe after the migration (`readyz`)
        found = await store.exports.check_oversized()
    except DatabaseUnavailable:
        return
    if found:
        log.warning(
            "stored exports have annotations past Kubernetes' limit (an older hub stored "
            "them); they are served, but importing clusters cannot write them: re-PUT them "
            "with fewer annotations, or withdraw them",
            extra=fields(
                count=len(found),
                limit=ANNOTATIONS_TOTAL_MAX,
                exports=",".join(f"{c}/{ns}/{n}" for c, ns, n in found[:_SHOWN]),
            ),
        )


def _oversized_note(store: Store) -> str:
    count = store.exports.oversized or 0
    if not count:
        return ""
    noun = "export has" if count == 1 else "exports have"
    return (
        f"; {count} stored {noun} annotations past Kubernetes' {ANNOTATIONS_TOTAL_MAX} "
        "bytes (see the start-up log)"
    )


def _ok(message: str) -> JSONResponse:
    status = Status(status="Success", code=200, reason="OK", message=message)
    return JSONResponse(to_wire(status))


@router.get("/healthz", response_model=Status, summary="Liveness: the process serves HTTP")
async def healthz() -> Response:
    return _ok("alive")


@router.get(
    "/readyz",
    response_model=Status,
    summary="Readiness: the database answers and its schema is at head",
    responses=documented(503),
)
async def readyz(ctx: ContextDep) -> Response:
    retry = ctx.settings.retry_after_seconds
    store = ctx.store
    if store is None:
        status, headers = unavailable_status(
            "the database is not open yet", retry_after_seconds=retry
        )
        return status_response(status, headers=headers)
    try:
        await store.ping()
        at_head = await store.schema_at_head()
        if at_head:
            await store.probe_write()
            if store.exports.oversized is None:
                await report_oversized(store)
    except DatabaseUnavailable as exc:
        ctx.metrics.database_errors.inc()
        status, headers = unavailable_status(str(exc), retry_after_seconds=retry)
        return status_response(status, headers=headers)
    if not at_head:
        message = (
            f"the database schema is not at migration {migrations.head()}; run `mcsync-hub migrate`"
        )
        status, headers = unavailable_status(message, retry_after_seconds=retry)
        return status_response(status, headers=headers)
    primary = "a writable primary" if store.backend == "postgresql" else "writable"
    return _ok(f"database reachable ({primary}), schema at head{_oversized_note(store)}")


@router.get(
    "/metrics",
    summary="Prometheus metrics of this hub replica",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def metrics(ctx: ContextDep) -> Response:
    positions = [stream.position for stream in list(ctx.open_watches)]
    await ctx.metrics.refresh(ctx.store, watch_positions=positions)
    body, content_type = ctx.metrics.render()
    return Response(body, media_type=content_type)


# HEAD answers GET's headers without a body (the server drops it); its own route, kept out
# of the OpenAPI document, so that the GET operation keeps one operation id.
router.add_api_route("/metrics", metrics, methods=["HEAD"], include_in_schema=False)


@router.get(f"{API_PREFIX}/version", response_model=VersionInfo, summary="Hub and API versions")
async def version(ctx: ContextDep) -> Response:
    info = VersionInfo(hub_version=__version__, min_agent_version=ctx.settings.min_agent_version)
    return JSONResponse(to_wire(info))
