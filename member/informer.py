"""A generic informer: list, then watch from the list's resourceVersion, with a local cache.

client-go's reflector + indexer + event handler, reduced to what the agent needs and kept
independent of Kubernetes: anything that can `list()` and `watch()` (a `ListWatch`) can be
informed on. The agent runs one over Services and ServiceExports (`member.kube.listwatch`)
and one over the hub's change feed (docs/reference.md#change-feeds), which speaks the same event
dialect.

Rules (docs/reference.md#export-path):

* The first list fills the cache and delivers every object as ADDED with `from_relist=True`,
  so the caller can put it in the work queue's bulk lane.
* The watch starts from the list's resourceVersion. When the server ends the stream (its
  timeout) or the connection drops, the watch resumes from the last resourceVersion seen:
  nothing is delivered twice and nothing is missed.
* A `410 Gone` (`ResourceExpired`, or an ERROR event carrying code 410) means the history
  was compacted past our resourceVersion: relist, and diff the list against the cache —
  ADDED / MODIFIED for new or changed objects, DELETED for those that vanished meanwhile,
  all `from_relist=True`. Unchanged objects are not delivered (a resync is not a change).
* A MODIFIED whose resourceVersion equals the cached one is dropped. BOOKMARK only advances
  the resourceVersion.
* `run()` never raises: errors are logged and retried with `shared.backoff`'s capped
  exponential backoff and full jitter, so the agents of a fleet do not relist in step.
* Each watch request asks the server to end it after a time drawn from [T, 2T) for the
  informer's watch timeout T (client-go's reflector does the same). A fleet's watches
  opened together (a hub restarted, a replica lost) would otherwise all end together
  again T later, and their re-opens, at once by the rule above, would hit the hub in one
  wave every T.
* A watch that was streaming and broke (the connection lost, an ERROR event) is re-opened
  after a wait drawn from the informer's `reconnect` policy, never sooner than an ERROR's
  `retryAfterSeconds`. For a Kubernetes API server, one per cluster, that is `BACKOFF`.
  For the hub's feeds it is `HUB_RECONNECT`, whose first window is seconds wide: every
  agent whose watch was on a hub replica loses it at the same instant when the replica
  dies, and all of them re-open on the survivors. Spread over `BACKOFF`'s half second, a
  fleet's re-opens arrived at once, each with its reads (scope, revision, replay), more
  than a replica's connection pool answers within its timeout, and the 503s sent them
  back together in the next half second (docs/benchmarks.md §16). Spread over the wider
  window the survivor sees a bounded rate, and a re-open it refuses widens the next
  window (exponential, to the cap). The price is that one agent's broken watch resumes a
  few seconds later (docs/reference.md#fleet-scale).

The handler runs on the informer's thread, after the cache is updated, so a lister read from
the handler sees the new state. It must be quick (enqueue a key, not reconcile).

Memory (client-go's `SetTransform`): a `transform` given to the informer is applied to every
object before it is cached or delivered, so the cache holds only what its readers use. A list
applies it page by page (the ListWatch calls it as each page arrives), so a paged list of
10,000 objects never holds more than one page of them in full. On a relist, an object whose
resourceVersion equals the cached one is not transformed again: the cached object is kept,
so a relist holds one copy of the unchanged objects, not two.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from shared.backoff import DEFAULT_RETRY_AFTER_MAX, Backoff, Retries

__all__ = [
    "EventHandler",
    "Informer",
    "InterruptibleStream",
    "ItemTransform",
    "ListWatch",
    "ResourceExpired",
    "WatchError",
    "namespaced_key",
]

logger = logging.getLogger(__name__)

EventHandler = Callable[[str, dict[str, Any] | None, dict[str, Any] | None, bool], None]
"""(event_type "ADDED"|"MODIFIED"|"DELETED", old, new, from_relist).

ADDED: old None, new the object. MODIFIED: old the cached object, new the new one.
DELETED: old the object's last state (from the delete event, or the cache on a relist), new
None.
"""

ItemTransform = Callable[[dict[str, Any]], dict[str, Any]]
"""Answers the object to cache for a listed or watched one; pure (it may run twice on a list
that restarts from page one) and idempotent."""

# Between failed lists or watches: the first retry within half a second, then up to 30 s.
BACKOFF = Backoff(base=0.5, cap=30.0)
# Before re-opening a broken watch of a server a whole fleet watches (the hub): the first
# within 10 s, then up to 60 s (module doc).
HUB_RECONNECT = Backoff(base=10.0, cap=60.0)


class WatchError(RuntimeError):
    """The server ended the watch with an ERROR event other than 410; `retry_after` is the
    wait it asked for (its Status's `details.retryAfterSeconds`), if any."""

    def __init__(self, code: object, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"watch error {code}: {message}")
        self.code = code
        self.retry_after = retry_after


class ResourceExpired(Exception):
    """The server answered 410 Gone: the resourceVersion is older than its retained history."""


class ListWatch(Protocol):
    """The source an informer reads: a full list, and a change stream from a resourceVersion."""

    def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
        """All items (following paging) and the list's resourceVersion.

        With `transform`, each item is answered as `transform(item)`, applied as its page
        arrives, so the raw items of a page can be freed before the next one is read.
        """
        ...

    def watch(self, *, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        """Raw events `{"type": ..., "object": {...}}` after `resource_version`.

        Raises `ResourceExpired` on 410; returns when the server ends the stream. The answer
        may also be an `InterruptibleStream`, so that stopping does not wait for the stream.
        """
        ...


@runtime_checkable
class InterruptibleStream(Protocol):
    """A watch stream that another thread can cut short (the informer does, on stop)."""

    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def __next__(self) -> dict[str, Any]: ...

    def interrupt(self) -> None:
        """Make a blocked `__next__` in another thread end the iteration promptly."""
        ...


def namespaced_key(obj: dict[str, Any]) -> str:
    """The work queue key of an object: "namespace/name" (just "name" when cluster-scoped)."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


def _resource_version(obj: dict[str, Any] | None) -> str | None:
    if not obj:
        return None
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return str(value) if value is not None else None


class Informer:
    """Keeps a local cache of a ListWatch's objects current and reports each change."""

    def __init__(
        self,
        *,
        name: str,
        list_watch: ListWatch,
        handler: EventHandler,
        watch_timeout_seconds: int = 300,
        key_func: Callable[[dict[str, Any]], str] = namespaced_key,
        on_list: Callable[[], None] | None = None,
        transform: ItemTransform | None = None,
        reconnect: Backoff = BACKOFF,
    ) -> None:
        """`on_list`, if given, is called (on the informer thread) after each list has been
        delivered — the first and every relist — e.g. to start a full-state repair.

        `transform`, if given, is what is cached (and delivered) of each object: see the
        module doc. It must keep the metadata the key and resourceVersion are read from.

        `reconnect` paces the re-opening of a watch that broke (module doc): `HUB_RECONNECT`
        for a server the whole fleet watches."""
        self.name = name
        self._reconnect = reconnect
        self._streamed = False  # the current watch has delivered an event
        self._list_watch = list_watch
        self._handler = handler
        self._watch_timeout = watch_timeout_seconds
        self._key = key_func
        self._on_list = on_list
        self._transform = transform
        self._cache: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._resource_version = ""
        self._stream: InterruptibleStream | None = None
        self.relists = 0
        """Lists after the first (each follows a 410 or a failed resume)."""
        self.lists = 0
        """Lists delivered, counted as the cache is swapped: a reader that sees a new count
        sees the list's cache (the mass-withdrawal guard re-judges a repair on a change)."""
        self._failing = False

    # -- lister ---------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached object of `key`. Shared with the cache: read it, never mutate it."""
        with self._lock:
            return self._cache.get(key)

    def list_cached(self) -> list[dict[str, Any]]:
        """All cached objects (read-only, as `get`)."""
        with self._lock:
            return list(self._cache.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._cache)

    def has_synced(self) -> bool:
        """True once the first list has been delivered to the handler."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    @property
    def failing(self) -> bool:
        """True while the server refuses this informer's list or watch (an error other than
        410, e.g. a CRD gone or a version no longer served): the cache may be stale, so what
        it lacks is "cannot see", never "does not exist" (docs/reference.md#failover)."""
        return self._failing

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (where a resumed watch starts)."""
        return self._resource_version

    # -- running --------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run in a new daemon thread; answers the thread."""
        thread = threading.Thread(target=self.run, args=(stop,), name=f"informer-{self.name}")
        thread.daemon = True
        thread.start()
        return thread

    def run(self, stop: threading.Event) -> None:
        """List, then watch until `stop` is set. Blocking; never raises."""
        # A blocked stream read cannot see `stop`; this helper cuts the stream when it is set.
        interrupter = threading.Thread(
            target=self._interrupt_on_stop, args=(stop,), name=f"informer-{self.name}-stop"
        )
        interrupter.daemon = True
        interrupter.start()
        backoff = Retries(BACKOFF)
        reconnects = Retries(self._reconnect)
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                    backoff.reset()
                    if stop.is_set():
                        break
                self._watch(stop)
                backoff.reset()  # a stream that ended normally: resume at once
                reconnects.reset()
            except ResourceExpired:
                logger.info(
                    "%s: resourceVersion %s expired (410), relisting",
                    self.name,
                    self._resource_version,
                )
                need_list = True
            except Exception as exc:
                # A failed list is retried as a list; a dropped watch resumes from the last
                # resourceVersion (need_list stays False), so nothing is re-delivered.
                self._failing = True
                if need_list:
                    delay = backoff.next()
                else:
                    if self._streamed:
                        reconnects.reset()  # it was serving: a fresh loss, the first window
                    delay = reconnects.next(retry_after=getattr(exc, "retry_after", None))
                self._streamed = False
                logger.warning(
                    "%s: %s failed, retrying in %.1fs: %s: %s",
                    self.name,
                    "list" if need_list else "watch",
                    delay,
                    type(exc).__name__,
                    exc,
                )
                stop.wait(delay)

    # -- internals ------------------------------------------------------------------------

    def _interrupt_on_stop(self, stop: threading.Event) -> None:
        stop.wait()
        stream = self._stream
        if stream is not None:
            try:
                stream.interrupt()
            except Exception:
                logger.debug("%s: interrupting the watch failed", self.name, exc_info=True)

    def _list(self) -> None:
        items, resource_version = self._list_watch.list(transform=self._ingest)
        first = not self._synced.is_set()
        if not first:
            self.relists += 1
        fresh: dict[str, dict[str, Any]] = {}
        for item in items:
            fresh[self._key(item)] = item
        del items  # `fresh` holds them now; one reference less to a 10,000-item list
        events: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = []
        with self._lock:
            old_cache = self._cache
            for key, item in fresh.items():
                old = old_cache.get(key)
                if old is None:
                    events.append(("ADDED", None, item))
                elif _resource_version(old) != _resource_version(item):
                    events.append(("MODIFIED", old, item))
            for key, old in old_cache.items():
                if key not in fresh:
                    events.append(("DELETED", old, None))
            # Swap the whole cache at once so a lister never sees half a relist.
            self._cache = fresh
            self.lists += 1
            self._resource_version = resource_version
        self._failing = False
        logger.info(
            "%s: %s %d objects at resourceVersion %s (%d changes)",
            self.name,
            "listed" if first else "relisted",
            len(fresh),
            resource_version,
            len(events),
        )
        for event_type, old, new in events:
            self._deliver(event_type, old, new, from_relist=True)
        self._synced.set()
        if self._on_list is not None:
            try:
                self._on_list()
            except Exception:
                logger.exception("%s: on_list failed", self.name)

    def _ingest(self, item: dict[str, Any]) -> dict[str, Any]:
        """What a listed item is cached as: the cached object when its resourceVersion did not
        change (one copy of it during a relist, not two), else the item transformed."""
        # Only this thread writes the cache; a read without the lock sees a whole dict.
        cached = self._cache.get(self._key(item))
        if cached is not None and _resource_version(cached) == _resource_version(item):
            return cached
        return self._transform(item) if self._transform is not None else item

    def _watch(self, stop: threading.Event) -> None:
        stream = self._list_watch.watch(
            resource_version=self._resource_version, timeout_seconds=self._next_timeout()
        )
        self._failing = False  # the server answered the watch
        if isinstance(stream, InterruptibleStream):
            self._stream = stream
            # Stop may have been set between the check in run() and here: the interrupter
            # has already looked at self._stream, so cut the stream ourselves.
            if stop.is_set():
                stream.interrupt()
        try:
            for event in stream:
                if stop.is_set():
                    return
                self._streamed = True
                self._apply(event)
        finally:
            self._stream = None
            # Leaving early (stop, an ERROR event, a failing event) must not leak the stream's
            # connection; on this thread even a generator's close() is safe.
            close = getattr(stream, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    logger.debug("%s: closing the watch stream failed", self.name, exc_info=True)

    def _next_timeout(self) -> int:
        """The `timeoutSeconds` of the next watch request: drawn from [T, 2T) for the
        informer's `watch_timeout_seconds` T, as client-go's reflector draws it (module
        doc)."""
        return int(self._watch_timeout * (1.0 + random.random()))

    def _apply(self, event: dict[str, Any]) -> None:
        event_type = event.get("type")
        obj = event.get("object") or {}
        if event_type == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise ResourceExpired(obj.get("message", "410 Gone"))
            details = obj.get("details") or {}
            wait = details.get("retryAfterSeconds") if isinstance(details, dict) else None
            raise WatchError(
                code,
                str(obj.get("message", obj)),
                min(float(wait), DEFAULT_RETRY_AFTER_MAX)
                if isinstance(wait, int | float) and wait >= 0
                else None,
            )
        resource_version = _resource_version(obj)
        if event_type == "BOOKMARK":
            if resource_version:
                self._resource_version = resource_version
            return
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            logger.warning("%s: ignoring watch event of type %r", self.name, event_type)
            return
        if self._transform is not None:
            obj = self._transform(obj)
        key = self._key(obj)
        with self._lock:
            old = self._cache.get(key)
            if resource_version:
                self._resource_version = resource_version
            if event_type == "DELETED":
                self._cache.pop(key, None)
            elif old is not None and _resource_version(old) == resource_version:
                # docs/reference.md#export-path: an update whose resourceVersion did not change is
                # not a change.
                return
            else:
                self._cache[key] = obj
        if event_type == "DELETED":
            self._deliver("DELETED", obj, None, from_relist=False)
        else:
            # The cache, not the server's event type, decides ADDED vs MODIFIED: a resumed
            # watch may send ADDED for an object we already hold.
            self._deliver("ADDED" if old is None else "MODIFIED", old, obj, from_relist=False)

    def _deliver(
        self,
        event_type: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        *,
        from_relist: bool,
    ) -> None:
        try:
            self._handler(event_type, old, new, from_relist)
        except Exception:
            key = self._key(new or old or {})
            logger.exception("%s: handler failed for %s %s", self.name, event_type, key)
