"""A cluster's import watch without the keys whose `mcsync.io/import-clusters` leaves it
out (docs/reference.md#cluster-selection; the store half is `hub.store.importselection`).

The import feed is the same for every cluster and a replica encodes each change once for
all its watchers (`hub.store.fanout`). `SelectedImportFeedSource` wraps one cluster's
source with the set of keys that cluster is left out of at the watch's start revision, and
then follows the history: an *audience* row (`mcsync.io/audience` on its object) meant for
another cluster is skipped; one meant for this cluster passes, and its ServiceImport is a
marker (DELETED: left out from here on; ADDED: let in); a fleet-wide event of a key in the
set is skipped, and a fleet-wide DELETED of such a key also empties its place (the key is
gone; a new one starts afresh). The replay answers skipped events as BOOKMARKs at their
revisions, so that a page keeps the length of the page it wraps (the watch judges the end of
its replay by a page's length, `hub.api.watch`); the live subscription's `take` skips their
lines. The page it wraps is already cut to the cluster's import scope, in SQL
(`hub.api.importscope`). A line is parsed only when it names an audience or the set is
not empty, so a cluster left out of nothing pays a byte search per line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import orjson

from hub.api.watch import WatchSource
from hub.store.fanout import BufferLimits, FeedLine, Subscription
from hub.store.importselection import ANNOTATION_AUDIENCE
from shared import constants
from shared.models import BookmarkMeta, BookmarkObject, WatchEvent, to_wire

Key = tuple[str, str]
_AUDIENCE = ANNOTATION_AUDIENCE.encode()


@dataclass
class SelectionState:
    """What one watch knows: the keys its cluster is left out of, and the newest revision
    it has judged (an older line is a duplicate the watch skips anyway)."""

    cluster: str
    excluded: set[Key]
    # The watch's start revision at first: every change at or before it is in the set.
    judged: int = 0

    def admits(self, revision: int, kind: str, event_type: str, obj: dict[str, Any]) -> bool:
        """Whether the change passes, updating the state (changes come in revision order)."""
        if revision <= self.judged:
            return False
        self.judged = revision
        metadata = obj.get("metadata") or {}
        audience = (metadata.get("annotations") or {}).get(ANNOTATION_AUDIENCE)
        namespace = metadata.get("namespace") or ""
        if kind == constants.KIND_IMPORT:
            key = (namespace, metadata.get("name") or "")
        else:
            key = (namespace, (obj.get("spec") or {}).get("serviceName") or "")
        if audience is not None:
            if audience != self.cluster:
                return False
            if kind == constants.KIND_IMPORT:
                if event_type == "DELETED":
                    self.excluded.add(key)
                else:
                    self.excluded.discard(key)
            return True
        if key not in self.excluded:
            return True
        if kind == constants.KIND_IMPORT and event_type == "DELETED":
            self.excluded.discard(key)
        return False

    def admits_line(self, line: FeedLine) -> bool:
        if not self.excluded and _AUDIENCE not in line.data:
            self.judged = max(self.judged, line.revision)
            return True
        try:
            event = orjson.loads(line.data)
            obj = event["object"]
            kind = obj["kind"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return True
        return self.admits(line.revision, kind, event.get("type", ""), obj)


def _bookmark(revision: str) -> WatchEvent:
    return WatchEvent(
        type="BOOKMARK",
        object=BookmarkObject(metadata=BookmarkMeta(resource_version=revision)),
    )


class _SelectedSubscription:
    """A subscription whose `take` answers only the lines the state admits."""

    def __init__(self, inner: Subscription, state: SelectionState) -> None:
        self._inner = inner
        self._state = state

    def take(self) -> FeedLine | None:
        while True:
            line = self._inner.take()
            if line is None or self._state.admits_line(line):
                return line

    def admits(self, line: FeedLine) -> bool:
        """The filter of `take`, for a line the watch writes as it arrives (the inner
        subscription's `sink`, `hub.api.watch`)."""
        return self._state.admits_line(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass(frozen=True)
class SelectedImportFeedSource:
    """The import feed as `state.cluster` sees it under `mcsync.io/import-clusters`."""

    inner: WatchSource
    state: SelectionState

    @property
    def label(self) -> str:
        return self.inner.label

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def changes_since(self, revision: int, limit: int) -> list[WatchEvent]:
        events = await self.inner.changes_since(revision, limit)
        return [event if self._admitted(event) else _bookmark(event.resource_version or "0")
                for event in events]

    def subscribe(self, *, limits: BufferLimits, on_overflow: Callable[[], object]) -> Subscription:
        inner = self.inner.subscribe(limits=limits, on_overflow=on_overflow)
        return cast(Subscription, _SelectedSubscription(inner, self.state))

    def _admitted(self, event: WatchEvent) -> bool:
        obj = event.object
        kind = getattr(obj, "kind", None)
        revision = event.resource_version
        if kind not in (constants.KIND_IMPORT, constants.KIND_ENDPOINT_SLICE) or not revision:
            return True
        return self.state.admits(int(revision), str(kind), event.type, to_wire(obj))
