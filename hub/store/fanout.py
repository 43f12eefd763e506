"""One shared reader of the change feed per hub replica, fanned out in memory (SPEC §4.3).

Before this, every commit woke every open watch and each one re-read the history with its
own query: N watches cost N queries per commit, and at 1,000 agents the hub never caught
up (docs/benchmarks.md §5). Now one task per `Store` (= per replica) does the reading:

    wake-up (in-process commit, or PostgreSQL NOTIFY from any replica)
      → read the history after `position`, once, for every cluster, a page at a time
      → append each change to the bounded buffer of every subscriber of its cluster
        (and of every fleet-wide subscriber), waking only those.

So a commit costs one history read per replica (fewer: wake-ups that arrive while a read is
in flight are served by the next one), whatever the number of watches. With nobody
subscribed the reader does not read at all; it only moves its position.

The invariant (single event loop: everything between two awaits is atomic). `position` is
a revision P such that every change ≤ P has been appended to every subscriber that was
subscribed when it was read, and no change > P has been appended to anyone. A batch is
appended and P moved in one step, with no await in between. Therefore a `Subscription`
made when P = J receives, in revision order, exactly the changes of its cluster after J:
`joined_at` is J. The watch (hub.api.watch) replays (its position, J] from the database
itself, as before, and then takes the buffer, skipping anything at or below its position.
P is always a committed revision, so that replay sees everything ≤ J.

A short page read after a wake-up to revision M lets P jump to M (commits happen in
revision order, see `hub.store.feed`); a subscriber whose buffer is empty has therefore
seen everything of its cluster up to P, which is what its BOOKMARKs and the feed-lag metric
report.

A subscriber whose buffer is full (a slow client: its stream is blocked on the socket) is
*detached*: its buffer is dropped, it is removed from the registry and woken. The reader
never waits for it and the other subscribers never notice. The watch then falls back to the
database on its own: it subscribes again (a new J), replays from its own position to J with
its own paged query, and goes on from the new buffer — or, if its position has meanwhile
been pruned from the history, ends with the 410 ERROR event so that its client relists.
Falling back rather than ending at once because a client that is only briefly slow (a burst
of a few thousand changes from one full-state sync) should not have to relist: a relist
re-reads and re-reconciles every export of the cluster, and a burst would make a whole fleet
relist at once. The fallback costs that watch one read per page of its own backlog, bounded
by the retained history, and nothing per commit.

When the reader itself falls behind the retained history (Gone), every subscriber is
detached the same way and P jumps to the newest known revision; each watch then resolves its
own position against the history (replay or 410). When the database fails under the reader,
every subscriber is told (`error`) and its watch ends with the same 503 ERROR event it gave
when it read for itself; the reader retries with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from hub.store.errors import DatabaseUnavailable, Gone
from hub.store.notify import ChangeNotifier
from shared.models import WatchEvent

log = logging.getLogger(__name__)

PAGE_SIZE = 500
# Per-subscriber buffer bound, in events. A watch that falls this far behind its own socket
# reads from the database instead (see the module doc). Events are shared between buffers.
# 1,000 is ten times the burst of a typical full-state sync (100 exports); a buffer holds
# (revision, shared event) pairs, about 120 KB when full.
BUFFER_LIMIT = 1000
_IDLE_CHECK_SECONDS = 5.0
_RETRY_FIRST_SECONDS = 0.1
_RETRY_MAX_SECONDS = 5.0


class FeedRow(Protocol):
    """One change as the reader sees it: its cluster, its revision, and how to decode it."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def revision(self) -> int: ...

    def event(self) -> WatchEvent: ...


ReadPage = Callable[[int, int], Awaitable[Sequence[FeedRow]]]


class Subscription:
    """One watch's place in the fan-out: its buffer and the signal that wakes it."""

    def __init__(self, *, cluster_id: str | None, joined_at: int, fanout: FeedFanout) -> None:
        self.cluster_id = cluster_id
        # Every change of this cluster after `joined_at` reaches `buffer` (until detached).
        self.joined_at = joined_at
        self.buffer: deque[tuple[int, WatchEvent]] = deque()
        self.wake = asyncio.Event()
        self.detached = False
        self.error: BaseException | None = None
        self._fanout = fanout

    @property
    def caught_up_to(self) -> int | None:
        """The revision up to which this subscriber has been handed everything: the reader's
        position while attached with an empty buffer; None otherwise."""
        if self.detached or self.buffer:
            return None
        return self._fanout.position

    def close(self) -> None:
        self._fanout.unsubscribe(self)


class FeedFanout:
    """The per-replica feed reader and its subscriber registry (see the module doc)."""

    def __init__(
        self,
        *,
        notifier: ChangeNotifier,
        read_page: ReadPage,
        page_size: int = PAGE_SIZE,
        buffer_limit: int = BUFFER_LIMIT,
    ) -> None:
        self._notifier = notifier
        self._read_page = read_page
        self.page_size = page_size
        self.buffer_limit = buffer_limit
        self.position = 0
        self.reads = 0  # history reads made by the reader (tests and diagnostics)
        self.overflows = 0  # subscribers detached for a full buffer
        self._subscribers: dict[str | None, set[Subscription]] = {}
        self._count = 0
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def subscriber_count(self) -> int:
        return self._count

    def subscribe(self, cluster_id: str | None) -> Subscription:
        """Subscribe to the changes of `cluster_id` (None: every cluster) after the reader's
        current position, which the subscription records as `joined_at`."""
        if self._closed:
            raise DatabaseUnavailable("the hub's store is closed")
        if self._task is None or self._task.done():
            self._start()
        sub = Subscription(cluster_id=cluster_id, joined_at=self.position, fanout=self)
        self._subscribers.setdefault(cluster_id, set()).add(sub)
        self._count += 1
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        group = self._subscribers.get(sub.cluster_id)
        if group is not None and sub in group:
            group.discard(sub)
            self._count -= 1
            if not group:
                del self._subscribers[sub.cluster_id]
        sub.detached = True
        sub.buffer.clear()

    def _start(self) -> None:
        # Nothing before this was owed to anyone: start at the newest revision known.
        self.position = max(self.position, self._notifier.known)
        # A fresh context: the reader outlives the request that happened to start it, and must
        # not carry that request's trace or log context.
        self._task = asyncio.create_task(
            self._run(), name="mcsync-feed-reader", context=contextvars.Context()
        )

    async def close(self) -> None:
        self._closed = True
        self._detach_all(error=DatabaseUnavailable("the hub's store is closed"))
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    # --- the reader -----------------------------------------------------------------

    async def _run(self) -> None:
        retry = _RETRY_FIRST_SECONDS
        while not self._closed:
            if not self._subscribers:
                # Nobody to feed: a later subscriber replays from the database up to here.
                self.position = max(self.position, self._notifier.known)
                await self._notifier.wait(after=self.position, timeout=_IDLE_CHECK_SECONDS)
                continue
            target = self._notifier.known
            if target <= self.position:
                await self._notifier.wait(after=self.position, timeout=_IDLE_CHECK_SECONDS)
                continue
            try:
                self.reads += 1
                rows = await self._read_page(self.position, self.page_size)
                # From here to the position update: no await (the invariant, module doc).
                self._dispatch(rows)
            except asyncio.CancelledError:
                raise
            except Gone as exc:
                log.warning("feed reader fell behind the history; watches resync: %s", exc)
                self._detach_all(error=None)
                self.position = max(self.position, self._notifier.known)
                continue
            except Exception as exc:
                # The watches end as they did when each read for itself: 503 for the database,
                # 500 for anything else (e.g. a record that does not decode).
                log.warning("feed reader failed; open watches end: %s", exc)
                self._detach_all(error=exc)
                await asyncio.sleep(retry)
                retry = min(retry * 2, _RETRY_MAX_SECONDS)
                continue
            retry = _RETRY_FIRST_SECONDS
            if rows:
                self.position = max(self.position, rows[-1].revision)
            if len(rows) < self.page_size:
                self.position = max(self.position, target)

    def _dispatch(self, rows: Sequence[FeedRow]) -> None:
        fleet = self._subscribers.get(None)
        for row in rows:
            own = self._subscribers.get(row.cluster_id)
            if not own and not fleet:
                continue
            event = row.event()  # decoded once, shared by every buffer
            for group in (own, fleet):
                if not group:
                    continue
                for sub in list(group):
                    if len(sub.buffer) >= self.buffer_limit:
                        self.overflows += 1
                        self.unsubscribe(sub)
                        sub.wake.set()
                        continue
                    sub.buffer.append((row.revision, event))
                    sub.wake.set()

    def _detach_all(self, *, error: BaseException | None) -> None:
        for group in list(self._subscribers.values()):
            for sub in list(group):
                self.unsubscribe(sub)
                sub.error = error
                sub.wake.set()
