"""The change feeds over HTTP (docs/reference.md#change-feeds):
`…/serviceexports?watch=true&resourceVersion=N` and the import feed
`…/clusters/{c}/imports?watch=true&resourceVersion=N`.

Both are one `WatchStream` over a `WatchSource`: a cluster's exports (or every cluster's),
or the fleet's ServiceImports and EndpointSliceExports. A source names its history replay
and its live subscription to the replica's shared reader; everything below — positions,
BOOKMARKs, bounds, ends — is the same for both, so the import feed every agent holds
open meets the same bar as the export feed.

The answer is a stream of newline-delimited JSON `WatchEvent`s: first every retained
change after N, read from the store's history a page at a time with this watch's own
query (the replay), then, held open, each change as it commits — on whichever hub replica
took the write. Live changes do not come from a query of this watch: the replica's one
shared feed reader (`hub.store.fanout`), woken by in-process commits and PostgreSQL NOTIFY
alike, reads each new stretch of history once for every watch and appends the changes of
this watch's cluster to its subscription's bounded buffer. A commit therefore costs one
history read per replica, not one per open watch, and only the watches of the changed
cluster wake up. An idle watch waits on its subscription's one event (the reader sets it
for a change; `WatchResponse` for the deadline and the hub's shutdown).

Position bookkeeping (the subtle part). `position` is the global revision up to which this
watcher has sent *everything relevant*; events move it to their own revision.

* Switching from replay to live without gap or duplicate: the watch subscribes FIRST. The
  subscription records the reader's position J (`joined_at`) and from then on receives
  every change of the cluster after J, in order. Then the watch replays (position, J] from
  the database, discarding anything after J that a page brings (the buffer has it). A
  replay page shorter than a page was read after J was committed — and commits happen in
  revision order (see `hub.store.revisions`) — so it saw everything ≤ J, and `position` may jump
  to J. A source may cut its pages to what its watch wants, in its read (a cluster's import
  scope, `hub.api.importscope`): a short page then still saw everything of that cut ≤ J,
  which is all the watch sends. Then it sends the buffer, skipping anything ≤ `position`
  (a watch may start ahead of this replica's reader, from a revision another replica
  answered).
* Idle: while the watch is attached with an empty buffer it has been handed everything of
  its cluster up to the reader's position, so `position` may jump there even if none of
  those changes were its cluster's. BOOKMARKs carry `position`: a revision the client can
  safely resume from. The feed-lag metric reads the same property.
* Slow client: a watch whose client falls further behind than its bounded buffer holds
  (events and bytes; its socket is blocked, so the generator is not pulled) is ended: the
  shared reader drops its buffer and it ends with the 410 ERROR event below, so that its
  client relists. It used to be detached and then to replay its backlog from the database
  by itself, so that a briefly slow client need not relist; with 900 watches of clients
  that never read, that made the hub hold 1.7 GB and keep a core busy encoding each event
  once per watch after the clients had gone. A stalled client may hold neither the hub's
  memory nor its CPU (`hub.store.fanout` has the bounds and their reasons).

The answer outside its request. Over uvicorn, once the answer's head has gone out through
the middleware, the watch's connection is taken from the server (`hub.api.takeover`): the
ASGI request returns, freeing everything it held, and the body goes on from one task of
the watch's own over a `WatchConnection`, which hears the client go, pauses with the
socket's write buffer, stays one of the server's connections for its drain and its cap,
and hands a kept-alive connection back to the server after the last chunk. The request
observer records the request when the watch ends (`hub.api.observe.DETACHED`). An answer
that cannot be taken over (an in-process client, HTTP/1.0) is served inside its request,
as before. Watch requests take turns up to their answer's start (`HubApp`,
`HubContext.watch_opens`), so a burst of opens is not every request in flight at once.

Delivery to a waiting watch. While a watch waits attached with everything sent, its
subscription holds a sink (`WatchStream._deliver`): the shared reader hands each line
straight to the watch's connection (`WatchConnection.write`, or `ServerWriter` for an
answer still served by uvicorn) and moves its position, without waking its task; its
BOOKMARKs, and its deadline, are kept by one timer the same way. A taken-over connection
gathers what it is handed in one turn of the event loop and writes it as one chunk, so a
page of changes is one write per watch. A change then costs each of its watchers one
write (docs/reference.md#fleet-scale). Whatever only the task may do — a line to slice, a
connection paused because its client stopped reading, a watch ending — the sink
declines: the line is buffered and the task woken, and everything below holds as it did.

What a watch costs while its client does not read: its share of the shared lines (each
event encoded once by the shared reader, `hub.store.feed.event_line`) up to its buffer's
bounds, and what the server holds for its socket. The second is kept small by sending a
large line in slices of `SLICE_BYTES` (views of the shared bytes): the server stops
taking slices once its socket's write buffer passes its high-water mark (16 KiB in the
hub's server, `hub.serve.HubServer`, which also keeps the kernel's unsent data per
socket small), so an unread 0.9 MB event costs about 32 KB of the hub's memory, not a
copy of the event per watch. Slices of large lines go out a few per turn of the event
loop, for all watches together (`WatchStream._write_turn`), so that pushing one to
hundreds of sockets does not queue every request behind it. And one token (one member
cluster) may hold at most `watch_limit_per_token` watches open on a replica: more is a
429 naming the limit.

Ends: after `timeoutSeconds` (default 300, capped by the settings); when the hub starts
shutting down (the `HubContext.shutdown` event, set on SIGTERM before connections are
drained); when the client disconnects; when its client fell behind its buffer or the
watcher fell behind the retained history mid-stream, with an ERROR event carrying a 410
Status so that the client relists; and when the database fails under the shared reader,
with the 503 ERROR event a watch gave when its own read failed. A revision already too old
when the watch is opened is a plain HTTP 410 before any streaming starts.

The loop checks for its end (deadline, shutdown, client gone) before every event, so a
watch whose client has gone stops at once instead of draining its buffer into a closed
socket (the server's `send` to a gone client returns without waiting, so nothing else
would stop it). `WatchResponse` notices the client going (the server's disconnect message)
and enforces the deadline and the shutdown even while the stream is blocked on a socket
that never drains, where the loop itself cannot run: it then cancels the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import anyio
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from hub.api.auth import Principal
from hub.api.deps import HubContext
from hub.api.observe import DETACHED
from hub.api.params import WatchOptions
from hub.api.status import ApiError, make_status
from hub.api.takeover import WatchConnection, take_over
from hub.logs import fields
from hub.store import DatabaseUnavailable, Feed, Gone, ImportFeed
from hub.store.fanout import BufferLimits, FeedLine, Subscription, Wake, right_sized
from hub.store.feed import event_line
from shared.constants import WATCH_DEFAULT_TIMEOUT_SECONDS
from shared.models import BookmarkMeta, BookmarkObject, Status, WatchEvent

log = logging.getLogger("mcsync.hub.watch")

WATCH_MEDIA_TYPE = "application/x-ndjson"
# For OpenAPI: what a list-or-watch route answers with 200.
WATCH_RESPONSE = {
    "description": "a list, or with `watch=true` a stream of newline-delimited WatchEvents",
    "content": {WATCH_MEDIA_TYPE: {"schema": {"type": "string"}}},
}
PAGE_SIZE = 500
# A line longer than this goes out in slices (module doc): small enough that a socket
# that stopped draining holds little more than its write buffer's high-water mark, large
# enough that a typical event (1-2 KB) is one write.
SLICE_BYTES = 16 * 1024
# How long a stream that should have ended (deadline, shutdown) may stay blocked on a
# socket that does not drain before it is cancelled.
STUCK_GRACE_SECONDS = 1.0

Chunk = bytes | memoryview


def slices(data: bytes) -> Iterator[Chunk]:
    """`data` as it is written: whole, or views of at most SLICE_BYTES (no copies)."""
    if len(data) <= SLICE_BYTES:
        yield data
        return
    view = memoryview(data)
    for offset in range(0, len(data), SLICE_BYTES):
        yield view[offset : offset + SLICE_BYTES]


def bookmark(revision: int) -> WatchEvent:
    return WatchEvent(
        type="BOOKMARK",
        object=BookmarkObject(metadata=BookmarkMeta(resource_version=str(revision))),
    )


_PROBE = 918273645
_BOOKMARK_HEAD, _BOOKMARK_TAIL = event_line(bookmark(_PROBE)).split(str(_PROBE).encode())


def bookmark_line(revision: int) -> bytes:
    """`event_line(bookmark(revision))`, spliced from bytes encoded once: every idle watch
    sends one each `watch_bookmark_seconds`."""
    return _BOOKMARK_HEAD + str(revision).encode() + _BOOKMARK_TAIL


_COUNTERS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _counter(ctx: HubContext, kind: str) -> Any:
    """The `watch_events` child of `kind`, looked up once per metrics registry (the label
    lookup costs more than the count)."""
    metric = ctx.metrics.watch_events
    children = _COUNTERS.get(metric)
    if children is None:
        children = _COUNTERS[metric] = {}
    child = children.get(kind)
    if child is None:
        child = children[kind] = metric.labels(kind)
    return child


class BodyWriter(Protocol):
    """Where the shared reader and a timer write a waiting watch's lines: uvicorn's
    connection (`ServerWriter`), or the watch's own once taken over (`hub.api.takeover`)."""

    def ready(self) -> bool: ...

    def write(self, data: bytes) -> None: ...


class ServerWriter:
    """Writes body chunks of a started response straight to uvicorn's connection, without
    waiting: the server's own `send` (not the middleware's wrappers, which only observe the
    response's start), driven to its end at once when it cannot wait — the connection
    takes writes (not paused at its write buffer's high-water mark) and is open.

    `of` answers None for any other server (an in-process test client): its watches take
    the task's path, each line yielded by `WatchStream.lines`."""

    def __init__(self, send: Send, cycle: Any) -> None:
        self._send = send
        self._cycle = cycle

    @classmethod
    def of(cls, send: Send) -> ServerWriter | None:
        cycle = getattr(send, "__self__", None)
        flow = getattr(cycle, "flow", None)
        if (
            cycle is None
            or not hasattr(flow, "write_paused")
            or not hasattr(cycle, "disconnected")
            or not hasattr(cycle, "response_complete")
            or not hasattr(cycle, "transport")
        ):
            return None
        return cls(send, cycle)

    def ready(self) -> bool:
        """Whether `write` completes now: the server's send waits only on a paused write
        buffer, and does nothing once the client is gone or the response complete."""
        cycle = self._cycle
        return not (cycle.flow.write_paused or cycle.disconnected or cycle.response_complete)

    def write(self, data: bytes) -> None:
        """Send `data` as the next body chunk; only when `ready()`. A chunked answer (every
        watch over HTTP/1.1) is framed here as the server frames it, in one write."""
        cycle = self._cycle
        if cycle.chunked_encoding is True and cycle.scope.get("method") != "HEAD":
            cycle.transport.write(b"%x\r\n%b\r\n" % (len(data), data))
            return
        step = self._send({"type": "http.response.body", "body": data, "more_body": True})
        try:
            step.send(None)  # type: ignore[attr-defined]
        except StopIteration:
            return
        step.close()  # type: ignore[attr-defined]
        raise RuntimeError("the server's send waited although its connection was ready")


def error_event(status: Status) -> WatchEvent:
    return WatchEvent(type="ERROR", object=status)


def _revision(event: WatchEvent) -> int | None:
    rv = event.resource_version
    return int(rv) if rv is not None and rv.isdigit() else None


class WatchSource(Protocol):
    """The feed one watch streams: its history replay and its live subscription."""

    @property
    def label(self) -> str:
        """Names the watch in log lines (its cluster, `*`, or `imports`)."""
        ...

    async def current_revision(self) -> int: ...

    async def changes_since(self, revision: int, limit: int) -> list[WatchEvent]: ...

    def subscribe(
        self, *, limits: BufferLimits, on_overflow: Callable[[], object]
    ) -> Subscription: ...


@dataclass(frozen=True)
class ExportFeedSource:
    """One cluster's exports (every cluster's when `cluster_id` is None)."""

    feed: Feed
    cluster_id: str | None

    @property
    def label(self) -> str:
        return self.cluster_id or "*"

    async def current_revision(self) -> int:
        return await self.feed.current_revision()

    async def changes_since(self, revision: int, limit: int) -> list[WatchEvent]:
        return await self.feed.changes_since(
            revision=revision, cluster_id=self.cluster_id, limit=limit
        )

    def subscribe(self, *, limits: BufferLimits, on_overflow: Callable[[], object]) -> Subscription:
        return self.feed.subscribe(self.cluster_id, limits=limits, on_overflow=on_overflow)


@dataclass(frozen=True)
class ImportFeedSource:
    """The fleet's ServiceImports and EndpointSliceExports: the same for every cluster."""

    feed: ImportFeed

    @property
    def label(self) -> str:
        return "imports"

    async def current_revision(self) -> int:
        return await self.feed.current_revision()

    async def changes_since(self, revision: int, limit: int) -> list[WatchEvent]:
        return await self.feed.changes_since(revision=revision, limit=limit)

    def subscribe(
        self,
        *,
        limits: BufferLimits,
        on_overflow: Callable[[], object],
        scope: Sequence[str] | None = None,
    ) -> Subscription:
        return self.feed.subscribe(scope=scope, limits=limits, on_overflow=on_overflow)


class _Batch:
    """Shared lines gathered for one write (at most about SLICE_BYTES), and their counts
    for the events metric."""

    def __init__(self, ctx: HubContext) -> None:
        self._ctx = ctx
        self._lines: list[bytes] = []
        self._bytes = 0
        self._types: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self._lines)

    def add(self, line: FeedLine) -> bool:
        """Gather `line`; True when the batch is full and must be written now."""
        self._lines.append(line.data)
        self._bytes += len(line.data)
        self._types[line.type] = self._types.get(line.type, 0) + 1
        return self._bytes >= SLICE_BYTES

    def flush(self) -> bytes:
        """The gathered lines as one write (the shared bytes themselves when only one)."""
        for kind, count in self._types.items():
            _counter(self._ctx, kind).inc(count)
        data = self._lines[0] if len(self._lines) == 1 else b"".join(self._lines)
        self._lines, self._bytes, self._types = [], 0, {}
        return data


class WatchStream:
    """One open watch: its position, its deadline, and the loop that feeds the client."""

    def __init__(
        self,
        *,
        source: WatchSource,
        ctx: HubContext,
        start: int,
        timeout_seconds: float,
    ) -> None:
        self.source = source
        self.ctx = ctx
        self._position = start
        self.timeout_seconds = timeout_seconds
        self._loop = asyncio.get_running_loop()
        self.deadline = self._loop.time() + timeout_seconds
        # Set by `WatchResponse` when the client disconnects.
        self.gone = Wake()
        self._sub: Subscription | None = None
        self._idle = False  # waiting, with everything taken from the subscription sent
        self._last_sent = self._loop.time()  # for the BOOKMARK interval
        # Set by `WatchResponse` once the answer has started, when its server allows it:
        # lines that arrive while the watch waits are then written by the shared reader
        # itself (`_deliver`), without waking this watch's task.
        self.writer: BodyWriter | None = None
        self._ticker: asyncio.TimerHandle | None = None  # the next BOOKMARK (`_bookmark_due`)
        # Set by `WatchResponse`: cancels the answer `STUCK_GRACE_SECONDS` from now.
        self.cancel_after_grace: Callable[[], None] | None = None
        settings = ctx.settings
        self._limits = BufferLimits(
            events=settings.watch_buffer_events, bytes=settings.watch_buffer_bytes
        )

    @property
    def position(self) -> int:
        """The revision up to which this watch has sent everything of its cluster (what its
        BOOKMARKs carry and the feed-lag metric reads): while it waits attached with an
        empty buffer, that is the shared reader's position."""
        sub = self._sub
        if self._idle and sub is not None:
            caught = sub.caught_up_to
            if caught is not None:
                return max(self._position, caught)
        return self._position

    def ending(self) -> bool:
        """Whether this watch must stop: deadline passed, hub shutting down, client gone."""
        return (
            self.ctx.shutdown.is_set()
            or self.gone.is_set()
            or self._loop.time() >= self.deadline
        )

    def end(self) -> None:
        """The hub is shutting down (`end_watches`): wake the loop so that it ends, and
        cancel the answer if it is still blocked on its socket after the grace."""
        self.interrupt()
        if self.cancel_after_grace is not None:
            self.cancel_after_grace()

    def _bookmark_due(self, interval: float) -> None:
        """The BOOKMARK of a waiting watch, written by a timer (see `_deliver`); anything
        but a plain write wakes the task, which then sends it itself — at the deadline,
        which the same timer keeps, to end the watch."""
        self._ticker = None
        writer, sub = self.writer, self._sub
        if (
            not self._idle
            or writer is None
            or sub is None
            or sub.buffer
            or not writer.ready()
            or self.ending()
        ):
            self.interrupt()
            return
        try:
            writer.write(bookmark_line(self.position))
        except Exception:
            log.exception("watch write failed", extra=fields(watch=self.source.label))
            self.gone.set()
            self.interrupt()
            return
        _counter(self.ctx, "BOOKMARK").inc()
        self._last_sent = now = self._loop.time()
        self._ticker = self._loop.call_at(
            min(now + interval, self.deadline), self._bookmark_due, interval
        )

    def _deliver(self, line: FeedLine) -> bool:
        """The subscription's sink while this watch waits with everything sent: write
        `line` to the client now (True), or decline (False: the subscription buffers it and
        wakes the task, which writes it as usual). Declines what only the task may do: a
        line to be sliced, a connection that must wait for its client, a watch ending.
        Runs inside the shared reader's dispatch, so it never raises."""
        writer = self.writer
        sub = self._sub
        if (
            writer is None
            or sub is None
            or len(line.data) > SLICE_BYTES
            or not writer.ready()
            or self.ending()
        ):
            return False
        if line.revision <= self._position:
            return True  # the replay sent it
        if not sub.admits(line):
            self._position = line.revision
            return True
        try:
            writer.write(line.data)
        except Exception:
            log.exception("watch write failed", extra=fields(watch=self.source.label))
            self.gone.set()
            self.interrupt()
            return True
        _counter(self.ctx, line.type).inc()
        self._position = line.revision
        self._last_sent = self._loop.time()
        return True

    async def _read(self) -> list[WatchEvent]:
        return await self.source.changes_since(self._position, PAGE_SIZE)

    def _subscribe(self) -> Subscription:
        return self.source.subscribe(
            limits=self._limits, on_overflow=self.ctx.metrics.watches_too_slow.inc
        )

    def interrupt(self) -> None:
        """Wake the loop if it waits, so that it checks for its end (`WatchResponse` calls
        this on the deadline and the hub's shutdown): the wait itself watches one event
        only, since it runs once per change for every open watch."""
        if self._sub is not None:
            self._sub.wake.set()

    async def _wait(self, sub: Subscription, *, seconds: float | None) -> bool:
        """Until `sub` is woken or `seconds` (if any) pass; False when the watch must end."""
        if seconds is None:
            await sub.wake.wait()
            return not (self.ctx.shutdown.is_set() or self.gone.is_set())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(seconds, 0.0)):
                await sub.wake.wait()
        return not (self.ctx.shutdown.is_set() or self.gone.is_set())

    async def _write_turn(self) -> None:
        """Wait for one of the `WRITE_TURNS` slices of large lines the hub writes per turn
        of its event loop. A large line pushed at many watches at once (each write to a
        socket with room returns without waiting) would otherwise hold the loop for all of
        them in one go, and every request behind it; this way they take turns with the
        requests, a few at a time. The turn is given back on the next turn of the loop,
        whether the write completed or blocks on a client that stopped reading."""
        turns = self.ctx.watch_write_turns
        await turns.acquire()
        asyncio.get_running_loop().call_soon(turns.release)

    def _sent(self, event: WatchEvent) -> Iterator[Chunk]:
        """An event this watch encodes itself (replay, BOOKMARK, ERROR), as written."""
        _counter(self.ctx, event.type).inc()
        return slices(right_sized(event_line(event)))

    def _too_slow(self, sub: Subscription) -> Iterator[Chunk]:
        log.info(
            "watch ended: its client fell further behind than its buffer holds",
            extra=fields(watch=self.source.label),
        )
        limits = sub.limits
        return self._sent(
            error_event(
                make_status(
                    410,
                    f"this watch fell more than {limits.events} events or {limits.bytes} "
                    "bytes behind its client, the most the hub keeps for one watch "
                    "(MCSYNC_WATCH_BUFFER_EVENTS, MCSYNC_WATCH_BUFFER_BYTES); relist and "
                    "watch again from the list's resourceVersion",
                )
            )
        )

    async def lines(self, first: Sequence[WatchEvent]) -> AsyncGenerator[Chunk, None]:
        loop = self._loop
        interval = self.ctx.settings.watch_bookmark_seconds
        self._last_sent = loop.time()

        self.ctx.metrics.active_watches.inc()
        self.ctx.open_watches.add(self)
        try:
            for event in first:
                for chunk in self._sent(event):
                    yield chunk
                self._position = max(self._position, _revision(event) or 0)
            if first:
                self._last_sent = loop.time()
            while True:
                if self.ending():
                    return
                sub = self._sub
                if sub is None or sub.detached:
                    if sub is not None and sub.overflowed:
                        for chunk in self._too_slow(sub):
                            yield chunk
                        return
                    if sub is not None and sub.error is not None:
                        raise sub.error
                    if sub is not None:
                        log.info(
                            "the shared feed reader fell behind the history; the watch "
                            "reads its backlog itself",
                            extra=fields(watch=self.source.label),
                        )
                    # (Re)attach, then replay (position, joined_at] from the database: from
                    # joined_at on, the subscription's buffer has every change (module doc).
                    sub = self._sub = self._subscribe()
                    target = sub.joined_at
                    while self._position < target:
                        page = await self._read()
                        done = len(page) < PAGE_SIZE
                        for event in page:
                            rv = _revision(event) or 0
                            if rv > target:
                                done = True  # the rest is in the buffer
                                break
                            if self.ending():
                                return
                            for chunk in self._sent(event):
                                yield chunk
                            self._position = max(self._position, rv)
                        if page:
                            self._last_sent = loop.time()
                        if done:
                            # A short read that started after `target` was committed saw
                            # everything up to it.
                            self._position = max(self._position, target)
                        elif self.ending():
                            return
                    continue

                # Attached: send the shared lines the reader handed over, skipping what the
                # replay already sent, and stop at once when the watch must end.
                # Lines taken together go out as one write of up to SLICE_BYTES: a fleet's
                # convergence hands a watch many lines per wake, and each write costs the
                # server's send path once, whatever its size (docs/reference.md#fleet-scale).
                sub.wake.clear()
                batch = _Batch(self.ctx)
                while (line := sub.take()) is not None:
                    if line.revision <= self._position:
                        continue
                    if len(line.data) > SLICE_BYTES:
                        if batch:
                            yield batch.flush()
                        _counter(self.ctx, line.type).inc()
                        for chunk in slices(line.data):
                            await self._write_turn()
                            yield chunk
                    elif batch.add(line):
                        yield batch.flush()
                    self._position = line.revision
                    self._last_sent = loop.time()
                    if self.ending():
                        return
                if batch:
                    yield batch.flush()
                if sub.detached:
                    continue
                caught = sub.caught_up_to
                if caught is not None:
                    self._position = max(self._position, caught)

                now = loop.time()
                if self.ending():
                    return
                bookmark_due = self._last_sent + interval
                if now >= bookmark_due:
                    _counter(self.ctx, "BOOKMARK").inc()
                    yield bookmark_line(self.position)
                    self._last_sent = now
                    continue
                self._idle = True
                seconds: float | None = min(self.deadline, bookmark_due) - now
                if self.writer is not None:
                    # Changes and BOOKMARKs are written without this task (`_deliver`,
                    # `_bookmark_due`): it wakes for what only it may do, and the timer wakes
                    # it at the deadline (one timer, so no timeout of its own while it waits).
                    sub.direct(self._deliver)
                    self._ticker = loop.call_at(
                        min(bookmark_due, self.deadline), self._bookmark_due, interval
                    )
                    seconds = None
                try:
                    running = await self._wait(sub, seconds=seconds)
                finally:
                    self._idle = False
                    sub.direct(None)
                    if self._ticker is not None:
                        self._ticker.cancel()
                        self._ticker = None
                if not running:
                    return
        except Gone as exc:
            for chunk in self._sent(error_event(make_status(410, str(exc)))):
                yield chunk
        except DatabaseUnavailable as exc:
            self.ctx.metrics.database_errors.inc()
            retry = self.ctx.settings.retry_after_seconds
            status = make_status(503, str(exc), retry_after_seconds=retry)
            for chunk in self._sent(error_event(status)):
                yield chunk
        except Exception:
            log.exception("watch stream failed", extra=fields(watch=self.source.label))
            status = make_status(500, "internal error; the hub's log has the details")
            for chunk in self._sent(error_event(status)):
                yield chunk
        finally:
            if self._sub is not None:
                self._sub.close()
                self._sub = None
            self.ctx.open_watches.discard(self)
            self.ctx.metrics.active_watches.dec()


class WatchSlot:
    """One of the watches a token may hold open (`watch_limit_per_token`); released once."""

    def __init__(self, ctx: HubContext, token_key: str) -> None:
        self._counts = ctx.watches_by_token
        self._key = token_key
        self._held = True
        self._counts[token_key] += 1

    def release(self) -> None:
        if self._held:
            self._held = False
            self._counts[self._key] -= 1
            if self._counts[self._key] <= 0:
                del self._counts[self._key]


def token_key(principal: Principal) -> str:
    """Whose watch it is: a member token is its cluster's; admin and reader are one each."""
    return f"member:{principal.cluster}" if principal.role == "member" else principal.role


def take_watch_slot(ctx: HubContext, principal: Principal) -> WatchSlot:
    """A slot for one more watch of `principal`, or a 429 naming the limit."""
    key = token_key(principal)
    limit = ctx.settings.watch_limit_per_token
    if ctx.watches_by_token[key] >= limit:
        raise ApiError(
            429,
            f"the {principal.describe()} already holds {limit} open watches on this hub "
            f"replica, the most one token may (watch_limit_per_token = {limit}, "
            "MCSYNC_WATCH_LIMIT_PER_TOKEN); close one before opening another",
            retry_after_seconds=ctx.settings.retry_after_seconds,
            headers={"Retry-After": str(ctx.settings.retry_after_seconds)},
        )
    return WatchSlot(ctx, key)


# The scope key under which the app (`hub.app.HubApp`, before any middleware) hands a route
# the server's own `send`. A watch writes its body there: each line would otherwise pass
# through every middleware's `send` wrapper, which only the response's start concerns.
SERVER_SEND = "mcsync.server_send"


def end_watches(ctx: HubContext) -> None:
    """The hub is shutting down (`ctx.shutdown` is set): every open watch ends now, or is
    cancelled after `STUCK_GRACE_SECONDS` if blocked on a socket that does not drain."""
    for stream in list(ctx.open_watches):
        if isinstance(stream, WatchStream):
            stream.end()


def _grace_canceller(bound: asyncio.Timeout) -> Callable[[], None]:
    """What `WatchStream.end` calls: the answer `bound` bounds is cancelled after the grace
    from now."""
    loop = asyncio.get_running_loop()

    def cancel_after_grace() -> None:
        when = loop.time() + STUCK_GRACE_SECONDS
        current = bound.when()
        if current is None or when < current:
            with contextlib.suppress(RuntimeError):  # already expiring
                bound.reschedule(when)

    return cancel_after_grace


async def _close_stream(iterator: Any) -> None:
    if isinstance(iterator, AsyncGenerator):
        with anyio.CancelScope(shield=True):
            await iterator.aclose()


async def _serve(
    stream: WatchStream,
    body: AsyncGenerator[Chunk, None],
    slot: WatchSlot,
    connection: WatchConnection,
) -> None:
    """The body of a watch whose connection was taken over, in the watch's own task (which
    holds no more than this: not the response, not the request)."""
    complete = False
    try:
        async with asyncio.timeout(stream.deadline + STUCK_GRACE_SECONDS) as bound:
            loop = asyncio.get_running_loop()

            def lost() -> None:
                stream.gone.set()
                stream.interrupt()
                with contextlib.suppress(RuntimeError):  # already expiring
                    bound.reschedule(loop.time())

            stream.cancel_after_grace = _grace_canceller(bound)
            connection.attach(on_lost=lost, on_shutdown=stream.end)
            stream.writer = connection
            async for chunk in body:
                await connection.send(chunk)
            complete = not connection.lost
    except TimeoutError:
        pass  # cancelled: the client went, or the stream was stuck past its end
    finally:
        stream.writer = None
        stream.cancel_after_grace = None
        try:
            await _close_stream(body)
        finally:
            slot.release()
            connection.finish(complete=complete)


class WatchResponse(StreamingResponse):
    """The streaming answer of one watch, which also ends it when the stream cannot.

    The start of the answer goes through the middleware (the request observer records its
    status). Then, over uvicorn, the connection is taken over (`hub.api.takeover`) and the
    body goes on in a task of the watch's own (`_serve`): the request returns at once.
    Otherwise (an in-process client, HTTP/1.0) the stream runs in the request's own task,
    its body goes to the server's own `send` (`SERVER_SEND`), and one more task listens for
    the client's disconnect. Either way the client going tells the stream at once
    (`WatchStream.gone`); the deadline plus `STUCK_GRACE_SECONDS` bounds the whole answer,
    and the hub's shutdown (`end_watches`) moves that bound to the grace from now: a stream
    blocked on a socket that does not drain never gets to check them itself. Whatever ends
    it, the stream's generator is closed (its subscription freed at once, not when garbage
    collection gets to it) and the token's watch slot released. An idle watch is memory the
    hub holds per agent (docs/reference.md#fleet-scale).
    """

    def __init__(self, stream: WatchStream, first: Sequence[WatchEvent], slot: WatchSlot) -> None:
        super().__init__(
            stream.lines(first),
            media_type=WATCH_MEDIA_TYPE,
            # Proxies must pass each line on as it comes, and nobody may cache a live feed.
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        self._stream = stream
        self._slot = slot
        # A response that is never sent (the request failed after the route) frees it too.
        self._finalizer = weakref.finalize(self, slot.release)

    async def _client_gone(self, receive: Receive, bound: asyncio.Timeout) -> None:
        await self.listen_for_disconnect(receive)
        self._stream.gone.set()
        self._stream.interrupt()
        with contextlib.suppress(RuntimeError):  # already expiring
            bound.reschedule(asyncio.get_running_loop().time())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream = self._stream
        loop = asyncio.get_running_loop()
        body_send: Send = scope.get(SERVER_SEND) or send
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        connection = take_over(body_send)
        if connection is not None:
            # From here the watch is the connection's and its own task's (`hub.api.takeover`):
            # the request returns, and the observer records it when the watch ends.
            self._finalizer.detach()
            body = cast(AsyncGenerator[Chunk, None], self.body_iterator)
            task = loop.create_task(_serve(stream, body, self._slot, connection))
            connection.task = task
            scope[DETACHED] = connection
            return
        listener: asyncio.Task[None] | None = None
        try:
            async with asyncio.timeout(stream.deadline + STUCK_GRACE_SECONDS) as bound:
                stream.cancel_after_grace = _grace_canceller(bound)
                listener = loop.create_task(self._client_gone(receive, bound))
                stream.writer = ServerWriter.of(body_send)
                async for chunk in self.body_iterator:
                    await body_send(
                        {"type": "http.response.body", "body": chunk, "more_body": True}
                    )
                stream.writer = None
                await body_send({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            pass  # cancelled: the client went, or the stream was stuck past its end
        finally:
            stream.writer = None
            stream.cancel_after_grace = None
            if listener is not None:
                listener.cancel()
            await _close_stream(self.body_iterator)
            self._slot.release()

async def open_watch(
    *,
    source: WatchSource,
    ctx: HubContext,
    options: WatchOptions,
    principal: Principal,
    current: int | None = None,
) -> StreamingResponse:
    """Start a watch of `source`; 429 over the token's limit, Gone (→ 410) or
    DatabaseUnavailable (→ 503) before any streaming. A watch from now (no
    resourceVersion) starts at `current` when the caller has read the current revision
    already (the import watch reads it with its scope), else at one read here."""
    slot = take_watch_slot(ctx, principal)
    try:
        requested = options.timeout_seconds or WATCH_DEFAULT_TIMEOUT_SECONDS
        timeout = min(requested, ctx.settings.watch_max_timeout_seconds)
        if options.resource_version is None:
            start = current if current is not None else await source.current_revision()
            first: list[WatchEvent] = []
        else:
            start = options.resource_version
            first = await source.changes_since(start, PAGE_SIZE)
        stream = WatchStream(source=source, ctx=ctx, start=start, timeout_seconds=timeout)
        return WatchResponse(stream, first, slot)
    except BaseException:
        slot.release()
        raise
