"""A cluster's import watch, cut to its `spec.importNamespaces`
(docs/reference.md#scope-and-limits).

The import feed is the same for every cluster and a replica reads and encodes each change
once for all its watchers (`hub.store.fanout`); a cluster with an import scope must see
only its namespaces' ServiceImports and EndpointSliceExports. `ScopedImportFeedSource`
wraps the fleet-wide source with the scope, in both halves of a watch:

* the history replay (a watch opened or re-opened from a resourceVersion) reads only its
  scope's rows, cut in SQL (`ImportFeed.imports_since(scope=…)`, by an index on the
  changes' namespace). Every agent's watch re-opens every few minutes, all of a killed
  replica's at once, and each from a revision after which the whole fleet has written:
  a replay that read every namespace's rows only to skip most of them would cost each
  re-open the fleet's changes instead of its own, which docs/reference.md#fleet-scale
  forbids (no work O(clusters²)). The watch's paging holds with the cut pages: a page
  shorter than a page still holds every change of the scope up to the revision the watch
  joined the live feed at (`hub.api.watch`), which is all the watch must send up to
  there; the changes after it come from the subscription, cut by the scope too.
* the live subscription is made with the scope, so the replica's fan-out hands it only
  its namespaces' lines (`hub.store.fanout` indexes watches by scope: a change costs
  only the watches that want it).

The import list is cut in SQL too (`ImportFeed.list_imports(namespaces=…)`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hub.api.watch import ImportFeedSource
from hub.store.fanout import BufferLimits, Subscription
from shared.models import WatchEvent


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
        """The scope's history after `revision` (and the rows of no namespace), cut in SQL:
        a page of `limit` events of the scope, or fewer when the scope has no more."""
        rows = await self.inner.feed.imports_since(revision, limit, scope=self.patterns)
        return [row.event() for row in rows]

    def subscribe(self, *, limits: BufferLimits, on_overflow: Callable[[], object]) -> Subscription:
        return self.inner.subscribe(limits=limits, on_overflow=on_overflow, scope=self.patterns)
