"""A cluster's import watch, cut to its `spec.importNamespaces` (SPEC §4.4, issue 23).

The import feed is the same for every cluster and a replica reads and encodes each change
once for all its watchers (`hub.store.fanout`); a cluster with an import scope must see
only its namespaces' ServiceImports and EndpointSliceExports. `ScopedImportFeedSource`
wraps the fleet-wide source: the history replay answers other namespaces' events as
BOOKMARKs at their revisions, and the live subscription's `take` skips their lines (each
line's namespace read from its bytes; an unscoped cluster's watch pays nothing). A skipped
line leaves the watch's buffer as it is taken, so it costs no more than an unscoped one's.
The import list is cut in SQL (`ImportFeed.list_imports(namespaces=…)`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson

from hub.api.watch import ImportFeedSource
from hub.store.fanout import BufferLimits, FeedLine, Subscription
from shared import scope
from shared.models import BookmarkMeta, BookmarkObject, WatchEvent


def line_namespace(data: bytes) -> str | None:
    """The namespace of a watch line's object (None: it names none, e.g. a BOOKMARK)."""
    try:
        metadata = orjson.loads(data)["object"]["metadata"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    return namespace if isinstance(namespace, str) else None


def _bookmark(event: WatchEvent) -> WatchEvent:
    revision = event.resource_version or "0"
    return WatchEvent(
        type="BOOKMARK",
        object=BookmarkObject(metadata=BookmarkMeta(resource_version=revision)),
    )


class _ScopedSubscription:
    """A subscription whose `take` answers only lines of allowed namespaces; everything
    else is the wrapped subscription's."""

    def __init__(self, inner: Subscription, patterns: Sequence[str]) -> None:
        self._inner = inner
        self._patterns = list(patterns)

    def take(self) -> FeedLine | None:
        while True:
            line = self._inner.take()
            if line is None:
                return None
            namespace = line_namespace(line.data)
            if namespace is None or scope.allows(self._patterns, namespace):
                return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


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
        inner = self.inner.subscribe(limits=limits, on_overflow=on_overflow)
        return cast(Subscription, _ScopedSubscription(inner, self.patterns))

    def _allowed(self, event: WatchEvent) -> bool:
        metadata = getattr(event.object, "metadata", None)
        namespace = getattr(metadata, "namespace", None)
        return namespace is None or scope.allows(self.patterns, namespace)
