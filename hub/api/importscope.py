"""A cluster's import watch, cut to its `spec.importNamespaces`
(docs/reference.md#scope-and-limits).

The import feed is the same for every cluster and a replica reads and encodes each change
once for all its watchers (`hub.store.fanout`); a cluster with an import scope must see
only its namespaces' ServiceImports and EndpointSliceExports. `ScopedImportFeedSource`
wraps the fleet-wide source: the history replay answers other namespaces' events as
BOOKMARKs at their revisions (judged by the row's namespace column, without decoding
it), and the live subscription is made with the scope, so the replica's fan-out hands it
only its namespaces' lines (`hub.store.fanout` indexes watches by scope: a change costs
only the watches that want it).
The import list is cut in SQL (`ImportFeed.list_imports(namespaces=…)`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hub.api.watch import ImportFeedSource
from hub.store.fanout import BufferLimits, Subscription
from shared import scope
from shared.models import BookmarkMeta, BookmarkObject, WatchEvent


def _bookmark_at(revision: int) -> WatchEvent:
    return WatchEvent(
        type="BOOKMARK",
        object=BookmarkObject(metadata=BookmarkMeta(resource_version=str(revision))),
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
        rows = await self.inner.feed.imports_since(revision, limit)
        return [
            row.event() if self._holds(row.namespace) else _bookmark_at(row.revision)
            for row in rows
        ]

    def subscribe(self, *, limits: BufferLimits, on_overflow: Callable[[], object]) -> Subscription:
        return self.inner.subscribe(limits=limits, on_overflow=on_overflow, scope=self.patterns)

    def _holds(self, namespace: str) -> bool:
        """Whether the scope holds a row's namespace, read from its column: a row of another
        namespace is never decoded (most of the history, for a cluster that imports a few
        namespaces of many)."""
        return not namespace or scope.allows(self.patterns, namespace)
