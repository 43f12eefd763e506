"""Our own writes, seen before the informer brings them back (client-go's "expectations").

The import reconcilers read informer caches, and a write's own watch event arrives a moment
after its answer. A reconcile of the same key in that moment — a Service event queues the
ServiceImport, a ServiceImport event the slices — would compare against the object as it
was before the write: create it again (409 AlreadyExists) or update it from a stale
resourceVersion (409 Conflict), then back off and retry. Correct, but one failed request
per object and key at every startup.

`OwnWrites` wraps a lister: after a write, `remember(answer)` makes `get()` answer the
write's result until the cache shows that resourceVersion (the event arrived); after a
delete, `forget(obj)` makes `get()` answer None until the cache drops the object. Entries
older than `ttl` are dropped anyway: should our event never show (a relist that skipped
it), the cache is the truth again after a few seconds. Resource versions are only compared
for equality, as the API conventions allow.

`RememberingWriter` is an `ObjectWriter` that does this on every write it makes, and
keeps a `ManagedIndex` in step, so the reconcilers need not know.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from member.kube.importobjects import ObjectWriter

__all__ = ["OwnWrites", "RememberingWriter"]

_TTL_SECONDS = 5.0


class _Lister(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...


class _Index(Protocol):
    def observe(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> set[str]: ...


def _key(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def _rv(obj: dict[str, Any] | None) -> str | None:
    value = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return str(value) if value is not None else None


class OwnWrites:
    """A lister corrected by our own writes' answers until the cache has caught up."""

    def __init__(
        self,
        lister: _Lister,
        *,
        ttl: float = _TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lister = lister
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        # key -> (our object, or None for "we deleted it at this resourceVersion", rv, when)
        self._recent: dict[str, tuple[dict[str, Any] | None, str | None, float]] = {}

    def remember(self, answer: dict[str, Any]) -> None:
        with self._lock:
            self._recent[_key(answer)] = (answer, _rv(answer), self._clock())

    def forget(self, obj: dict[str, Any]) -> None:
        with self._lock:
            self._recent[_key(obj)] = (None, _rv(obj), self._clock())

    def get(self, key: str) -> dict[str, Any] | None:
        cached = self._lister.get(key)
        with self._lock:
            entry = self._recent.get(key)
            if entry is None:
                return cached
            ours, rv, when = entry
            if self._clock() - when > self._ttl:
                del self._recent[key]
                return cached
            if ours is not None:
                if _rv(cached) == rv:
                    del self._recent[key]  # the event arrived: the cache is the truth
                    return cached
                return ours
            if cached is None or _rv(cached) != rv:
                del self._recent[key]  # gone from the cache, or recreated since
                return cached
            return None

    def pending(self) -> int:
        with self._lock:
            return len(self._recent)


class RememberingWriter:
    """Writes through `writer`, remembering each answer in `own` (and `index`)."""

    def __init__(
        self, writer: ObjectWriter, own: OwnWrites, index: _Index | None = None
    ) -> None:
        self._writer = writer
        self._own = own
        self._index = index
        self.version = writer.version

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._remember(self._writer.create(body))

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._remember(self._writer.replace(body))

    def replace_status(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._remember(self._writer.replace_status(body))

    def delete(self, namespace: str, name: str, *, uid: str | None) -> None:
        before = self._own.get(f"{namespace}/{name}")
        self._writer.delete(namespace, name, uid=uid)
        if before is not None:
            self._own.forget(before)
            if self._index is not None:
                self._index.observe(before, None)

    def _remember(self, answer: dict[str, Any]) -> dict[str, Any]:
        before = self._own.get(_key(answer))
        self._own.remember(answer)
        if self._index is not None:
            self._index.observe(before, answer)
        return answer
