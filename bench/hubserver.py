"""The hub as the benchmarks run it: the production app plus a bench-only no-op router.

    python -m bench.hubserver --port P --database-url URL [--pool-size N] [--max-body-bytes B]

The framework ceiling of a PUT must be measured in the same server process, behind the
same middleware (request observer, body limit) and on the same event loop as the real
route, or the ratio compares two different servers. The no-op route is mounted here, by
the benchmark's own launcher, on the app that `hub.app.create_app` builds; the production
API never ships it. Everything else is `hub.serve`'s (migrations, store, and the server
itself: `server_config` and `HubServer`, with its connection guard and its `gc.freeze`),
so the hub measured is the hub deployed. Admin token: `MCSYNC_ADMIN_TOKEN`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from hub import ratelimitlog
from hub.api.credentials import load_credentials
from hub.app import create_app, open_store
from hub.logs import configure_logging
from hub.serve import HubServer, server_config
from hub.settings import HubSettings
from hub.store import Store, migrate

NOOP_PATH = "/bench/noop/{cluster}/{namespace}/{name}"
_NOOP_ANSWER = b'{"kind":"Status","code":200}'

noop_router = APIRouter()


@noop_router.put(NOOP_PATH, include_in_schema=False)
async def noop(request: Request) -> Response:
    """Read the body (the same bytes travel as for a real PUT) and answer at once."""
    await request.body()
    return Response(content=_NOOP_ANSWER, media_type="application/json")


def build_app(settings: HubSettings, store: Store) -> FastAPI:
    app = create_app(settings, store=store, credentials=load_credentials(settings))
    app.include_router(noop_router)
    return app


async def serve(settings: HubSettings) -> None:
    await migrate.upgrade_async(settings.database_url)
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
    store = await open_store(settings)
    try:
        app = build_app(settings, store)
        ratelimitlog.install()  # as `mcsync-hub serve` does: not a log line per dropped connection
        await HubServer(server_config(settings, app), app=app).serve()
    finally:
        await store.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hubserver")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument("--max-body-bytes", type=int, default=1024 * 1024)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--cluster-ttl", type=float, default=90.0)
    parser.add_argument("--history-limit", type=int, default=100_000)
    parser.add_argument("--max-connections", type=int, default=4096)
    args = parser.parse_args(argv)
    # HubSettings built in code reads no environment (`shared.settingscli`): the admin
    # token the benchmark sets is passed on explicitly.
    settings = HubSettings(
        admin_token=os.environ.get("MCSYNC_ADMIN_TOKEN"),
        host="127.0.0.1",
        port=args.port,
        database_url=args.database_url,
        pool_size=args.pool_size,
        max_body_bytes=args.max_body_bytes,
        backlog=4096,  # a benchmark opens its clients' connections all at once
        # One benchmark cluster writes far past the default quotas
        # (docs/reference.md#scope-and-limits); a quota costs a write the same at any limit (its
        # count is read and kept either way).
        max_exports_per_cluster=10**9,
        max_endpointslices_per_cluster=10**9,
        shutdown_grace_seconds=5,
        log_level=args.log_level,
        cluster_ttl=args.cluster_ttl,
        history_limit=args.history_limit,
        max_connections=args.max_connections,
    )
    configure_logging(log_format=settings.log_format, level=settings.log_level)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
