"""The change feed over HTTP (SPEC §4.3): `…/serviceexports?watch=true&resourceVersion=N`.

The answer is a stream of newline-delimited JSON `WatchEvent`s: first every retained
change after N (read from the store's history a page at a time), then, held open, each
change as it commits — on whichever hub replica took the write, because the store's
`Feed.wait_for_change` is woken by in-process commits and PostgreSQL NOTIFY alike. There
is no sleeping poll loop: an idle watch costs one waiting task.

Position bookkeeping (the subtle part). `position` is the global revision up to which this
watcher has seen *everything relevant*. Events move it to their own revision. A wake-up
from `wait_for_change` answers a revision M that is committed, and commits happen in
revision order (see `hub.store.feed`), so a history read that starts after the wake-up
sees every change ≤ M; once such a read has been fully delivered (fewer than a page),
`position` may jump to M even if none of those changes belonged to this watch's cluster.
That keeps a filtered watch from re-reading the same stretch of history on every wake-up,
and makes BOOKMARK events carry a revision the client can safely resume from.

Ends: after `timeoutSeconds` (default 300, capped by the settings); when the hub starts
shutting down (the `HubContext.shutdown` event, set on SIGTERM before connections are
drained); when the client disconnects (Starlette cancels the generator); and, when the
watcher fell behind the retained history mid-stream, with an ERROR event carrying a 410
Status so that the client relists. A revision already too old when the watch is opened is
a plain HTTP 410 before any streaming starts.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence

from fastapi.responses import StreamingResponse

from hub.api.deps import HubContext
from hub.api.errors import make_status
from hub.api.params import WatchOptions
from hub.logs import fields
from hub.store import DatabaseUnavailable, Gone, Store
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
        self.position = start
        self.timeout_seconds = timeout_seconds

    async def _read(self) -> list[WatchEvent]:
        return await self.store.feed.changes_since(
            revision=self.position, cluster_id=self.cluster_id, limit=PAGE_SIZE
        )

    async def _wait(self, *, seconds: float) -> int | None:
        """The newest committed revision (> position, or = position on timeout); None on
        hub shutdown."""
        waiter = asyncio.ensure_future(
            self.store.feed.wait_for_change(after=self.position, timeout=seconds)
        )
        stopper = asyncio.ensure_future(self.ctx.shutdown.wait())
        try:
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiter, stopper):
                if not task.done():
                    task.cancel()
        if self.ctx.shutdown.is_set() or not waiter.done() or waiter.cancelled():
            return None
        return waiter.result()

    def _sent(self, event: WatchEvent) -> bytes:
        self.ctx.metrics.watch_events.labels(event.type).inc()
        return encode(event)

    async def lines(self, first: Sequence[WatchEvent]) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_seconds
        interval = self.ctx.settings.watch_bookmark_seconds
        last_sent = loop.time()
        pending: Sequence[WatchEvent] = first
        # The revision `position` may jump to once `pending` is fully delivered (see doc).
        caught_up_to: int | None = None
        self.ctx.metrics.active_watches.inc()
        self.ctx.open_watches.add(self)
        try:
            while True:
                for event in pending:
                    yield self._sent(event)
                    rv = event.resource_version
                    if rv is not None and rv.isdigit():
                        self.position = max(self.position, int(rv))
                if pending:
                    last_sent = loop.time()
                if len(pending) >= PAGE_SIZE:
                    # More history is waiting: read on without waiting for a wake-up.
                    if self.ctx.shutdown.is_set() or loop.time() >= deadline:
                        return
                    pending, caught_up_to = await self._read(), None
                    continue
                if caught_up_to is not None:
                    self.position = max(self.position, caught_up_to)
                pending, caught_up_to = (), None

                now = loop.time()
                if now >= deadline or self.ctx.shutdown.is_set():
                    return
                bookmark_due = last_sent + interval
                if now >= bookmark_due:
                    yield self._sent(bookmark(self.position))
                    last_sent = now
                    continue
                newest = await self._wait(seconds=min(deadline, bookmark_due) - now)
                if newest is None:
                    return
                if newest > self.position:
                    pending, caught_up_to = await self._read(), newest
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
