"""The change feed over HTTP (SPEC §4.3): `…/serviceexports?watch=true&resourceVersion=N`.

The answer is a stream of newline-delimited JSON `WatchEvent`s: first every retained
change after N, read from the store's history a page at a time with this watch's own
query (the replay), then, held open, each change as it commits — on whichever hub replica
took the write. Live changes do not come from a query of this watch: the replica's one
shared feed reader (`hub.store.fanout`), woken by in-process commits and PostgreSQL NOTIFY
alike, reads each new stretch of history once for every watch and appends the changes of
this watch's cluster to its subscription's bounded buffer. A commit therefore costs one
history read per replica, not one per open watch, and only the watches of the changed
cluster wake up. An idle watch costs one waiting task.

Position bookkeeping (the subtle part). `position` is the global revision up to which this
watcher has sent *everything relevant*; events move it to their own revision.

* Switching from replay to live without gap or duplicate: the watch subscribes FIRST. The
  subscription records the reader's position J (`joined_at`) and from then on receives
  every change of the cluster after J, in order. Then the watch replays (position, J] from
  the database, discarding anything after J that a page brings (the buffer has it). A
  replay page shorter than a page was read after J was committed — and commits happen in
  revision order (see `hub.store.feed`) — so it saw everything ≤ J, and `position` may jump
  to J. Then it sends the buffer, skipping anything ≤ `position` (a watch may start ahead
  of this replica's reader, from a revision another replica answered).
* Idle: while the watch is attached with an empty buffer it has been handed everything of
  its cluster up to the reader's position, so `position` may jump there even if none of
  those changes were its cluster's. BOOKMARKs carry `position`: a revision the client can
  safely resume from. The feed-lag metric reads the same property.
* Slow client: a watch whose buffer fills up (its socket is blocked, the generator is not
  pulled) is detached by the reader, which never waits for it. When it next runs it
  subscribes again and replays its backlog from the database itself, as on open — or, if
  that backlog has been pruned meanwhile, ends with the 410 ERROR event below. We fall back
  to the database rather than ending it at once so that a briefly slow client (one big
  full-state sync) does not have to relist, and a burst does not make a fleet relist at
  once; see `hub.store.fanout` for the trade-off.

Ends: after `timeoutSeconds` (default 300, capped by the settings); when the hub starts
shutting down (the `HubContext.shutdown` event, set on SIGTERM before connections are
drained); when the client disconnects (Starlette cancels the generator); when the watcher
fell behind the retained history mid-stream, with an ERROR event carrying a 410 Status so
that the client relists; and when the database fails under the shared reader, with the
503 ERROR event a watch gave when its own read failed. A revision already too old when
the watch is opened is a plain HTTP 410 before any streaming starts.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Sequence

from fastapi.responses import StreamingResponse

from hub.api.deps import HubContext
from hub.api.errors import make_status
from hub.api.params import WatchOptions
from hub.logs import fields
from hub.store import DatabaseUnavailable, Gone, Store
from hub.store.fanout import Subscription
from shared.constants import WATCH_DEFAULT_TIMEOUT_SECONDS
from shared.models import BookmarkMeta, BookmarkObject, Status, WatchEvent, to_wire

log = logging.getLogger("mcsync.hub.watch")

WATCH_MEDIA_TYPE = "application/x-ndjson"
PAGE_SIZE = 500


def encode(event: WatchEvent) -> bytes:
    return (json.dumps(to_wire(event), separators=(",", ":")) + "\n").encode("utf-8")


def bookmark(revision: int) -> WatchEvent:
    return WatchEvent(
        type="BOOKMARK",
        object=BookmarkObject(metadata=BookmarkMeta(resource_version=str(revision))),
    )


def error_event(status: Status) -> WatchEvent:
    return WatchEvent(type="ERROR", object=status)


def _revision(event: WatchEvent) -> int | None:
    rv = event.resource_version
    return int(rv) if rv is not None and rv.isdigit() else None


class WatchStream:
    """One open watch: its position, its deadline, and the loop that feeds the client."""

    def __init__(
        self,
        *,
        store: Store,
        ctx: HubContext,
        cluster_id: str | None,
        start: int,
        timeout_seconds: float,
    ) -> None:
        self.store = store
        self.ctx = ctx
        self.cluster_id = cluster_id
        self._position = start
        self.timeout_seconds = timeout_seconds
        self._sub: Subscription | None = None
        self._idle = False  # waiting, with everything taken from the subscription sent

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

    async def _read(self) -> list[WatchEvent]:
        return await self.store.feed.changes_since(
            revision=self._position, cluster_id=self.cluster_id, limit=PAGE_SIZE
        )

    async def _wait(self, sub: Subscription, *, seconds: float) -> bool:
        """Until `sub` is woken or `seconds` pass; False on hub shutdown."""
        waiter = asyncio.ensure_future(sub.wake.wait())
        stopper = asyncio.ensure_future(self.ctx.shutdown.wait())
        try:
            await asyncio.wait(
                {waiter, stopper}, timeout=max(seconds, 0.0), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (waiter, stopper):
                if not task.done():
                    task.cancel()
        return not self.ctx.shutdown.is_set()

    def _sent(self, event: WatchEvent) -> bytes:
        self.ctx.metrics.watch_events.labels(event.type).inc()
        return encode(event)

    async def lines(self, first: Sequence[WatchEvent]) -> AsyncGenerator[bytes, None]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_seconds
        interval = self.ctx.settings.watch_bookmark_seconds
        last_sent = loop.time()

        def ending() -> bool:
            return self.ctx.shutdown.is_set() or loop.time() >= deadline

        self.ctx.metrics.active_watches.inc()
        self.ctx.open_watches.add(self)
        try:
            for event in first:
                yield self._sent(event)
                self._position = max(self._position, _revision(event) or 0)
            if first:
                last_sent = loop.time()
            while True:
                if ending():
                    return
                sub = self._sub
                if sub is None or sub.detached:
                    if sub is not None and sub.error is not None:
                        raise sub.error
                    if sub is not None:
                        log.info(
                            "watch fell behind the shared feed; reading its backlog itself",
                            extra=fields(cluster=self.cluster_id or "*"),
                        )
                    # (Re)attach, then replay (position, joined_at] from the database: from
                    # joined_at on, the subscription's buffer has every change (module doc).
                    sub = self._sub = self.store.feed.subscribe(self.cluster_id)
                    target = sub.joined_at
                    while self._position < target:
                        page = await self._read()
                        done = len(page) < PAGE_SIZE
                        for event in page:
                            rv = _revision(event) or 0
                            if rv > target:
                                done = True  # the rest is in the buffer
                                break
                            yield self._sent(event)
                            self._position = max(self._position, rv)
                        if page:
                            last_sent = loop.time()
                        if done:
                            # A short read that started after `target` was committed saw
                            # everything up to it.
                            self._position = max(self._position, target)
                        elif ending():
                            return
                    continue

                # Attached: send what the shared reader handed over, skipping what the
                # replay already sent.
                sub.wake.clear()
                while sub.buffer:
                    rv, event = sub.buffer.popleft()
                    if rv <= self._position:
                        continue
                    yield self._sent(event)
                    self._position = rv
                    last_sent = loop.time()
                if sub.detached:
                    continue
                caught = sub.caught_up_to
                if caught is not None:
                    self._position = max(self._position, caught)

                now = loop.time()
                if ending():
                    return
                bookmark_due = last_sent + interval
                if now >= bookmark_due:
                    yield self._sent(bookmark(self.position))
                    last_sent = now
                    continue
                self._idle = True
                try:
                    running = await self._wait(sub, seconds=min(deadline, bookmark_due) - now)
                finally:
                    self._idle = False
                if not running:
                    return
        except Gone as exc:
            yield self._sent(error_event(make_status(410, str(exc))))
        except DatabaseUnavailable as exc:
            self.ctx.metrics.database_errors.inc()
            retry = self.ctx.settings.retry_after_seconds
            yield self._sent(error_event(make_status(503, str(exc), retry_after_seconds=retry)))
        except Exception:
            log.exception("watch stream failed", extra=fields(cluster=self.cluster_id or "*"))
            yield self._sent(
                error_event(make_status(500, "internal error; the hub's log has the details"))
            )
        finally:
            if self._sub is not None:
                self._sub.close()
                self._sub = None
            self.ctx.open_watches.discard(self)
            self.ctx.metrics.active_watches.dec()


async def open_watch(
    *, store: Store, ctx: HubContext, cluster_id: str | None, options: WatchOptions
) -> StreamingResponse:
    """Start a watch; Gone (→ 410) or DatabaseUnavailable (→ 503) before any streaming."""
    requested = options.timeout_seconds or WATCH_DEFAULT_TIMEOUT_SECONDS
    timeout = min(requested, ctx.settings.watch_max_timeout_seconds)
    if options.resource_version is None:
        start = await store.feed.current_revision()
        first: list[WatchEvent] = []
    else:
        start = options.resource_version
        first = await store.feed.changes_since(
            revision=start, cluster_id=cluster_id, limit=PAGE_SIZE
        )
    stream = WatchStream(
        store=store, ctx=ctx, cluster_id=cluster_id, start=start, timeout_seconds=timeout
    )
    return StreamingResponse(
        stream.lines(first),
        media_type=WATCH_MEDIA_TYPE,
        # Proxies must pass each line on as it comes, and nobody may cache a live feed.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
