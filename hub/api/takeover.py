"""A watch's connection, taken from the server once its answer has started
(docs/reference.md#fleet-scale; the decision is in docs/decisions.md, "Fleet scale").

Served inside its ASGI request, a watch holds for its whole life — minutes, for every agent
— what that request is made of while it runs: the server's request cycle and scope, its
HTTP parser and flow control, the middleware's and FastAPI's frames and exit stacks, a task
listening for the client's disconnect. None of it does anything once the answer's head is
out; it is most of an idle watch's memory. So `take_over` moves the connection to a
`WatchConnection` as soon as the head has gone out through the middleware: the transport's
protocol is replaced, the server forgets the request (its cycle is marked complete, so that
it neither writes nor closes anything for it when the app returns), and the ASGI request
returns. The watch's body then goes out from one task of the watch's own
(`hub.api.watch.WatchResponse`), and, while the watch waits, from the shared reader and a
timer through `WatchConnection.write`.

What the server did for the request, the connection does itself:

* the client going away (the transport's `connection_lost`, or its end of the stream)
  ends the watch at once;
* the transport's write buffer passing its high-water mark pauses the watch (`ready`
  answers False, `send` waits), so a client that stopped reading holds what it held
  before: its bounded buffer of shared lines, and the write buffer;
* it stays one of the server's connections (`connections`, with the server's
  `shutdown()` and a `transport`), so a draining server waits for it, ends it, and drops it
  when it makes no progress (`hub.serve.HubServer`), and the connection cap counts it;
* when the watch ends with its last chunk, a kept-alive connection goes back to the server
  as an idle connection between requests (`hub.connections.reopen_idle`); otherwise it is
  closed, as the server would have.

Writes made while the watch waits (a change from the shared reader, a BOOKMARK from its
timer) are gathered for the rest of the event loop's turn and go out as one write per
connection at its end (`Coalescer`): a page of changes the reader dispatches in one go is
one write per watch, not one per line. Whatever the watch's task writes first sends what
is gathered, so the order of the lines is the order they were handed over.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from hub.connections import MAX_HEAD_BYTES, reopen_idle

Chunk = bytes | memoryview

# Gathered bytes past this make `ready()` answer False: the watch's task then writes (and
# waits for the client, if it must) instead of the gathering growing within one turn.
GATHER_BYTES = 16 * 1024
_LAST_CHUNK = b"0\r\n\r\n"


class Coalescer:
    """The connections written to in this turn of the event loop, flushed at its end."""

    __slots__ = ("_dirty", "_loop", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._dirty: list[WatchConnection] = []
        self._scheduled = False

    def add(self, connection: WatchConnection) -> None:
        self._dirty.append(connection)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        dirty, self._dirty = self._dirty, []
        for connection in dirty:
            connection.flush()


_COALESCERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Coalescer] = (
    weakref.WeakKeyDictionary()
)


def _coalescer(loop: asyncio.AbstractEventLoop) -> Coalescer:
    coalescer = _COALESCERS.get(loop)
    if coalescer is None:
        coalescer = _COALESCERS[loop] = Coalescer(loop)
    return coalescer


class WatchConnection(asyncio.Protocol):
    """The protocol of a watch's connection once taken from the server (module doc)."""

    __slots__ = (
        "_after",
        "_coalescer",
        "_connections",
        "_drained",
        "_ended",
        "_keep_alive",
        "_lost",
        "_on_lost",
        "_on_shutdown",
        "_out",
        "_out_bytes",
        "_paused",
        "_received",
        "_reopen",
        "task",
        "transport",
    )

    def __init__(
        self,
        transport: asyncio.Transport,
        *,
        connections: set[Any],
        reopen: Callable[[asyncio.Transport, bytes], object] | None,
        keep_alive: bool,
        paused: bool,
    ) -> None:
        self.transport = transport
        self._connections = connections
        self._reopen = reopen
        self._keep_alive = keep_alive
        self._coalescer = _coalescer(asyncio.get_running_loop())
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._paused = paused
        self._lost = False
        self._drained: asyncio.Future[None] | None = None
        self._received: bytearray | None = None
        # Set by the watch: what the client going and the server's shutdown do to it.
        self._on_lost: Callable[[], None] | None = None
        self._on_shutdown: Callable[[], None] | None = None
        self._ended = False
        self._after: Callable[[], None] | None = None
        self.task: asyncio.Task[None] | None = None

    def attach(self, *, on_lost: Callable[[], None], on_shutdown: Callable[[], None]) -> None:
        self._on_lost = on_lost
        self._on_shutdown = on_shutdown
        if self._lost:
            on_lost()

    # --- the transport's side -------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        # An HTTP/1.1 client sends nothing while its answer streams. What comes anyway is
        # the start of its next request: kept for the server, if the connection goes back.
        received = self._received
        if received is None:
            received = self._received = bytearray()
        received += data
        if len(received) > MAX_HEAD_BYTES:
            self.transport.abort()

    def eof_received(self) -> bool | None:
        return None  # the client is gone: the transport closes, `connection_lost` follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._connections.discard(self)
        self._out, self._out_bytes = [], 0
        self._wake_writer()
        if self._on_lost is not None:
            self._on_lost()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_writer()

    def _wake_writer(self) -> None:
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    # --- the server's side (its connections' interface) -------------------------------------

    def shutdown(self) -> None:
        """The server drains: the watch ends now, and the connection closes after it."""
        self._keep_alive = False
        if self._on_shutdown is not None:
            self._on_shutdown()

    # --- the watch's side -----------------------------------------------------------------

    @property
    def lost(self) -> bool:
        return self._lost

    def ready(self) -> bool:
        """Whether `write` may be used now: the client takes writes (the transport is not
        paused at its high-water mark), is there, and this turn's gathering is small."""
        return not (self._paused or self._lost or self._out_bytes >= GATHER_BYTES)

    def write(self, data: bytes) -> None:
        """`data` as the next body chunk, at the end of this turn of the loop (gathered
        with whatever else the watch is handed in it); only when `ready()`."""
        if not self._out:
            self._coalescer.add(self)
        self._out.append(data)
        self._out_bytes += len(data)

    def flush(self) -> None:
        """Write what was gathered, as one chunk."""
        out = self._out
        if not out:
            return
        self._out, self._out_bytes = [], 0
        if not self._lost:
            data = out[0] if len(out) == 1 else b"".join(out)
            self.transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    async def send(self, data: Chunk) -> None:
        """`data` as the next body chunk, after what was gathered, once the client takes
        writes; returns at once when the client is gone (as the server's `send` does)."""
        self.flush()
        while self._paused and not self._lost:
            drained = self._drained = asyncio.get_running_loop().create_future()
            try:
                await drained
            finally:
                self._drained = None
        if not self._lost:
            self.transport.write(b"".join((b"%x\r\n" % len(data), data, b"\r\n")))

    def finish(self, *, complete: bool) -> None:
        """The watch ended: its last chunk, then the connection back to the server (kept
        alive) or closed. Not `complete` (the stream was cancelled): closed, as the server
        closes a connection whose app returned mid-answer."""
        try:
            self.flush()
            if self._lost:
                return
            if not complete:
                self.transport.close()
                return
            self.transport.write(_LAST_CHUNK)
            if self._keep_alive and self._reopen is not None and not self.transport.is_closing():
                self._connections.discard(self)
                received, self._received = bytes(self._received or b""), None
                self._reopen(self.transport, received)
            else:
                self.transport.close()
        finally:
            self._ended = True
            after, self._after = self._after, None
            if after is not None:
                after()

    def when_done(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the watch has ended (now, if it has): the request observer
        records the watch's request then (`hub.api.observe`)."""
        if self._ended:
            callback()
        else:
            self._after = callback


def take_over(send: Any) -> WatchConnection | None:
    """The connection of the answer the server's `send` writes, taken from the server
    (module doc); None when it cannot be: another server or protocol (an in-process client,
    h11), an answer that is not chunked (HTTP/1.0) or is complete, a client gone."""
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None or transport.is_closing():
        return None
    protocol = transport.get_protocol()
    if (
        not isinstance(protocol, HttpToolsProtocol)
        or protocol.cycle is not cycle
        or cycle.chunked_encoding is not True
        or cycle.response_complete
        or cycle.disconnected
        or cycle.scope.get("method") == "HEAD"
    ):
        return None
    connection = WatchConnection(
        transport,
        connections=protocol.connections,  # type: ignore[arg-type]
        reopen=functools.partial(
            reopen_idle, type(protocol), protocol.config, protocol.server_state, protocol.app_state
        ),
        keep_alive=bool(cycle.keep_alive),
        paused=bool(protocol.flow.write_paused),
    )
    release = getattr(protocol, "release", None)
    if release is not None:
        release()  # the guard's bookkeeping (`hub.connections.GuardedHttpToolsProtocol`)
    if protocol.timeout_keep_alive_task is not None:
        protocol.timeout_keep_alive_task.cancel()
        protocol.timeout_keep_alive_task = None
    connections: set[Any] = protocol.connections
    connections.discard(protocol)
    # Complete, for the server: when the app returns it neither answers nor closes anything.
    cycle.response_complete = True
    # What the old protocol and the request's cycle hold of each other (the parser calls
    # the protocol back): freed as the request returns, not by the cyclic collector.
    protocol.parser = None  # type: ignore[assignment]
    protocol.cycle = None  # type: ignore[assignment]
    protocol.scope = None  # type: ignore[assignment]
    protocol.headers = None  # type: ignore[assignment]
    transport.set_protocol(connection)
    connections.add(connection)
    if not transport.is_reading():
        transport.resume_reading()  # to hear the client go
    return connection
