"""What the agent caches of each object: client-go's `SetTransform`, for our four informers.

A Service of ~500 bytes on the wire decodes to ~3.6 KB of Python dicts and strings, and the
agent holds one per Service, ServiceExport and hub record: with 10,000 of each that was most
of its memory (docs/benchmarks.md §6). Each informer therefore runs its objects through a
transform before caching them, keeping only what the agent reads:

* Service — `validate()` and `derive_export()` (`member.export.exportspec`): name, namespace, uid,
  resourceVersion, generation; the spec fields that are exported, and `type`/`clusterIP`
  (ExternalName and headless); of each port its name, protocol, port and appProtocol.
  Labels, annotations, managedFields, status, targetPort/nodePort, clusterIPs … are dropped.
* ServiceExport — the reconciler (`member.export.serviceexport`), the status write and Events:
  everything but managedFields and labels, and of the annotations only the agent's own
  (`mcsync.io/…`; the reconciler reads the exportedSince stamp and its spec hash).
  Its `status` is kept whole: the status write is a PUT of `{**cached, "status": …}` to the
  status subresource, which replaces `.status` with what we send, so a pruned status would
  erase someone else's fields. Metadata of that PUT is ignored by the API server (it copies
  the stored object's), so pruning metadata loses nothing — with one exception the transform
  respects: `managedFields` is *removed*, never set to `[]`, because an empty list in a
  write means "reset the field managers" while an absent one means "keep them".
* Hub record — `HubView` and the reconciler: metadata name, namespace, resourceVersion and
  the agent's own annotations (the duration dedupe reads one), the whole spec (compared
  field by field with the derived export), and only the `Conflict` condition's type, status,
  reason and message (copied into the ServiceExport's status). Other conditions,
  `lastTransitionTime`, `clusterState` and creationTimestamp are dropped.
* EndpointSlice — `member.export.sliceexport`, which sends exactly this
  (docs/reference.md#import-path): metadata name, namespace, resourceVersion and the two labels it
  reads (the Service's name, the managing controller); `addressType`; of each port its name,
  protocol, port and appProtocol; of each endpoint its addresses, the ready / serving / terminating
  conditions, hostname and zone. `nodeName`, `targetRef`, `hints`, `deprecatedTopology`,
  ownerReferences, annotations, managedFields … are local to the cluster and dropped: with
  one slice per Service, pod references were the larger half of each cached slice.

* ServiceImport, derived Service, mirrored EndpointSlice (the import side,
  `member.imports.importer`) — these are ours, and an update of one is a PUT of the cached object
  with our fields laid on (`member.imports.importspec.overlay`), so whatever the cache drops, the
  PUT would erase: only what the API server sets and ignores in an update goes
  (`managedFields`, `creationTimestamp`, `generation`, `selfLink`, a Service's `status`).
  Everything else is kept, so a user's edit of any field we state is still seen and
  repaired, and a finalizer someone added survives our updates. What makes these cheaper
  is interning (below), and a mirrored slice's `endpoints` held packed: one
  `PackedEndpoints`, the list's deflated compact JSON and its length, instead of a dict, a
  list and a string per endpoint (~3.3 KB → ~0.2 KB for 10 endpoints, the larger part of
  a cached slice; 100,000 endpoints at 10,000 imported keys). Nothing is lost:
  `unpacked()` gives the object back with the very list the server sent, which is what
  the reconciler compares (only when its per-resourceVersion memo does not already know)
  and lays its update on (an update states every endpoint anyway). This is the one place
  the shape is not kept; every reader of a cached slice goes through `unpacked()` or
  `endpoint_count()`.

Each transform keeps the *shape* of what it keeps — same keys, same nesting — so the code
that reads the cache needs no change, and is idempotent (the informer may see an object it
already transformed). A value of an unexpected type (a `spec` that is not an object, a port
that is not a mapping) is kept as it is, so the reader still reports it as invalid instead
of the transform hiding it.

Every kept string, keys included, is interned. json decodes a fresh copy of each string per
watch event (and per list page), so without it 10,000 objects carry 10,000 copies of "TCP",
of "lastTransitionTime", of every shared condition message; and the name, namespace, uid and
resourceVersion of a Service are then one string for all three caches (its ServiceExport
and its hub record repeat them). CPython drops an interned string when nothing else holds it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from member.imports.importspec import pack_json, unpack_json
from shared import conditions as c
from shared.constants import LABEL_ENDPOINTSLICE_MANAGED_BY, LABEL_SERVICE_NAME

__all__ = [
    "AGENT_ANNOTATION_PREFIX",
    "PackedEndpoints",
    "endpoint_count",
    "transform_endpointslice",
    "transform_hub_record",
    "transform_import_object",
    "transform_service",
    "transform_service_export",
    "unpacked",
]

AGENT_ANNOTATION_PREFIX = "mcsync.io/"
"""Annotations the agent writes and reads back (exportedSince, spec hash, observed version)."""

_SERVICE_METADATA = ("name", "namespace", "uid", "resourceVersion", "generation")
# Every Service spec field `member.export.exportspec` reads; the rest is local to the cluster.
_SERVICE_SPEC = (
    "type",
    "clusterIP",
    "ports",
    "sessionAffinity",
    "sessionAffinityConfig",
    "internalTrafficPolicy",
    "trafficDistribution",
    "ipFamilies",
)
_PORT_FIELDS = ("name", "protocol", "port", "appProtocol")
_HUB_METADATA = ("name", "namespace", "resourceVersion")
_CONDITION_FIELDS = ("type", "status", "reason", "message")
_SLICE_METADATA = ("name", "namespace", "resourceVersion")
_SLICE_LABELS = (LABEL_SERVICE_NAME, LABEL_ENDPOINTSLICE_MANAGED_BY)
_ENDPOINT_FIELDS = ("addresses", "hostname", "zone")
_ENDPOINT_CONDITIONS = ("ready", "serving", "terminating")
# Never read, and the largest part of a real object's metadata.
_DROPPED_METADATA = frozenset({"managedFields", "labels", "ownerReferences"})
# Set by the API server, ignored by it in an update, and compared by no import reconciler.
_SERVER_METADATA = frozenset({"managedFields", "creationTimestamp", "generation", "selfLink"})


def transform_service(obj: dict[str, Any]) -> dict[str, Any]:
    """A Service reduced to what `validate()` and `derive_export()` read (see module doc)."""
    out = _type_info(obj)
    out["metadata"] = _pick_metadata(obj.get("metadata"), _SERVICE_METADATA)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        kept: dict[str, Any] = {}
        for field in _SERVICE_SPEC:
            if field in spec:
                value = spec[field]
                kept[field] = _ports(value) if field == "ports" else _compact(value)
        out["spec"] = kept
    elif "spec" in obj:
        out["spec"] = spec
    return out


def transform_service_export(obj: dict[str, Any]) -> dict[str, Any]:
    """A ServiceExport without managedFields, labels and foreign annotations; status whole."""
    out = _type_info(obj)
    for field, value in obj.items():
        if field in ("apiVersion", "kind"):
            continue
        if field == "metadata" and isinstance(value, dict):
            metadata = {
                sys.intern(k): _compact(v) for k, v in value.items() if k not in _DROPPED_METADATA
            }
            if "annotations" in metadata:
                ours = _own_annotations(metadata["annotations"])
                if ours:
                    metadata["annotations"] = ours
                else:
                    del metadata["annotations"]
            out["metadata"] = metadata
        else:
            out[sys.intern(field)] = _compact(value)
    return out


def transform_hub_record(obj: dict[str, Any]) -> dict[str, Any]:
    """A hub record (wire dict) reduced to what `HubView` and the reconciler read."""
    out = _type_info(obj)
    metadata = obj.get("metadata")
    kept = _pick_metadata(metadata, _HUB_METADATA)
    if isinstance(metadata, dict) and isinstance(kept, dict):
        ours = _own_annotations(metadata.get("annotations"))
        if ours:
            kept["annotations"] = _compact(ours)
    out["metadata"] = kept
    spec = obj.get("spec")
    if isinstance(spec, dict):
        out["spec"] = {
            sys.intern(k): _ports(v) if k == "ports" else _compact(v) for k, v in spec.items()
        }
    elif "spec" in obj:
        out["spec"] = spec
    status = obj.get("status")
    if isinstance(status, dict):
        out["status"] = {"conditions": _conflict_only(status.get("conditions"))}
    return out


def transform_endpointslice(obj: dict[str, Any]) -> dict[str, Any]:
    """An EndpointSlice reduced to what is sent to the hub (see module doc)."""
    out = _type_info(obj)
    metadata = obj.get("metadata")
    kept = _pick_metadata(metadata, _SLICE_METADATA)
    if isinstance(metadata, dict) and isinstance(kept, dict):
        labels = metadata.get("labels")
        if isinstance(labels, dict):
            ours = {k: _compact(labels[k]) for k in _SLICE_LABELS if k in labels}
            if ours:
                kept["labels"] = ours
    out["metadata"] = kept
    if "addressType" in obj:
        out["addressType"] = _compact(obj["addressType"])
    if "ports" in obj:
        out["ports"] = _ports(obj["ports"])
    if "endpoints" in obj:
        endpoints = obj["endpoints"]
        out["endpoints"] = (
            [_endpoint(e) for e in endpoints] if isinstance(endpoints, list) else endpoints
        )
    return out


def transform_import_object(obj: dict[str, Any]) -> dict[str, Any]:
    """A ServiceImport, derived Service or mirrored EndpointSlice, as the import side
    caches it: without the server's bookkeeping (`_SERVER_METADATA`; a Service's status),
    every string interned; everything else whole (see the module doc)."""
    out: dict[str, Any] = {}
    for field, value in obj.items():
        if field == "metadata" and isinstance(value, dict):
            out["metadata"] = {
                sys.intern(k): _compact(v) for k, v in value.items() if k not in _SERVER_METADATA
            }
        elif field == "status" and obj.get("kind") == "Service":
            continue
        elif field == "endpoints" and isinstance(value, list):
            out["endpoints"] = PackedEndpoints.of(value)
        else:
            out[sys.intern(field)] = _compact(value)
    return out


@dataclass(frozen=True, slots=True)
class PackedEndpoints:
    """A cached mirrored slice's `endpoints` list, packed (see the module doc): `packed` is
    the list exactly as the server sent it (`member.imports.importspec.pack_json`), `count` its
    length."""

    count: int
    packed: bytes

    @classmethod
    def of(cls, endpoints: list[Any]) -> PackedEndpoints:
        return cls(len(endpoints), pack_json(endpoints))

    def unpack(self) -> list[Any]:
        """The list itself, freshly decoded: the caller's to change."""
        endpoints: list[Any] = unpack_json(self.packed)
        return endpoints


def unpacked(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A cached import object with its `endpoints` as the list the server sent (a shallow
    copy when they were packed; `obj` itself otherwise)."""
    packed = obj.get("endpoints")
    if isinstance(packed, PackedEndpoints):
        return {**obj, "endpoints": packed.unpack()}
    return obj if isinstance(obj, dict) else dict(obj)


def endpoint_count(obj: Mapping[str, Any]) -> int:
    """How many endpoints a cached (or an answered) EndpointSlice has."""
    endpoints = obj.get("endpoints")
    if isinstance(endpoints, PackedEndpoints):
        return endpoints.count
    return len(endpoints) if isinstance(endpoints, list) else 0


# -- helpers --------------------------------------------------------------------------------


def _compact(value: Any) -> Any:
    """`value` rebuilt with every string (keys too) interned; other values as they are."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, dict):
        return {sys.intern(k) if isinstance(k, str) else k: _compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def _type_info(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: _compact(obj[k]) for k in ("apiVersion", "kind") if k in obj}


def _pick_metadata(metadata: Any, fields: Iterable[str]) -> Any:
    if not isinstance(metadata, dict):
        return metadata
    kept = {k: _compact(metadata[k]) for k in fields if k in metadata}
    # An object being deleted is handled differently: never drop the mark.
    if "deletionTimestamp" in metadata:
        kept["deletionTimestamp"] = _compact(metadata["deletionTimestamp"])
    return kept


def _own_annotations(annotations: Any) -> dict[str, Any] | None:
    if not isinstance(annotations, dict):
        return None
    return {k: v for k, v in annotations.items() if k.startswith(AGENT_ANNOTATION_PREFIX)}


def _ports(ports: Any) -> Any:
    if not isinstance(ports, list):
        return ports  # exportspec reports "ports is not a list"; keep it reportable
    return [_port(port) for port in ports]


def _port(port: Any) -> Any:
    if not isinstance(port, dict):
        return port
    return {k: _compact(port[k]) for k in _PORT_FIELDS if k in port}


def _endpoint(endpoint: Any) -> Any:
    if not isinstance(endpoint, dict):
        return endpoint
    kept = {k: _compact(endpoint[k]) for k in _ENDPOINT_FIELDS if k in endpoint}
    conditions = endpoint.get("conditions")
    if isinstance(conditions, dict):
        kept["conditions"] = {k: conditions[k] for k in _ENDPOINT_CONDITIONS if k in conditions}
    elif "conditions" in endpoint:
        kept["conditions"] = conditions
    return kept


def _conflict_only(conditions: Any) -> list[dict[str, Any]]:
    if not isinstance(conditions, list):
        return []
    return [
        {k: _compact(condition[k]) for k in _CONDITION_FIELDS if k in condition}
        for condition in conditions
        if isinstance(condition, dict) and condition.get("type") == c.CONFLICT
    ]
