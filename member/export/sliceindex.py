"""The cluster's EndpointSlices by Service: the slice informer's cache, indexed.

Apart from the reconciler because it is fed by the informer's events (the slice
controller's mapper calls `observe()`), not by reconciles, and because the time a slice
was first seen at a resourceVersion (where the sync latency starts,
docs/reference.md#observability) is a property of the cache, not of one reconcile.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Protocol

from member.export.serviceexport import Lister
from shared.constants import LABEL_SERVICE_NAME
from shared.timefmt import utcnow

__all__ = [
    "SliceSource",
    "SlicesByService",
    "service_key",
    "slice_name",
    "slice_resource_version",
]


class SliceSource(Protocol):
    """The cluster's EndpointSlices by Service key (`SlicesByService`)."""

    def slices_of(self, key: str) -> list[dict[str, Any]]: ...

    def keys(self) -> set[str]: ...

    def observed_at(self, obj: dict[str, Any]) -> datetime | None: ...


# -- the index ----------------------------------------------------------------------------


def service_key(obj: dict[str, Any] | None) -> str | None:
    """ "namespace/<kubernetes.io/service-name>" of a slice; None when it names no Service."""
    if not obj:
        return None
    metadata = obj.get("metadata") or {}
    service = (metadata.get("labels") or {}).get(LABEL_SERVICE_NAME)
    namespace = metadata.get("namespace")
    if not service or not namespace:
        return None
    return f"{namespace}/{service}"


class SlicesByService:
    """The slice informer's cache indexed by Service: fed each informer event by `observe()`.

    Holds names only; `slices_of()` reads the objects from the informer's cache (`slices`,
    keyed "namespace/slice"), so a slice is cached once.
    """

    def __init__(self, slices: Lister) -> None:
        self._slices = slices
        self._lock = threading.Lock()
        self._names: dict[str, set[str]] = {}
        # "namespace/slice" -> (resourceVersion, when this agent first saw it): the start of
        # the fleet's sync latency, carried to every importer with the slice export
        # (`spec.sourceObservedTime`; mcs_endpointslice_sync_latency_seconds there).
        self._seen: dict[str, tuple[str, datetime]] = {}

    def observe(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> set[str]:
        """Index one informer event (ADDED: old None; DELETED: new None); answers the
        Service keys it concerns (two when a slice's Service label changed)."""
        before, after = service_key(old), service_key(new)
        touched: set[str] = set()
        now = utcnow()
        with self._lock:
            if new is None:
                self._seen.pop(_slice_key(old), None)
            else:
                rv = slice_resource_version(new)
                seen = self._seen.get(_slice_key(new))
                if seen is None or seen[0] != rv:
                    self._seen[_slice_key(new)] = (rv, now)
            if before is not None and (new is None or before != after):
                names = self._names.get(before)
                if names is not None:
                    names.discard(slice_name(old))
                    if not names:
                        del self._names[before]
                touched.add(before)
            if after is not None:
                self._names.setdefault(after, set()).add(slice_name(new))
                touched.add(after)
        return touched

    def slices_of(self, key: str) -> list[dict[str, Any]]:
        """The cached slices of the Service `key`, by name."""
        namespace = key.partition("/")[0]
        with self._lock:
            names = sorted(self._names.get(key, ()))
        found = (self._slices.get(f"{namespace}/{name}") for name in names)
        return [obj for obj in found if obj is not None]

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._names)

    def observed_at(self, obj: dict[str, Any]) -> datetime | None:
        """When this agent first saw `obj` at its resourceVersion (an informer event); None
        when it has not seen that version."""
        with self._lock:
            seen = self._seen.get(_slice_key(obj))
        return seen[1] if seen is not None and seen[0] == slice_resource_version(obj) else None


def _slice_key(obj: dict[str, Any] | None) -> str:
    metadata = (obj or {}).get("metadata") or {}
    return f"{metadata.get('namespace') or ''}/{metadata.get('name') or ''}"


def slice_name(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("name") or "")


def slice_resource_version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
