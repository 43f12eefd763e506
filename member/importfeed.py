"""The hub's import feed, followed by the generic informer, and the view the import
reconcilers read from it (SPEC §2.8, §4.3).

`GET …/clusters/{c}/imports` lists every ServiceImport and EndpointSliceExport of the fleet
and `?watch=true` streams their changes: the same list-then-watch, relist-on-410 protocol as
the export feed, so `HubImportListWatch` plugs into `member.informer.Informer` exactly as
`member.hubfeed.HubExportListWatch` does (and reuses its event-stream adapter). The feed is
pushed, never polled.

One informer caches both kinds, so each needs a key of its own (`import_item_key`): a
ServiceImport is "namespace/name", the same key as the Kubernetes objects made from it; an
EndpointSliceExport is "slice:<cluster>/<namespace>/<slice>" (two clusters may have slices
of one name). `ImportView` answers what the reconcilers ask — the hub's ServiceImport of a
key, and the source slices of that key — from the cache, with an index from a Service key
to its slices kept current by `observe()` (called from the informer's handler).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from member.hubclient import HubClient, HubGone
from member.hubfeed import HubEventStream
from member.informer import Informer, ItemTransform, ResourceExpired
from shared.constants import ANNOTATION_CHANGED_AT, KIND_ENDPOINT_SLICE, KIND_IMPORT
from shared.models import EndpointSliceExport, ServiceImport, to_wire
from shared.timefmt import parse_rfc3339

__all__ = ["HubImportListWatch", "ImportView", "import_item_key", "service_key_of"]

logger = logging.getLogger(__name__)

_SLICE_PREFIX = "slice:"


def import_item_key(obj: dict[str, Any]) -> str:
    """The informer key of an import-feed object (wire dict); see the module doc."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace") or ""
    name = metadata.get("name") or ""
    if obj.get("kind") == KIND_ENDPOINT_SLICE:
        cluster = (obj.get("spec") or {}).get("clusterId") or ""
        return f"{_SLICE_PREFIX}{cluster}/{namespace}/{name}"
    return f"{namespace}/{name}"


def service_key_of(obj: dict[str, Any]) -> str:
    """"namespace/name" of the Service an import-feed object belongs to."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace") or ""
    if obj.get("kind") == KIND_ENDPOINT_SLICE:
        return f"{namespace}/{(obj.get('spec') or {}).get('serviceName') or ''}"
    return f"{namespace}/{metadata.get('name') or ''}"


class HubImportListWatch:
    """`member.informer.ListWatch` over this cluster's import feed."""

    def __init__(self, hub: HubClient) -> None:
        self._hub = hub

    def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
        def each(item: ServiceImport | EndpointSliceExport) -> dict[str, Any]:
            wire = to_wire(item)
            return transform(wire) if transform is not None else wire

        return self._hub.list_imports(each)

    def watch(self, *, resource_version: str, timeout_seconds: int) -> HubEventStream:
        try:
            stream = self._hub.watch_imports(
                resource_version=resource_version, timeout_seconds=timeout_seconds
            )
        except HubGone as exc:
            raise ResourceExpired(str(exc)) from None
        return HubEventStream(stream)


def _index(index: dict[str, set[str]], group: str, member: str, present: bool) -> None:
    if present:
        index.setdefault(group, set()).add(member)
        return
    members = index.get(group)
    if members is not None:
        members.discard(member)
        if not members:
            del index[group]


class ImportView:
    """The hub's imports as the reconcilers read them: per Service key, the ServiceImport
    and the source slices. Thread-safe; `observe()` runs on the informer's thread."""

    def __init__(self, informer: Informer) -> None:
        self._informer = informer
        self._lock = threading.Lock()
        self._slices: dict[str, set[str]] = {}  # Service key -> slice item keys
        self._by_namespace: dict[str, set[str]] = {}  # namespace -> ServiceImport keys

    def observe(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> set[str]:
        """Update the slice index for one change; answers the Service keys it touches."""
        touched: set[str] = set()
        with self._lock:
            for obj, present in ((old, False), (new, True)):
                if obj is None:
                    continue
                service = service_key_of(obj)
                touched.add(service)
                if obj.get("kind") != KIND_ENDPOINT_SLICE:
                    _index(self._by_namespace, service.partition("/")[0], service, present)
                    continue
                _index(self._slices, service, import_item_key(obj), present)
        return touched

    def keys_in(self, namespace: str) -> set[str]:
        """The Service keys the hub imports in `namespace` (an index, not a scan)."""
        with self._lock:
            return set(self._by_namespace.get(namespace, ()))

    def get(self, key: str) -> ServiceImport | None:
        """The hub's ServiceImport of `key` ("namespace/name"), None when there is none."""
        raw = self._informer.get(key)
        if raw is None or raw.get("kind") != KIND_IMPORT:
            return None
        try:
            return ServiceImport.model_validate(raw)
        except ValidationError as exc:
            logger.error("hub ServiceImport %s does not parse, ignoring it: %s", key, exc)
            return None

    def changed_at(self, key: str) -> datetime | None:
        """When the hub committed the newest change of `key`'s import or slices, as the
        feed's events say (`mcsync.io/changed-at`); None when only listed objects are held
        (a list says what is, not when it changed)."""
        with self._lock:
            items = [key, *self._slices.get(key, ())]
        newest: datetime | None = None
        for item in items:
            raw = self._informer.get(item)
            text = ((raw or {}).get("metadata") or {}).get("annotations", {}) or {}
            stamp = text.get(ANNOTATION_CHANGED_AT)
            if not stamp:
                continue
            try:
                moment = parse_rfc3339(str(stamp))
            except ValueError:
                continue
            newest = moment if newest is None else max(newest, moment)
        return newest

    def slices(self, key: str) -> list[EndpointSliceExport]:
        """The source slices of `key`'s Service, every cluster's, in a stable order."""
        with self._lock:
            items = sorted(self._slices.get(key, ()))
        answer: list[EndpointSliceExport] = []
        for item in items:
            raw = self._informer.get(item)
            if raw is None:
                continue
            try:
                answer.append(EndpointSliceExport.model_validate(raw))
            except ValidationError as exc:
                logger.error("hub EndpointSliceExport %s does not parse, skipped: %s", item, exc)
        return answer

    def keys(self) -> set[str]:
        """Every Service key with a ServiceImport on the hub."""
        return {k for k in self._informer.keys() if not k.startswith(_SLICE_PREFIX)}

    def has_synced(self) -> bool:
        return self._informer.has_synced()
