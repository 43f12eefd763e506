"""A cluster's import watch, cut to its `spec.importNamespaces`
(docs/reference.md#scope-and-limits).

The import feed is the same for every cluster and a replica reads and encodes each change
once for all its watchers (`hub.store.fanout`); a cluster with an import scope must see
only its namespaces' ServiceImports and EndpointSliceExports. `ScopedImportFeedSource`
wraps the fleet-wide source: the history replay answers other namespaces' events as
BOOKMARKs at their revisions, and the live subscription is made with the scope, so the
replica's fan-out hands it only its namespaces' lines (`hub.store.fanout` indexes watches
by scope: a change costs only the watches that want it).
The import list is cut in SQL (`ImportFeed.list_imports(namespaces=…)`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hub.api.watch import ImportFeedSource
from hub.store.fanout import BufferLimits, Subscription
from shared import scope
from shared.models import BookmarkMeta, BookmarkObject, WatchEvent


def _bookmark(event: WatchEvent) -> WatchEvent:
    revision = event.resource_version or "0"
    return WatchEvent(
        type="BOOKMARK",
        object=BookmarkObject(metadata=BookmarkMeta(resource_version=revision)),
    )


@dataclass(frozen=True)
class ScopedImportFeedSource:
    """The fleet's import feed as one cluster with `patterns` for its importNamespaces
    sees it."""

    inner: ImportFeedSource
    patterns: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.inner.label

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def changes_since(self, revision: int, limit: int) -> list[WatchEvent]:
        """The history after `revision`, each event of another namespace replaced by a
        BOOKMARK at its revision: the watch's replay judges a short page to be the end of
        the history, so a page keeps its length and the watcher its position."""
        events = await self.inner.changes_since(revision, limit)
        return [event if self._allowed(event) else _bookmark(event) for event in events]

    def subscribe(self, *, limits: BufferLimits, on_overflow: Callable[[], object]) -> Subscription:
        return self.inner.subscribe(limits=limits, on_overflow=on_overflow, scope=self.patterns)

    def _allowed(self, event: WatchEvent) -> bool:
        metadata = getattr(event.object, "metadata", None)
        namespace = getattr(metadata, "namespace", None)
        return namespace is None or scope.allows(self.patterns, namespace)
