"""What the hub does about client connections that do not behave: a request-head deadline,
a cap on open connections that keeps file descriptors for the hub's own use, and a limit on
the size of a request head.

uvicorn (0.54, httptools) has none of these. Its only timer is the keep-alive timeout,
armed after a response; a connection that opens and then trickles a header line every few
seconds is never timed out (1,500 such connections, none dropped after 15 s).
Its `limit_concurrency` answers 503 only once a request head has arrived, so connections
that never finish a head still hold a descriptor each; under `ulimit -n 256`, 300 of them
ran the accept loop out of descriptors (see `hub.ratelimitlog` for what that did to the log).
So the hub's HTTP protocol is uvicorn's own `HttpToolsProtocol` plus a `ConnectionGuard`:

* **Head deadline.** From the moment a connection opens, and from the first byte of each
  later request on it, the whole request head must arrive within `header_timeout` seconds
  (Go's `ReadHeaderTimeout`); otherwise the connection is closed without an answer, as Go's
  server does. An idle keep-alive connection stays uvicorn's business (`timeout_keep_alive`).
  Bodies and responses are not timed here: a watch is a response that lasts minutes.
* **Connection cap.** At most `max_connections` connections are open. A connection that
  would exceed it first makes room by closing the *oldest connection that is not in a
  request* — one still waiting for its head, or idle between requests — since a client that
  sends its head at once is never that one; if every open connection is busy in a request
  (or a watch), the new one is closed at once. The cap is lowered at start to what the
  process's file-descriptor limit leaves after a reserve for the database pool and the
  hub's own files (`fd_ceiling`), so the hub never runs out of descriptors because of its
  clients: `accept()` always succeeds, and the hub decides whom to drop.
* **Head size.** A head still incomplete after `MAX_HEAD_BYTES` have arrived is a 400
  (uvicorn's answer to a malformed request) and the connection is closed; without it the
  head deadline alone would let a fast client fill memory for `header_timeout` seconds.
  (uvicorn's `h11_max_incomplete_event_size` does this for h11 only; the hub runs
  httptools, and httptools buffers a header line until it ends, so the bytes are counted
  as they arrive: a head that completes within one read of up to 256 KiB is let through.)

What was dropped is counted on the guard and logged at most once per interval
(`hub.ratelimitlog`), never once per connection.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import TYPE_CHECKING, Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

if TYPE_CHECKING:
    from hub.settings import HubSettings

log = logging.getLogger("mcsync.hub.connections")

MAX_HEAD_BYTES = 64 * 1024  # request line + headers; nginx allows 32 KiB, Go 1 MiB
# Descriptors the hub needs besides its clients: per pooled database connection up to three
# (SQLite: the database, its WAL and shared-memory files), the pool may double with overflow;
# plus the listening socket, the event loop's own, stdio, the LISTEN connection and slack.
FDS_PER_POOLED_CONNECTION = 6
FDS_BASE_RESERVE = 64


def raise_fd_limit() -> int:
    """Raise this process's soft file-descriptor limit to its hard limit (as Go's runtime
    does at start); answers the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # a container may refuse; keep what we have
            pass
    return soft


def fd_ceiling(*, soft_limit: int, pool_size: int) -> int:
    """How many client connections `soft_limit` descriptors leave room for."""
    reserve = FDS_BASE_RESERVE + FDS_PER_POOLED_CONNECTION * pool_size
    return max(1, soft_limit - reserve)


class ConnectionGuard:
    """The shared state of one server's connections: who is waiting for a request head
    (oldest first), the limits, and what was dropped."""

    def __init__(self, *, header_timeout: float, max_connections: int) -> None:
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        # Connections not in a request, oldest first (a dict keeps insertion order).
        self.waiting: dict[GuardedHttpToolsProtocol, None] = {}
        self.timed_out = 0  # no complete head within header_timeout
        self.evicted = 0  # closed to make room for a new connection
        self.refused = 0  # new connections closed at once: every open one was busy
        self.oversized = 0  # heads over MAX_HEAD_BYTES

    def protocol_class(self) -> type[GuardedHttpToolsProtocol]:
        """The class to hand uvicorn (`Config(http=…)`), bound to this guard."""
        return type("GuardedProtocol", (GuardedHttpToolsProtocol,), {"guard": self})

    def note(self, what: str) -> None:
        """One dropped connection; the log line is rate-limited by `hub.ratelimitlog`."""
        log.warning(
            "dropped a client connection: %s (so far: %d timed out, %d evicted, %d refused, "
            "%d oversized heads)",
            what,
            self.timed_out,
            self.evicted,
            self.refused,
            self.oversized,
        )


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the guard's head deadline, cap and head limit."""

    guard: ClassVar[ConnectionGuard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0

    # -- the cap -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        guard = self.guard
        if len(self.connections) > guard.max_connections:
            victim = next(iter(guard.waiting), None)
            if victim is None:
                guard.refused += 1
                guard.note("every open connection is busy and the cap is reached")
                transport.close()
                return
            guard.evicted += 1
            guard.note("the cap is reached; closed the oldest connection not in a request")
            victim._drop()
        self._await_head()

    # -- the head deadline -------------------------------------------------------------

    def _await_head(self) -> None:
        self.guard.waiting[self] = None
        self._head_bytes = 0
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.guard.header_timeout, self._head_late)

    def _head_arrived(self) -> None:
        self.guard.waiting.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self in self.guard.waiting:
            self.guard.timed_out += 1
            self.guard.note(f"no complete request head within {self.guard.header_timeout:g} s")
            self._drop()

    def _drop(self) -> None:
        self._head_arrived()
        if not self.transport.is_closing():
            self.transport.abort()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # The first byte of a request on a kept-alive connection starts its head's deadline.
        self._await_head()

    def on_headers_complete(self) -> None:
        self._head_arrived()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            # Idle between requests: evictable, and uvicorn's keep-alive timer runs.
            self.guard.waiting[self] = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    # -- a connection taken over (`hub.api.takeover`) ------------------------------------

    def release(self) -> None:
        """The connection is taken from this protocol for the rest of its answer: the guard
        forgets it (it is in a request, and the new protocol counts as a connection)."""
        self._head_arrived()

    def idle(self) -> None:
        """This new protocol of a connection handed back after an answer: idle between
        requests, as after any answer (evictable, uvicorn's keep-alive timer running)."""
        self._head_arrived()
        self.on_response_complete()

    # -- the head size -----------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # Still without a complete head after this chunk: it all counts towards the head.
        # (httptools buffers a header line until it ends, so its callbacks cannot count.)
        if self in self.guard.waiting and self._head_timer is not None:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
                self.guard.oversized += 1
                self.guard.note(f"a request head over {MAX_HEAD_BYTES} bytes")
                self._head_arrived()
                self.send_400_response("Request head too large.")


def reopen_idle(
    protocol_class: type[HttpToolsProtocol],
    config: Any,
    server_state: Any,
    app_state: dict[str, Any],
    transport: asyncio.Transport,
    received: bytes,
) -> HttpToolsProtocol:
    """Hand a connection taken over for an answer (`hub.api.takeover`) back to the server,
    once that answer is complete: a new protocol of the server's class, in the state it is
    in between requests on a kept-alive connection; `received` is what the client sent
    meanwhile (the start of its next request)."""
    protocol = protocol_class(config=config, server_state=server_state, app_state=app_state)
    transport.set_protocol(protocol)
    protocol.connection_made(transport)
    if isinstance(protocol, GuardedHttpToolsProtocol):
        protocol.idle()
    else:
        protocol.on_response_complete()
    if received:
        protocol.data_received(received)
    return protocol


def guard_for(settings: HubSettings) -> ConnectionGuard:
    """The guard of a hub serving with `settings`: its cap is `max_connections`, lowered to
    what the file-descriptor limit (raised to its hard limit first) leaves room for."""
    soft = raise_fd_limit()
    ceiling = fd_ceiling(soft_limit=soft, pool_size=settings.pool_size)
    cap = min(settings.max_connections, ceiling)
    if cap < settings.max_connections:
        log.warning(
            "serving at most %d client connections, not --max-connections %d: the "
            "file-descriptor limit is %d and the hub keeps %d for itself",
            cap,
            settings.max_connections,
            soft,
            soft - ceiling,
        )
    return ConnectionGuard(header_timeout=settings.header_timeout_seconds, max_connections=cap)
