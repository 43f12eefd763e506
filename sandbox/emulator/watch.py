"""Watch streams: replay from a resourceVersion, then live events, as NDJSON lines.

A watch subscribes to the store (atomically with its replay, so nothing is lost between
history and live), then writes one JSON line per event the watcher may see:
- namespace, label and field selectors filter events; a MODIFIED event that moves an
  object into the selection is sent as ADDED and out of it as DELETED, as Kubernetes does;
- `allowWatchBookmarks` adds a BOOKMARK (kind, apiVersion, metadata.resourceVersion only)
  every `bookmark_interval` seconds, at a resourceVersion the watcher has fully seen;
- the stream ends at `timeoutSeconds`, when the store closes all watches, or when the
  client goes away;
- a resourceVersion older than the retained history answers one ERROR event carrying a
  410 Expired Status, with HTTP 200, exactly as the apiserver's watch cache does.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from sandbox.emulator.errors import expired
from sandbox.emulator.resources import ResourceType
from sandbox.emulator.selectors import FieldSelector, LabelSelector
from sandbox.emulator.store import Obj, Store, StoredEvent, TooOld


@dataclass(frozen=True)
class WatchRequest:
    rt: ResourceType
    api_version: str
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    since_rv: int | None  # None: start with synthetic ADDED for current objects
    timeout: float
    bookmarks: bool
    bookmark_interval: float


def _line(event_type: str, obj: Any) -> bytes:
    return (json.dumps({"type": event_type, "object": obj}, separators=(",", ":")) + "\n").encode()


class WatchFilter:
    """Decides which type (if any) an event has for one watcher."""

    def __init__(self, req: WatchRequest) -> None:
        self.req = req

    def selected(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.req.namespace is not None and meta.get("namespace") != self.req.namespace:
            return False
        return self.req.labels.matches(obj) and self.req.fields.matches(obj)

    def classify(self, event: StoredEvent) -> str | None:
        now = self.selected(event.obj)
        if event.type == "ADDED":
            return "ADDED" if now else None
        if event.type == "DELETED":
            return "DELETED" if now else None
        before = self.selected(event.old)
        if before and now:
            return "MODIFIED"
        if now:
            return "ADDED"  # the change moved the object into the selection
        if before:
            return "DELETED"  # ...or out of it
        return None


async def stream_watch(
    store: Store, req: WatchRequest, render: Callable[[Obj], Obj]
) -> AsyncIterator[bytes]:
    """The body of a watch response (subscribe first: see `open_watch`)."""
    try:
        sub, replay, current = store.subscribe(
            req.rt.storage_key, req.since_rv, asyncio.get_running_loop()
        )
    except TooOld as exc:
        error = expired(f"too old resource version: {exc.requested} ({exc.oldest})")
        yield _line("ERROR", error.status())
        return
    flt = WatchFilter(req)
    deadline = time.monotonic() + req.timeout
    next_bookmark = time.monotonic() + req.bookmark_interval
    try:
        for obj in current:
            if flt.selected(obj):
                yield _line("ADDED", render(obj))
        for event in replay:
            kind = flt.classify(event)
            if kind:
                yield _line(kind, render(event.obj))
        while True:
            sub.wakeup.clear()
            events, closed, rv = store.drain(sub)
            for event in events:
                kind = flt.classify(event)
                if kind:
                    yield _line(kind, render(event.obj))
            if closed:
                return
            now = time.monotonic()
            if req.bookmarks and now >= next_bookmark:
                # Every event up to `rv` was in this or an earlier drain: safe to bookmark.
                yield _line("BOOKMARK", {
                    "kind": req.rt.kind, "apiVersion": req.api_version,
                    "metadata": {"resourceVersion": str(rv)},
                })
                next_bookmark = now + req.bookmark_interval
            if now >= deadline:
                return
            if events:
                continue
            wait = deadline - now
            if req.bookmarks:
                wait = min(wait, max(next_bookmark - now, 0.0))
            try:
                await asyncio.wait_for(sub.wakeup.wait(), timeout=max(wait, 0.0))
            except TimeoutError:
                pass
    finally:
        store.unsubscribe(sub)
