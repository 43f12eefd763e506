"""`create_app`: the hub's FastAPI application, assembled from its settings.

Everything the routes need hangs off one `HubContext` (`hub.api.deps`) stored on the
app, so two apps in one process (tests, a benchmark with two "replicas") share nothing:
each has its own settings, credentials, metrics registry, store and shutdown signal.

The lifespan opens the Store unless one is handed in (the CLI opens it itself, so that an
unreachable database stops the program with one clear line instead of a traceback) and
closes only a store it opened. On the way out it first sets the shutdown signal, so open
watch streams end before the store they wait on is closed.

The store is instrumented with the app's tracer and metrics (`Store.instrument`), so each
conflict resolution is a span under the request span and a sample of its histogram.

Middleware, outermost first: OpenTelemetry (only when a tracer provider is given), the
request observer (log line, metrics, last-resort 500), the body-size limit (413 before
any parsing). Error answers are installed by `hub.api.errors`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import TYPE_CHECKING

from fastapi import FastAPI
from opentelemetry import trace
from starlette.types import Message, Receive, Scope, Send

from hub.api.bodylimit import BodyTooLargeMiddleware
from hub.api.credentials import Credentials, load_credentials
from hub.api.deps import STATE_ATTR, HubContext, context_of
from hub.api.errors import install_error_handlers
from hub.api.observe import RequestObserverMiddleware, is_watch
from hub.api.routes import ROUTERS
from hub.api.routes.health import report_oversized
from hub.api.watch import SERVER_SEND, end_watches
from hub.console import router as console_router
from hub.logs import fields
from hub.metrics import HubMetrics
from hub.settings import HubSettings
from hub.store import Store
from hub.store.usage import Quotas
from hub.sweeper import Sweeper, sweep_interval
from shared.version import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("mcsync.hub")

DESCRIPTION = """\
The mcsync hub: every InternalServiceExport of the fleet, the conflict verdict of each,
the derived ServiceImports, and a change feed (`?watch=true`). Authenticate with
`Authorization: Bearer <token>` (admin, reader, or a member cluster's token). Every error
is a Kubernetes-style `Status`.
"""


class HubApp(FastAPI):
    """FastAPI, handing each request the server's own `send` under `SERVER_SEND` before
    the middleware wraps it: a watch's body goes there (`hub.api.watch.WatchResponse`),
    while the middleware still sees the response's start and the request's end. A watch
    request waits for its turn (`HubContext.watch_opens`) before anything else is done for
    it, and gives the turn back when its answer starts."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        scope[SERVER_SEND] = send
        try:
            if is_watch(scope):
                await self._open_watch(scope, receive, send)
            else:
                await super().__call__(scope, receive, send)
        finally:
            # The server's request cycle holds the scope: the scope holding the cycle's
            # `send` would make both garbage only the cyclic collector frees.
            del scope[SERVER_SEND]

    async def _open_watch(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A watch request, in its turn (`HubContext.watch_opens`) until its answer starts."""
        gate = context_of(self).watch_opens
        await gate.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                gate.release()

        async def send_in_turn(message: Message) -> None:
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            await super().__call__(scope, receive, send_in_turn)
        finally:
            release()


async def open_store(settings: HubSettings) -> Store:
    """Open the Store `settings` describe (no migrations: see `hub.store.migrate`)."""
    return await Store.open(
        settings.database_url,
        cluster_ttl=timedelta(seconds=settings.cluster_ttl),
        history_limit=settings.history_limit,
        pool_size=settings.pool_size,
        stale_panic_fraction=settings.stale_panic_fraction,
        database_timeout=settings.database_timeout_seconds,
    )


def create_app(
    settings: HubSettings,
    *,
    store: Store | None = None,
    credentials: Credentials | None = None,
    tracer_provider: TracerProvider | None = None,
) -> FastAPI:
    """The hub app for `settings`.

    `store`: an open Store to use (the caller closes it); None opens one in the lifespan.
    `credentials`: the admin/reader tokens; None loads them from `settings` now (which
    may generate the admin token file, see `hub.api.credentials`).
    `tracer_provider`: trace each request with it (see `hub.tracing`); None: no tracing.
    """
    creds = credentials if credentials is not None else load_credentials(settings)
    ctx = HubContext(settings=settings, credentials=creds, metrics=HubMetrics(), store=store)
    owns_store = store is None
    tracer = (
        tracer_provider.get_tracer("mcsync.hub")
        if tracer_provider is not None
        else trace.NoOpTracer()
    )

    def instrument_store(opened: Store) -> None:
        opened.limit(
            Quotas(
                exports=settings.max_exports_per_cluster,
                endpoint_slices=settings.max_endpointslices_per_cluster,
            )
        )
        opened.instrument(
            tracer=tracer,
            resolution_seconds=ctx.metrics.conflict_resolution.observe,
            write_batch_size=ctx.metrics.write_batch_size.observe,
        )

    if store is not None:
        instrument_store(store)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx.shutdown.clear()  # the same app may be started again (tests)
        if owns_store:
            ctx.store = await open_store(settings)
            instrument_store(ctx.store)
        if ctx.store is not None:
            await report_oversized(ctx.store)
        log.info(
            "hub ready",
            extra=fields(version=__version__, database=settings.redacted_database_url),
        )
        # docs/reference.md#failover: every replica sweeps for clusters gone Stale (`hub.sweeper`).
        sweeper = Sweeper(
            store_of=lambda: ctx.store,
            interval=sweep_interval(settings.cluster_ttl),
            grace=settings.cluster_ttl,
        )
        sweeper.start()
        try:
            yield
        finally:
            ctx.shutdown.set()
            end_watches(ctx)
            await sweeper.stop()
            if owns_store and ctx.store is not None:
                await ctx.store.close()
                ctx.store = None

    app = HubApp(
        title="mcsync hub",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        # `/docs` is served from the package's own Swagger UI (hub.api.routes.docs), not a CDN.
        docs_url=None,
        redoc_url=None,
        # Starlette's trailing-slash redirect built its Location from the request's Host
        # header (and `//host/` paths made it an open redirect): no client of this API
        # adds a slash, so such a path is a plain 404 Status naming it.
        redirect_slashes=False,
    )
    setattr(app.state, STATE_ATTR, ctx)
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(console_router)  # `/ui/`, the fleet console (docs/reference.md#console)
    # add_middleware wraps: the last added is the outermost.
    app.add_middleware(BodyTooLargeMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(RequestObserverMiddleware, metrics=ctx.metrics)
    if tracer_provider is not None:
        from hub.tracing import instrument

        instrument(app, tracer_provider=tracer_provider)
    return app


def begin_shutdown(app: FastAPI) -> None:
    """Tell long-lived streams of `app` to end now (the server is about to drain)."""
    ctx = context_of(app)
    ctx.shutdown.set()
    end_watches(ctx)
