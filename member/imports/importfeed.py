"""The hub's import feed, followed by the generic informer, and the view the import
reconcilers read from it (docs/reference.md#import-path, #change-feeds).

`GET …/clusters/{c}/imports` lists every ServiceImport and EndpointSliceExport of the fleet
and `?watch=true` streams their changes: the same list-then-watch, relist-on-410 protocol as
the export feed, so `HubImportListWatch` plugs into `member.informer.Informer` exactly as
`member.hubfeed.HubExportListWatch` does. The feed is pushed, never polled.

What the informer caches of each object is a `feed_entry()`: its kind, resourceVersion and
change time, and the object itself in the one compact immutable form the reconcilers read —
a ServiceImport's `member.imports.importspec.HeldImport` (the fields the three desired objects are
built from, strings interned), or a slice's `member.imports.importspec.SourceSlice` (its
endpoints one deflated JSON bytes, `pack_json`). Each object is thus parsed once, when it
arrives, never per reconcile; and a key costs what a reconcile needs of it, not its wire
dicts nor its validated model (a mirrored-slice reconcile used to re-validate all 50
source slices of a key, at 50 clusters, for each endpoint change of one of them; a held
pydantic ServiceImport was ~5 KB a key, the `HeldImport` a tenth of that).

One informer caches both kinds, so each needs a key of its own (`import_item_key`): a
ServiceImport is "namespace/name", the same key as the Kubernetes objects made from it; an
EndpointSliceExport is "slice:<cluster>/<namespace>/<slice>" (two clusters may have slices
of one name); a feed event of a slice names it (`slice_ref`: source cluster and slice name),
so that the mirrored-slice reconcile of a slice's change looks at that slice alone.
`ImportView` answers what the reconcilers ask — the hub's ServiceImport of a key, its
source slices, one source slice — from the cache, with an index from a Service key
to its slices kept current by `observe()` (called from the informer's handler). A key's
source slices, once read, are kept as one tuple until `observe()` sees a change of one of
them: cluster selection reads them on every evaluation of every key with selectors
(docs/reference.md#cluster-selection), and a re-evaluation of them all is one burst.
"""

from __future__ import annotations

import logging
import sys
import threading
from datetime import datetime
from typing import Any, NamedTuple

from member.hubclient import HubClient
from member.hubfeed import HubEventStream, opened_watch
from member.imports.importspec import HeldImport, SourceSlice
from member.informer import Informer, ItemTransform
from shared.constants import ANNOTATION_CHANGED_AT, KIND_ENDPOINT_SLICE, KIND_IMPORT
from shared.models import EndpointSliceExport, ServiceImport, WatchEvent, to_wire
from shared.timefmt import parse_rfc3339

__all__ = [
    "HubImportListWatch",
    "ImportEventStream",
    "ImportView",
    "SliceRef",
    "feed_entry",
    "import_item_key",
    "index_add",
    "index_discard",
    "service_key_of",
    "services_of",
    "slice_item_key",
    "slice_ref",
]

logger = logging.getLogger(__name__)

_SLICE_PREFIX = "slice:"
_ITEM = "item"
_CHANGED_AT = "changedAt"


def _changed_at(item: ServiceImport | EndpointSliceExport) -> datetime | None:
    stamp = (item.metadata.annotations or {}).get(ANNOTATION_CHANGED_AT)
    if not stamp:
        return None
    try:
        return parse_rfc3339(stamp)
    except ValueError:
        logger.warning(
            "%s %s: unreadable %s %r", item.kind, item.metadata.name, ANNOTATION_CHANGED_AT, stamp
        )
        return None


def feed_entry(item: ServiceImport | EndpointSliceExport) -> dict[str, Any]:
    """What the informer caches of one import-feed object (see the module doc): `kind` and
    `metadata.resourceVersion` (what the informer diffs by), `changedAt` (the feed's
    `mcsync.io/changed-at`, parsed) and `item`, the HeldImport or the SourceSlice."""
    value: HeldImport | SourceSlice
    if isinstance(item, EndpointSliceExport):
        value = SourceSlice.of(item)
    else:
        value = HeldImport.of(item)
    return {
        "kind": item.kind,
        "metadata": {"resourceVersion": item.metadata.resource_version},
        _CHANGED_AT: _changed_at(item),
        _ITEM: value,
    }


class SliceRef(NamedTuple):
    """Which source slice a feed event is about, within its Service's namespace."""

    cluster: str
    name: str


def slice_ref(entry: dict[str, Any] | None) -> SliceRef | None:
    """The source slice a `feed_entry()` is; None for a ServiceImport (or no entry)."""
    item = (entry or {}).get(_ITEM)
    return SliceRef(item.cluster, item.name) if isinstance(item, SourceSlice) else None


def slice_item_key(namespace: str, ref: SliceRef) -> str:
    """The informer key of a source slice: "slice:<cluster>/<namespace>/<slice>" (interned:
    the cache and the view's index hold one string)."""
    return sys.intern(f"{_SLICE_PREFIX}{ref.cluster}/{namespace}/{ref.name}")


def import_item_key(entry: dict[str, Any]) -> str:
    """The informer key of a `feed_entry()`; see the module doc."""
    item = entry[_ITEM]
    if isinstance(item, SourceSlice):
        return slice_item_key(item.namespace, SliceRef(item.cluster, item.name))
    return sys.intern(f"{item.namespace}/{item.name}")


def service_key_of(entry: dict[str, Any]) -> str:
    """ "namespace/name" of the Service a `feed_entry()` belongs to."""
    item = entry[_ITEM]
    if isinstance(item, SourceSlice):
        return sys.intern(f"{item.namespace}/{item.service}")
    return sys.intern(f"{item.namespace}/{item.name}")


def services_of(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """The Service keys a change of the feed touches: those of its entry before and after."""
    return sorted({service_key_of(e) for e in (old, new) if e is not None})


class ImportEventStream(HubEventStream):
    """The import feed's watch in the informer's event dialect: each object as its
    `feed_entry()` (bookmarks and errors as wire dicts, as `HubEventStream` gives them)."""

    def __next__(self) -> dict[str, Any]:
        event: WatchEvent = next(self._stream)
        item = event.object
        if isinstance(item, ServiceImport | EndpointSliceExport):
            return {"type": event.type, "object": feed_entry(item)}
        return {"type": event.type, "object": to_wire(item)}


class HubImportListWatch:
    """`member.informer.ListWatch` over this cluster's import feed, in `feed_entry()`s."""

    def __init__(self, hub: HubClient) -> None:
        self._hub = hub

    def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
        def each(item: ServiceImport | EndpointSliceExport) -> dict[str, Any]:
            entry = feed_entry(item)
            return transform(entry) if transform is not None else entry

        return self._hub.list_imports(each)

    def watch(self, *, resource_version: str, timeout_seconds: int) -> ImportEventStream:
        return ImportEventStream(opened_watch(lambda: self._hub.watch_imports(
            resource_version=resource_version, timeout_seconds=timeout_seconds
        )))


def index_add(index: dict[str, tuple[str, ...]], group: str, member: str) -> None:
    """Add `member` to `group` of an index held as tuples: a key has one member or a few
    (its slices), and a tuple of one is 48 bytes where a set is 216, at 10,000 keys per
    index (docs/benchmarks.md §11)."""
    members = index.get(group, ())
    if member not in members:
        index[group] = (*members, member)


def index_discard(index: dict[str, tuple[str, ...]], group: str, member: str) -> None:
    """Remove `member` from `group` (see `index_add`); an emptied group goes."""
    members = tuple(m for m in index.get(group, ()) if m != member)
    if members:
        index[group] = members
    else:
        index.pop(group, None)


class ImportView:
    """The hub's imports as the reconcilers read them: per Service key, the ServiceImport
    and the source slices. Thread-safe; `observe()` runs on the informer's thread."""

    def __init__(self, informer: Informer) -> None:
        self._informer = informer
        self._lock = threading.Lock()
        self._slices: dict[str, tuple[str, ...]] = {}  # Service key -> slice item keys
        self._by_namespace: dict[str, set[str]] = {}  # namespace -> ServiceImport keys
        # Service key -> its source slices as last read (`slices`); dropped by `observe`
        # when one of them changes, under the lock the read holds, so a read never keeps
        # what a change it did not see has replaced.
        self._read: dict[str, tuple[SourceSlice, ...]] = {}

    def observe(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> set[str]:
        """Update the slice index for one change; answers the Service keys it touches."""
        touched: set[str] = set()
        with self._lock:
            for entry, present in ((old, False), (new, True)):
                if entry is None:
                    continue
                service = service_key_of(entry)
                touched.add(service)
                if entry.get("kind") != KIND_ENDPOINT_SLICE:
                    namespace = service.partition("/")[0]
                    if present:
                        self._by_namespace.setdefault(namespace, set()).add(service)
                    else:
                        members = self._by_namespace.get(namespace, set())
                        members.discard(service)
                        if not members:
                            self._by_namespace.pop(namespace, None)
                    continue
                self._read.pop(service, None)
                if present:
                    index_add(self._slices, service, import_item_key(entry))
                else:
                    index_discard(self._slices, service, import_item_key(entry))
        return touched

    def keys_in(self, namespace: str) -> set[str]:
        """The Service keys the hub imports in `namespace` (an index, not a scan)."""
        with self._lock:
            return set(self._by_namespace.get(namespace, ()))

    def get(self, key: str) -> HeldImport | None:
        """The hub's ServiceImport of `key` ("namespace/name"), None when there is none.
        Shared with the cache, and immutable."""
        entry = self._informer.get(key)
        if entry is None or entry.get("kind") != KIND_IMPORT:
            return None
        item: HeldImport = entry[_ITEM]
        return item

    def changed_at(self, key: str) -> datetime | None:
        """When the hub committed the newest change of `key`'s import or slices, as the
        feed's events say (`mcsync.io/changed-at`); None when only listed objects are held
        (a list says what is, not when it changed)."""
        with self._lock:
            items = [key, *self._slices.get(key, ())]
        stamps = [(self._informer.get(item) or {}).get(_CHANGED_AT) for item in items]
        return max((s for s in stamps if s is not None), default=None)

    def slice(self, namespace: str, ref: SliceRef) -> SourceSlice | None:
        """Source slice `ref` of `namespace` (of whichever Service), None when the hub has
        none. Shared with the cache, and immutable."""
        return self._source(slice_item_key(namespace, ref))

    def slices(self, key: str) -> tuple[SourceSlice, ...]:
        """The source slices of `key`'s Service, every cluster's, in a stable order: the
        same tuple until one of them changes (compared by identity, it says "unchanged")."""
        with self._lock:
            held = self._read.get(key)
            if held is not None:
                return held
            # Read under the lock: `observe` runs after the informer's cache changed, and
            # waits for this read before it drops what the read keeps.
            found = (self._source(item) for item in sorted(self._slices.get(key, ())))
            held = tuple(source for source in found if source is not None)
            if key in self._slices:
                self._read[key] = held
            return held

    def _source(self, item: str) -> SourceSlice | None:
        entry = self._informer.get(item)
        if entry is None or entry.get("kind") != KIND_ENDPOINT_SLICE:
            return None
        source: SourceSlice = entry[_ITEM]
        return source

    def keys(self) -> set[str]:
        """Every Service key with a ServiceImport on the hub."""
        return {k for k in self._informer.keys() if not k.startswith(_SLICE_PREFIX)}

    def has_synced(self) -> bool:
        return self._informer.has_synced()
