"""Objects, the one resourceVersion counter, the bounded event history and watch fan-out.

This is etcd plus the apiserver's watch cache, in memory, for one emulated cluster:
- every write takes the next value of ONE global counter, which becomes the object's
  `metadata.resourceVersion` and the event's position in the history;
- the last `history` events are retained; a watch from a resourceVersion older than that
  is "too old" (the apiserver's 410 Expired);
- watchers subscribe atomically with the replay of history, so no event falls between
  "replayed" and "live".

Objects are stored as plain dicts keyed by (storage key, namespace, name); one storage
key serves every version of a resource. The store knows nothing about HTTP, verbs or
Kubernetes rules (that is `registry.py`). All state is guarded by one re-entrant lock
because the ASGI app (server thread) and in-process test handles (test thread) both use
it. Subscribers are woken on their own event loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
ObjKey = tuple[str, str, str]  # (storage key, namespace, name)


@dataclass(frozen=True)
class StoredEvent:
    """One committed change: its resourceVersion, type, and the object before and after."""

    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    storage_key: str
    obj: Obj  # the object as of this event (for DELETED: its last state)
    old: Obj | None  # the object before this event (None for ADDED)


class TooOld(Exception):
    """A watch asked for history the store no longer retains."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass(eq=False)
class Subscription:
    """A watcher's mailbox: events are appended under the store lock, consumed in its loop."""

    storage_key: str
    loop: asyncio.AbstractEventLoop
    pending: deque[StoredEvent] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False

    def notify(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self.wakeup.set)
        except RuntimeError:  # the watcher's loop is gone; its stream is over anyway
            pass


class Store:
    """In-memory object store with a global resourceVersion counter and event history."""

    def __init__(self, *, history: int = 1000, initial_rv: int = 1) -> None:
        if history < 1:
            raise ValueError("history must be at least 1")
        self.lock = threading.RLock()
        self._objects: dict[ObjKey, Obj] = {}
        self._rv = initial_rv
        self._history: deque[StoredEvent] = deque(maxlen=history)
        # Events with rv <= _compacted_rv are gone; a watch from rv >= _compacted_rv is fine.
        self._compacted_rv = initial_rv
        self._subs: set[Subscription] = set()
        self._listeners: list[Callable[[StoredEvent], None]] = []

    # -- reads ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    @property
    def compacted_rv(self) -> int:
        with self.lock:
            return self._compacted_rv

    def get(self, key: ObjKey) -> Obj | None:
        with self.lock:
            obj = self._objects.get(key)
            return copy.deepcopy(obj) if obj is not None else None

    def list_objects(self, storage_key: str, namespace: str | None = None) -> tuple[list[Obj], int]:
        """Objects of a resource (optionally one namespace), sorted by namespace/name, and
        the resourceVersion they are consistent with.

        The dicts are the stored ones, not copies (a 10,000-object list stays cheap):
        callers must treat them as read-only. That is safe because the store never changes
        a stored dict in place; every commit stores a fresh copy.
        """
        with self.lock:
            items = [
                obj
                for (sk, ns, _), obj in sorted(self._objects.items())
                if sk == storage_key and (namespace is None or ns == namespace)
            ]
            return items, self._rv

    # -- writes --------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the lock across a read-check-write so preconditions cannot race."""
        with self.lock:
            yield

    def commit(self, event_type: str, key: ObjKey, obj: Obj, old: Obj | None) -> Obj:
        """Store `obj` (or remove it, for DELETED) at the next resourceVersion.

        Sets `metadata.resourceVersion` on a copy, records the event, wakes watchers, and
        answers the stored copy.
        """
        with self.lock:
            self._rv += 1
            stored = copy.deepcopy(obj)
            stored.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
            if event_type == "DELETED":
                self._objects.pop(key, None)
            else:
                self._objects[key] = stored
            event = StoredEvent(self._rv, event_type, key[0], stored, copy.deepcopy(old))
            if len(self._history) == self._history.maxlen:
                # The oldest event falls out: from now on a watch from before it is too old.
                self._compacted_rv = self._history[0].rv
            self._history.append(event)
            for sub in self._subs:
                if sub.storage_key == key[0] and not sub.closed:
                    sub.pending.append(event)
                    sub.notify()
            for listener in self._listeners:
                listener(event)
            return copy.deepcopy(stored)

    def add_listener(self, listener: Callable[[StoredEvent], None]) -> None:
        """Call `listener(event)` for every commit, under the lock and in commit order.

        For in-process controllers (the garbage collector): a listener must be quick and
        must not write; it hands work to its own thread.
        """
        with self.lock:
            self._listeners.append(listener)

    def keys_in_namespace(self, namespace: str) -> list[ObjKey]:
        """Every stored object of `namespace`, whatever its resource."""
        with self.lock:
            return sorted(k for k in self._objects if k[1] == namespace)

    # -- watch ---------------------------------------------------------------------------

    def subscribe(
        self, storage_key: str, since_rv: int | None, loop: asyncio.AbstractEventLoop
    ) -> tuple[Subscription, list[StoredEvent], list[Obj]]:
        """Register a watcher and answer what it must see first, atomically.

        `since_rv` None: the current objects (sent as synthetic ADDED). Otherwise: the
        retained events after `since_rv`, or `TooOld` if some of them are gone.
        """
        with self.lock:
            sub = Subscription(storage_key=storage_key, loop=loop)
            replay: list[StoredEvent] = []
            current: list[Obj] = []
            if since_rv is None:
                current, _ = self.list_objects(storage_key)
            else:
                if since_rv < self._compacted_rv:
                    raise TooOld(since_rv, self._compacted_rv)
                replay = [
                    e for e in self._history if e.rv > since_rv and e.storage_key == storage_key
                ]
            self._subs.add(sub)
            return sub, replay, current

    def unsubscribe(self, sub: Subscription) -> None:
        with self.lock:
            self._subs.discard(sub)

    def drain(self, sub: Subscription) -> tuple[list[StoredEvent], bool, int | None]:
        """Take a subscriber's pending events: (events, closed?, bookmark rv).

        The bookmark rv is the current counter when the mailbox is empty: every event up to
        it has then been delivered to (or filtered by) this watcher.
        """
        with self.lock:
            events = list(sub.pending)
            sub.pending.clear()
            return events, sub.closed, self._rv

    def close_watches(self) -> int:
        """End every open watch stream (clients see the connection end and must resume)."""
        with self.lock:
            subs = list(self._subs)
            for sub in subs:
                sub.closed = True
                sub.notify()
            self._subs.clear()
            return len(subs)

    def open_watches(self) -> int:
        with self.lock:
            return len(self._subs)

    def compact(self) -> int:
        """Forget all history: a watch from any resourceVersion before now gets 410."""
        with self.lock:
            self._history.clear()
            self._compacted_rv = self._rv
            return self._rv
