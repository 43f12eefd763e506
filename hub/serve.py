"""What `mcsync-hub serve` and `mcsync-hub migrate` run once their flags were accepted
(`hub.__main__` parses and validates them first, without importing any of this:
docs/decisions.md#start-up-cost).

It serves with uvicorn, driven programmatically on our own event loop. The port is bound first
(`hub.listen`: a port in use must not touch the database), then the store is opened (and
an unreachable database reported), then uvicorn serves the bound socket. On SIGTERM,
uvicorn stops accepting connections and gives in-flight requests `--shutdown-grace-seconds`;
`HubServer` first tells open watch streams to end, since they would otherwise hold the
drain open until the grace period ran out. A graceful stop exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

from hub import listen, ratelimitlog
from hub.api.credentials import (
    Credentials,
    CredentialsError,
    load_credentials,
)
from hub.app import begin_shutdown, create_app, open_store
from hub.connections import guard_for
from hub.logs import fields
from hub.settings import HubSettings, sqlite_file
from hub.sqliteclaim import SQLiteClaim, SQLiteClaimError
from hub.startup import EXIT_CONFIG, EXIT_PORT_IN_USE, EXIT_UNAVAILABLE, StartupError
from hub.store import DatabaseUnavailable, migrate
from hub.store.refusals import refusal
from hub.tracing import tracer_provider_from_env

log = logging.getLogger("mcsync.hub")


def _with_write_buffer_limit(base: type[asyncio.Protocol], high: int) -> type[asyncio.Protocol]:
    """`base` (uvicorn's HTTP protocol), with the transport's write buffer paused at `high`."""

    def connection_made(self: asyncio.Protocol, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.WriteTransport):
            transport.set_write_buffer_limits(high=high)
        base.connection_made(self, transport)

    return type(f"Hub{base.__name__}", (base,), {"connection_made": connection_made})


class HubServer(uvicorn.Server):
    """uvicorn, telling the app's watches to end before it waits for connections to drain,
    and dropping the connections of clients that stopped reading.

    A watch whose client never reads cannot end cleanly: what is left of its answer sits
    in the socket's write buffer, and a connection is only gone once that is flushed, so
    a few such clients would hold the drain for the whole grace period. Once
    the watches were told to end, a connection whose write buffer made no progress for
    `STALLED_SECONDS` is aborted; a client that reads, however slowly, makes progress.

    Every accepted connection gets TCP_NOTSENT_LOWAT (inherited from the listening
    socket): the kernel keeps at most `NOTSENT_LOWAT_BYTES` of not-yet-sent data for it.
    Without it Linux autotunes a socket's send buffer to megabytes, so each client that
    stops reading made the hub copy megabytes of watch events into the kernel first
    (2.8 MB per socket on loopback: 2.5 GB, and seconds of the event loop, for 900 such
    watches). Data in flight is not limited, so throughput to a reading client is not.
    And each connection's own write buffer pauses the app's writes above
    `WRITE_BUFFER_HIGH_BYTES` rather than asyncio's 64 KiB: what a client that stopped
    reading holds of the hub's memory is that, plus one slice of a watch line.

    Once started, everything alive (modules, the app and its schemas, the store: about
    130,000 objects, there for the life of the process) is moved out of the cyclic
    collector's reach (`gc.freeze`). A full collection walks every object it tracks, and
    with hundreds of open watches (some 300 objects each) these took 100-800 ms on a
    loaded machine, stalling every request; without the startup objects they are a third
    cheaper. Reference counting still frees them; only cycles among them would be kept,
    and those live as long as the process anyway.

    The youngest generation is then collected after `GC_YOUNG_THRESHOLD` net new objects
    instead of CPython's 700. A request's objects are freed by reference counting when it
    ends; at 700 the collector ran every few requests and walked whatever was in flight,
    some 3 % of the hub's CPU under 64 concurrent PUTs (bench/put_throughput: 2,774 young
    collections in one run against 15 at 20,000). What it still collects is cyclic
    garbage, which now waits a little longer: kilobytes, not a request's worth.
    """

    GC_YOUNG_THRESHOLD = 20_000
    # Logged once uvicorn serves: where to point a browser, the CLI and an agent.
    ready_line = ""

    STALLED_SECONDS = 1.0
    NOTSENT_LOWAT_BYTES = 16 * 1024
    WRITE_BUFFER_HIGH_BYTES = 16 * 1024

    async def startup(self, sockets: Any = None) -> None:
        self.config.http_protocol_class = _with_write_buffer_limit(
            self.config.http_protocol_class, self.WRITE_BUFFER_HIGH_BYTES
        )
        await super().startup(sockets=sockets)
        option = getattr(socket, "TCP_NOTSENT_LOWAT", None)  # Linux and macOS
        for server in self.servers:
            for sock in server.sockets:
                if option is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, option, self.NOTSENT_LOWAT_BYTES)
        if self.ready_line and not self.should_exit:
            log.info(self.ready_line)
        gc.collect()
        gc.freeze()
        gc.set_threshold(self.GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])

    def __init__(self, config: uvicorn.Config, *, app: Any) -> None:
        super().__init__(config)
        self._hub_app = app

    async def shutdown(self, sockets: Any = None) -> None:
        begin_shutdown(self._hub_app)
        reaper = asyncio.create_task(self._abort_stalled_connections())
        try:
            await super().shutdown(sockets=sockets)
        finally:
            reaper.cancel()

    async def _abort_stalled_connections(self) -> None:
        pending: dict[Any, int] = {}
        while True:
            await asyncio.sleep(self.STALLED_SECONDS)
            now: dict[Any, int] = {}
            for connection in list(self.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is None:
                    continue
                size = transport.get_write_buffer_size()
                if size and pending.get(transport, size + 1) <= size:
                    transport.abort()
                elif size:
                    now[transport] = size
            pending = now


def _unreachable(settings: HubSettings, exc: Exception) -> StartupError:
    """A database that does not answer (exit 3), or a URL it cannot be (exit 2)."""
    return StartupError(
        f"--database-url: cannot use the database at {settings.redacted_database_url}: {exc}",
        code=EXIT_UNAVAILABLE if isinstance(exc, DatabaseUnavailable) else EXIT_CONFIG,
    )


def _refused(settings: HubSettings, exc: Exception) -> StartupError | None:
    """The server refused the database or role of the URL: one line saying what to do."""
    why = refusal(exc)
    if why is None:
        return None
    return StartupError(
        f"--database-url: the server of {settings.redacted_database_url} refused: {why}",
        code=EXIT_UNAVAILABLE,
    )


@contextlib.contextmanager
def _database_errors(settings: HubSettings) -> Iterator[None]:
    """A failure to reach or use the database as the one line a hub that cannot start
    prints: refused (what to do), unreachable or a URL it cannot be; anything else as is."""
    try:
        yield
    except (DatabaseUnavailable, ValueError) as exc:
        raise _refused(settings, exc) or _unreachable(settings, exc) from None
    except Exception as exc:
        refused = _refused(settings, exc)
        if refused is None:
            raise
        raise refused from None


async def _migrate(settings: HubSettings) -> None:
    with _database_errors(settings):
        await migrate.upgrade_async(settings.database_url)
    log.info(
        "database schema at head",
        extra=fields(database=settings.redacted_database_url, revision=migrate.head()),
    )


def _credentials(settings: HubSettings) -> Credentials:
    try:
        return load_credentials(settings)
    except CredentialsError as exc:
        raise StartupError(str(exc)) from None


def server_config(settings: HubSettings, app: Any) -> uvicorn.Config:
    """How uvicorn serves the hub's app: the one place, so that what the benchmarks run
    (`bench.hubserver`) is the server deployed."""
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,  # ours (hub.logs) is configured already
        access_log=False,  # the request observer writes one line per request
        lifespan="on",
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
        server_header=False,
        # Slow, idle and surplus clients: see hub.connections.
        http=guard_for(settings).protocol_class(),
        timeout_keep_alive=settings.keep_alive_timeout_seconds,
        backlog=settings.backlog,
    )


async def _serve(settings: HubSettings, tracer_provider: Any) -> None:
    try:
        listening = listen.bind(settings.host, settings.port, backlog=settings.backlog)
    except listen.ListenError as exc:
        raise StartupError(f"--port: {exc}", code=EXIT_PORT_IN_USE) from None
    try:
        await _serve_on(settings, tracer_provider, listening)
    finally:
        listening.close()


async def _serve_on(settings: HubSettings, tracer_provider: Any, listening: socket.socket) -> None:
    database = sqlite_file(settings.database_url)
    try:
        claim = SQLiteClaim(database) if database is not None else None
    except SQLiteClaimError as exc:
        raise StartupError(str(exc)) from None
    try:
        await _serve_claimed(settings, tracer_provider, listening)
    finally:
        if claim is not None:
            claim.release()


def listening_line(listening: socket.socket) -> str:
    """Where the hub answers, as a person would type it: the URL, the console, the API
    docs. A wildcard host is shown as the loopback address, which reaches it too."""
    host, port = listening.getsockname()[:2]
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    return f"mcsync hub listening on {base} (console {base}/ui/, API docs {base}/docs)"


async def _serve_claimed(
    settings: HubSettings, tracer_provider: Any, listening: socket.socket
) -> None:
    if settings.migrate:
        await _migrate(settings)
    # Alembic logs two lines per schema check; /readyz checks on every probe.
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
    with _database_errors(settings):
        store = await open_store(settings)
    try:
        # After the database answered: a hub that cannot start must not leave a freshly
        # generated admin token file behind.
        credentials = _credentials(settings)
        if not settings.migrate and not await store.schema_at_head():
            log.warning(
                "the database schema is not at head; /readyz answers 503 until "
                "`mcsync-hub migrate` has run"
            )
        app = create_app(
            settings, store=store, credentials=credentials, tracer_provider=tracer_provider
        )
        ratelimitlog.install()
        server = HubServer(server_config(settings, app), app=app)
        server.ready_line = listening_line(listening)
        # SIGHUP reloads the admin and reader token files (docs/reference.md#credentials).
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, credentials.reload)
        # uvicorn re-raises the signal that stopped it once it has shut down; with these
        # no-op handlers in place that re-raise lands here, and a graceful stop exits 0.
        previous = {
            sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            await server.serve(sockets=[listening])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        with contextlib.suppress(RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        await store.close()


def run_serve(settings: HubSettings) -> int:
    """Serve until stopped; `hub.__main__.check_before_serving` has passed."""
    provider = tracer_provider_from_env()
    try:
        asyncio.run(_serve(settings, provider))
    finally:
        if provider is not None:
            provider.shutdown()
    log.info("hub stopped")
    return 0


def run_migrate(settings: HubSettings) -> int:
    asyncio.run(_migrate(settings))
    return 0
