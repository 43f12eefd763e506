"""One shared reader of a change feed per hub replica, fanned out in memory
(docs/reference.md#change-feeds).

Before this, every commit woke every open watch and each one re-read the history with its
own query: N watches cost N queries per commit, and at 1,000 agents the hub never caught
up (docs/benchmarks.md §5). Now one task per feed and `Store` (= per replica) does the
reading:

    wake-up (in-process commit, or PostgreSQL NOTIFY from any replica)
      → read the rows after `position`, once, for every subscriber, a page at a time
      → encode each row that somebody watches to its wire line, ONCE
      → append that one line to the bounded buffer of every subscriber of its key (a
        cluster) and of every subscriber of everything (key None), waking only those.

So a commit costs one history read and one encoding per replica, whatever the number of
watches (fewer: wake-ups that arrive while a read is in flight are served by the next one).
With nobody subscribed the reader does not read at all; it only moves its position.

A subscriber may also hold a *sink* (`Subscription.direct`): while its buffer is empty, a
line is offered to the sink first, which writes it to the watch's client at once or
declines (then the line is buffered and the subscriber woken as above). `hub.api.watch`
sets one while its watch waits, so a change reaches a waiting watch as one write, with no
task woken for it.

Nothing here knows what a row is: `FeedFanout` takes its row source (`read_page`) and
routes by each row's `key`, so the export feed (keys are clusters) and the import feed
(keys are namespaces) are two instances of this class, with the same guarantees.

A subscriber names what it wants: one key (a cluster's export watch), every key (None: an
unscoped import watch), or a scope of namespaces (`subscribe(scope=…)`: a cluster with
`spec.importNamespaces`). A scope of plain names is indexed under each name, so a change
reaches exactly the subscribers whose scope holds its key, in a dictionary lookup; a scope
with `*` globs is grouped with every subscriber of the same patterns, and each change asks
each distinct group once. What a change costs the reader is therefore its own subscribers,
never the replica's other watches: at 10,000 clusters each importing 10 of 1,000
namespaces, one change is ~100 deliveries, not 10,000 looks (docs/reference.md#fleet-scale).

The invariant (single event loop: everything between two awaits is atomic). `position` is
a revision P such that every change ≤ P has been appended to every subscriber that was
subscribed when it was read, and no change > P has been appended to anyone. A batch is
appended and P moved in one step, with no await in between. Therefore a `Subscription`
made when P = J receives, in revision order, exactly the changes of its key after J:
`joined_at` is J. The watch (hub.api.watch) replays (its position, J] from the database
itself, and then takes the buffer, skipping anything at or below its position. P is
always a committed revision, so that replay sees everything ≤ J.

A short page read after a wake-up to revision M lets P jump to M (commits happen in
revision order, see `hub.store.revisions`); a subscriber whose buffer is empty has therefore
seen everything of its key up to P, which is what its BOOKMARKs and the feed-lag metric
report.

Slow subscribers are ENDED, not carried. Each buffer is bounded in events AND
in bytes (`BufferLimits`); a subscriber whose next line would pass either bound is
*overflowed*: its buffer is dropped at once, it is removed from the registry and woken,
and its watch ends with an ERROR event carrying a 410 Status, so that its client relists.
The reader never waits for anyone and the other subscribers never notice. This replaced
a fallback in which an overflowed watch re-read its backlog from the database by itself:
900 watches of clients that never read, fed 0.9 MB events, then made the hub encode every
event once per watch, grow by 1.7 GB and keep a core busy long after the clients had gone.
A stalled client may hold neither the hub's memory nor its CPU: what one costs is now its
bounded buffer of lines it shares with everyone else, until it is ended. The price is that
a client which is only briefly too slow relists, which is why the bounds are generous
(`hub.settings`: 1,000 events, ten times the burst of a typical full-state sync, and
4 MiB; an empty buffer always takes one line, however large, so no event is too big to
be watched at all).

When the reader itself falls behind the retained history (Gone), every subscriber is
detached (not overflowed) and P jumps to the newest known revision; each watch then
resolves its own position against the history (replay or 410).

A failed read ends nobody's watch at once. The reader reads over connections of its own
(`reading_for_fanout`: the store routes its reads to a small pool kept for the replica's
readers, `hub.store.db.make_reader_engine`), so a request pool exhausted by a burst of
writes or re-opening watches cannot starve it; and a read that fails anyway (a dropped
connection, a server restarting) is retried with `shared.backoff` while every subscriber
stays attached with P unmoved, so its watch simply hears the changes late. Ending every
watch of the replica on the first failure made them all re-open together, each with its
own reads (scope, revision, replay), which exhausted the pool again: a cycle that kept a
large fleet from converging (docs/benchmarks.md §16). Only when the reads have
failed for longer than `failing_grace` is every subscriber told (`error`): its watch ends
with the 503 ERROR event it gave when it read for itself, so that its client resumes from
a replica that can read. A failure that is not the database's (a record that does not
decode) ends them at once, as before: retrying would meet it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hub.store.errors import DatabaseUnavailable, Gone
from hub.store.notify import ChangeNotifier
from shared import scope
from shared.backoff import Backoff, Retries

log = logging.getLogger(__name__)

PAGE_SIZE = 500
_IDLE_CHECK_SECONDS = 5.0
# After a failed read: the first retry within 0.1 s, then up to 5 s apart.
_RETRY = Backoff(base=0.1, cap=5.0)
# How long the reads may keep failing before the watches end (see the module doc): longer
# than a dropped connection or a pool's burst, shorter than a client's patience.
FAILING_GRACE_SECONDS = 30.0

_FANOUT_READER: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mcsync_fanout_reader", default=False
)


def reading_for_fanout() -> bool:
    """True inside a shared reader's task: the store gives its reads the connections kept
    for the readers (`hub.store.context.StoreContext.read`), never the request pool's."""
    return _FANOUT_READER.get()


def right_sized(data: bytes) -> bytes:
    """`data` in an allocation of its own length, for bytes that are kept a while.

    orjson hands back its working buffer as the result: measured with orjson 3.13, a
    1 KB line holds an 8 KB allocation and a 260 KB one 4 MB (`bench.stalled_watches`).
    A shared line sits in the buffers of every watch that has not sent it yet, so its
    allocation, not its length, is what stalled watches hold; `BufferLimits.bytes` counts
    lengths and would bound nothing. One copy per encoded line and replica is the price.
    """
    return bytes(memoryview(data))


@dataclass(frozen=True)
class BufferLimits:
    """How far one subscriber may fall behind before it is ended (see the module doc)."""

    events: int = 1000
    bytes: int = 4 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.events < 1 or self.bytes < 1:
            raise ValueError(f"buffer limits must be at least 1, got {self}")


@dataclass(frozen=True, slots=True)
class FeedLine:
    """One change as every watch sends it: encoded once, the same object in every buffer."""

    revision: int
    type: str  # the event type (ADDED, MODIFIED, DELETED), for the watch's metrics
    data: bytes  # the newline-terminated JSON of the WatchEvent


class FeedRow(Protocol):
    """One change as the reader sees it: the key it is routed by, its revision, its line."""

    @property
    def key(self) -> str | None: ...

    @property
    def revision(self) -> int: ...

    @property
    def type(self) -> str: ...

    def line(self) -> bytes: ...


ReadPage = Callable[[int, int], Awaitable[Sequence[FeedRow]]]


class Wake:
    """`asyncio.Event` for the one task that waits on it (a watch's), without the deque of
    waiters each Event keeps: every open watch holds one, and an idle watch is memory the
    hub holds per agent (docs/reference.md#fleet-scale)."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if not self._set:
            self._set = True
            waiter = self._waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> bool:
        if self._set:
            return True
        if self._waiter is not None:
            raise RuntimeError("a Wake has one waiter at a time")
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None
        return True


class Subscription:
    """One watch's place in the fan-out: its bounded buffer and the signal that wakes it."""

    def __init__(
        self,
        *,
        key: str | None,
        joined_at: int,
        fanout: FeedFanout,
        limits: BufferLimits,
        on_overflow: Callable[[], object] | None = None,
        scope: tuple[str, ...] | None = None,
    ) -> None:
        self.key = key
        # A scope of namespaces instead of one key (see the module doc); None: `key` alone.
        self.scope = scope
        # Every change of this key after `joined_at` reaches `buffer` (until detached).
        self.joined_at = joined_at
        self.limits = limits
        # A list, not a deque: an empty deque holds a block of 64 slots, and most buffers
        # of idle watches are empty; a bounded buffer's `pop(0)` costs little.
        self.buffer: list[FeedLine] = []
        self.buffered_bytes = 0
        self.wake = Wake()
        self.detached = False
        # Detached because the buffer was full: the watch must end (410), not catch up.
        self.overflowed = False
        self.error: BaseException | None = None
        # While its watch waits with everything sent, a line can go straight to its client:
        # `sink` writes it (True) or declines (False: it is buffered and the watch woken).
        # Delivering a change is then one write, not a wake of the watch's task.
        self.sink: Callable[[FeedLine], bool] | None = None
        self._on_overflow = on_overflow
        self._fanout = fanout

    @property
    def caught_up_to(self) -> int | None:
        """The revision up to which this subscriber has been handed everything: the reader's
        position while attached with an empty buffer; None otherwise."""
        if self.detached or self.buffer:
            return None
        return self._fanout.position

    def take(self) -> FeedLine | None:
        """The oldest line not yet taken, or None when the buffer is empty."""
        if not self.buffer:
            return None
        line = self.buffer.pop(0)
        self.buffered_bytes -= len(line.data)
        return line

    def direct(self, sink: Callable[[FeedLine], bool] | None) -> None:
        """Set (or clear, None) the `sink` lines are offered to while the buffer is empty."""
        self.sink = sink

    def admits(self, line: FeedLine) -> bool:
        """Whether this subscriber's client gets `line` (a wrapper may filter; see
        `hub.api.importselection`); called once per line, in order."""
        return True

    def offer(self, line: FeedLine) -> bool:
        """Append `line`; False (and nothing appended) when that would pass a bound. An empty
        buffer takes any one line, so that no single event is too large to be watched.
        With an empty buffer and a `sink`, the sink is offered the line first."""
        if not self.buffer:
            sink = self.sink
            if sink is not None and sink(line):
                self._fanout.written += 1
                return True
        elif (
            len(self.buffer) >= self.limits.events
            or self.buffered_bytes + len(line.data) > self.limits.bytes
        ):
            return False
        self.buffer.append(line)
        self.buffered_bytes += len(line.data)
        self.wake.set()
        return True

    def close(self) -> None:
        self.sink = None
        self._fanout.unsubscribe(self)

    def _overflow(self) -> None:
        self.overflowed = True
        self._fanout.unsubscribe(self)  # drops the buffer now: its memory is not held
        self.wake.set()
        if self._on_overflow is not None:
            self._on_overflow()


class FeedFanout:
    """The per-replica reader of one feed and its subscriber registry (see the module doc)."""

    def __init__(
        self,
        *,
        notifier: ChangeNotifier,
        read_page: ReadPage,
        page_size: int = PAGE_SIZE,
        limits: BufferLimits | None = None,
        name: str = "feed",
        failing_grace: float = FAILING_GRACE_SECONDS,
    ) -> None:
        self._notifier = notifier
        self._read_page = read_page
        self.page_size = page_size
        self.limits = limits or BufferLimits()
        self.name = name
        # Seconds of failed reads before the watches end with the error (module doc).
        self.failing_grace = failing_grace
        self.position = 0
        self.reads = 0  # history reads made by the reader (tests and diagnostics)
        self.read_failures = 0  # reads that failed and were retried (diagnostics)
        self.encodings = 0  # lines encoded by the reader (tests, diagnostics, metrics)
        self.deliveries = 0  # lines handed to a subscriber's buffer (the fan-out's work)
        self.written = 0  # of those, lines its sink wrote to the client at once (no wake)
        self.overflows = 0  # subscribers ended for a full buffer
        self._subscribers: dict[str | None, set[Subscription]] = {}
        # Subscribers whose scope has `*` globs, by their patterns: asked once per group.
        self._patterned: dict[tuple[str, ...], set[Subscription]] = {}
        self._live: set[Subscription] = set()  # every attached subscription
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def subscriber_count(self) -> int:
        return len(self._live)

    def subscribe(
        self,
        key: str | None = None,
        *,
        scope: Sequence[str] | None = None,
        limits: BufferLimits | None = None,
        on_overflow: Callable[[], object] | None = None,
    ) -> Subscription:
        """Subscribe to the changes of `key` (None: every key), or of every key `scope`
        allows (names and `*` globs, `shared.scope`), after the reader's current position,
        which the subscription records as `joined_at`. `on_overflow` is called when the
        subscription is ended for a full buffer (the hub counts it)."""
        if self._closed:
            raise DatabaseUnavailable("the hub's store is closed")
        if self._task is None or self._task.done():
            self._start()
        patterns = None if scope is None else tuple(dict.fromkeys(scope))
        sub = Subscription(
            key=key,
            joined_at=self.position,
            fanout=self,
            limits=limits or self.limits,
            on_overflow=on_overflow,
            scope=patterns,
        )
        for group in self._groups(sub):
            group.add(sub)
        self._live.add(sub)
        return sub

    def _groups(self, sub: Subscription) -> list[set[Subscription]]:
        """The registry's sets `sub` belongs in (made when missing)."""
        if sub.scope is None:
            return [self._subscribers.setdefault(sub.key, set())]
        if any("*" in p for p in sub.scope):
            return [self._patterned.setdefault(sub.scope, set())]
        return [self._subscribers.setdefault(name, set()) for name in sub.scope]

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._live:
            self._live.discard(sub)
            if sub.scope is None:
                where: list[tuple[dict[Any, set[Subscription]], Any]] = [
                    (self._subscribers, sub.key)
                ]
            elif any("*" in p for p in sub.scope):
                where = [(self._patterned, sub.scope)]
            else:
                where = [(self._subscribers, name) for name in sub.scope]
            for registry, key in where:
                group = registry.get(key)
                if group is not None and sub in group:
                    group.discard(sub)
                    if not group:
                        del registry[key]
        sub.detached = True
        sub.sink = None
        sub.buffer.clear()
        sub.buffered_bytes = 0

    def _start(self) -> None:
        # Nothing before this was owed to anyone: start at the newest revision known.
        self.position = max(self.position, self._notifier.known)
        # A fresh context: the reader outlives the request that happened to start it, and must
        # not carry that request's trace or log context.
        self._task = asyncio.create_task(
            self._run(), name=f"mcsync-{self.name}-reader", context=contextvars.Context()
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
        _FANOUT_READER.set(True)  # this task's own context (`_start`)
        retries = Retries(_RETRY)
        failing_since: float | None = None
        while not self._closed:
            if not self._subscribers and not self._patterned:
                # Nobody to feed: a later subscriber replays from the database up to here.
                failing_since = None
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
            except DatabaseUnavailable as exc:
                # Retried with every watch attached, up to the grace (module doc).
                self.read_failures += 1
                now = time.monotonic()
                if failing_since is None:
                    failing_since = now
                if now - failing_since >= self.failing_grace:
                    log.warning(
                        "%s reader failed for %.0f s; open watches end: %s",
                        self.name,
                        now - failing_since,
                        exc,
                    )
                    self._detach_all(error=exc)
                    failing_since = None
                else:
                    log.info("%s reader failed, retrying: %s", self.name, exc)
                await asyncio.sleep(retries.next())
                continue
            except Exception as exc:
                # Not the database's: the watches end as they did when each read for
                # itself, with a 500 (e.g. a record that does not decode).
                log.warning("%s reader failed; open watches end: %s", self.name, exc)
                self._detach_all(error=exc)
                await asyncio.sleep(retries.next())
                continue
            retries.reset()
            failing_since = None
            if rows:
                self.position = max(self.position, rows[-1].revision)
            if len(rows) < self.page_size:
                self.position = max(self.position, target)

    def _dispatch(self, rows: Sequence[FeedRow]) -> None:
        fleet = self._subscribers.get(None)
        patterned = list(self._patterned.items())
        for row in rows:
            key = row.key
            groups = [self._subscribers.get(key)] if key is not None else []
            groups.append(fleet)
            if key is not None:
                groups += [subs for patterns, subs in patterned if scope.allows(patterns, key)]
            if not any(groups):
                continue
            # Encoded once; every buffer holds this same object.
            line = FeedLine(revision=row.revision, type=row.type, data=right_sized(row.line()))
            self.encodings += 1
            for group in groups:
                if not group:
                    continue
                for sub in list(group):
                    if sub.offer(line):
                        self.deliveries += 1
                    else:
                        self.overflows += 1
                        sub._overflow()

    def _detach_all(self, *, error: BaseException | None) -> None:
        for sub in list(self._live):
            self.unsubscribe(sub)
            sub.error = error
            sub.wake.set()
