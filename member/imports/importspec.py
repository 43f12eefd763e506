"""Pure: the hub's ServiceImport and slices → the exact Kubernetes objects of
docs/reference.md#import-path.

Every cluster, the exporters included, holds three kinds of object per imported key; this
module says what each must look like, and nothing else (no I/O, no clock), so every
outcome is a plain data test:

* `desired_service_import()` — the MCS `ServiceImport` `<ns>/<name>`: type, the union's
  ports, session affinity, ipFamilies, the traffic policies the served API version has,
  `spec.ips` (ClusterSetIP only: the derived Service's `clusterIPs`, one per family, in the
  import's `ipFamilies` order), the winner's exported labels and annotations plus our
  managed-by label, and `status.clusters`.
* `desired_derived_service()` — the Service that gives the ClusterSetIP: `mcsync-` + the
  first 10 hex characters of SHA-256 of the Service name (`derived_service_name()`; 20 or
  56 when that name is taken: `derived_service_names()`, chosen by
  `member.imports.importowners`), no selector, the union's ports, `clusterIP: None` for Headless,
  `ipFamilyPolicy` SingleStack / RequireDualStack from the families, owned by the
  ServiceImport.
* `desired_slices()` — one EndpointSlice per source slice (this cluster's own included),
  each named `<derived Service>-<10 hex of sha256(cluster/slice)>` (`mirrored_slice_name`:
  deterministic, so a restarted agent finds what it wrote; 28 characters for a derived
  Service on its first name), labelled with the derived Service in use,
  carrying only the ports its source cluster serves in the import; a source serving none
  of them contributes no slice. Owned by the derived Service. A source slice is held as a
  `SourceSlice` (parsed once, immutable, its endpoints one `pack_json()` bytes) and a
  desired slice as a `MirroredSlice` tuple, so that "is this still what we wrote?" is a
  tuple equality (`member.imports.mirroredslices`); `mirrored_body()` spells the
  object out.

"Equal" is `matches(desired, existing)`: every field we state must be what the cluster
holds; a field we state as None must be absent; a field we do not state is the API
server's business (defaults such as `targetPort`, the allocated `clusterIP`, `uid`). So an
object the server defaulted is not rewritten, and a field the import no longer has (a
trafficDistribution dropped by the winner) is removed. `overlay()` gives the body of the
update that makes an existing object match: the existing object with our fields laid on.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import TypeAdapter

from shared import properties
from shared.constants import (
    ENDPOINTSLICE_MANAGER,
    LABEL_ENDPOINTSLICE_MANAGED_BY,
    LABEL_MANAGED_BY,
    LABEL_MCS_SERVICE_NAME,
    LABEL_MCS_SOURCE_CLUSTER,
    LABEL_SERVICE_NAME,
    MANAGED_BY_MCSYNC,
    MCS_GROUP,
)
from shared.models import Endpoint, EndpointSliceExport, ServiceImport, ServiceImportSpec

__all__ = [
    "DERIVED_PREFIX",
    "ENDPOINTSLICE_API_VERSION",
    "OPTIONAL_IMPORT_FIELDS",
    "SERVICEIMPORT_KIND",
    "HeldImport",
    "MirroredSlice",
    "SlicePort",
    "SourceSlice",
    "create_body",
    "derived_service_name",
    "derived_service_names",
    "desired_derived_service",
    "desired_service_import",
    "desired_service_import_status",
    "desired_slices",
    "is_managed",
    "matches",
    "mirrored_body",
    "mirrored_slice",
    "mirrored_slice_name",
    "ordered_ips",
    "overlay",
    "owned_by",
    "owner_uids",
    "pack_json",
    "served_ports",
    "unpack_json",
]

DERIVED_PREFIX = "mcsync-"
SERVICEIMPORT_KIND = "ServiceImport"
ENDPOINTSLICE_API_VERSION = "discovery.k8s.io/v1"
# ServiceImport spec fields that not every release of the CRD has; the caller passes those
# its served version has (the upstream v1alpha1 gained them late).
OPTIONAL_IMPORT_FIELDS = frozenset({"internalTrafficPolicy", "trafficDistribution"})
_HASH_CHARS = 10
_DERIVED_CHARS = (10, 20, 56)
_HEADLESS = "Headless"


# Raw deflate, a 1 KiB window and the least memory: ~8 µs to pack 10 endpoints (a default
# zlib stream spends ~140 µs allocating its window), ~920 → ~120 bytes.
_WBITS = -10


def pack_json(value: Any) -> bytes:
    """`value` as compact JSON, deflated: the form in which the agent holds a list of
    endpoints it only compares and, now and then, spells out (the import feed's source
    slices, the mirrored slices' cache). Deterministic, so equal values pack equal."""
    packer = zlib.compressobj(1, zlib.DEFLATED, _WBITS, 1)
    text = json.dumps(value, separators=(",", ":")).encode()
    return packer.compress(text) + packer.flush()


def unpack_json(packed: bytes) -> Any:
    """The value `pack_json()` packed, freshly decoded (the caller's to change)."""
    return json.loads(zlib.decompress(packed, _WBITS))


def _digest(text: str, chars: int = _HASH_CHARS) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:chars]


def derived_service_name(service_name: str) -> str:
    """`mcsync-` + the first 10 hex characters of SHA-256 of the Service name
    (docs/reference.md#import-path): the first choice of `derived_service_names()`, and the name
    almost every key keeps."""
    return DERIVED_PREFIX + _digest(service_name)


def derived_service_names(service_name: str) -> tuple[str, ...]:
    """The names a derived Service of `service_name` may take, in the order it takes them
    (docs/reference.md#import-path): 10, then 20, then 56 hex characters of SHA-256 of the Service
    name, the longer ones when the shorter are taken (by another key's derived Service or a foreign
    object). The longest is 63 characters, a DNS-1123 label."""
    return tuple(DERIVED_PREFIX + _digest(service_name, chars) for chars in _DERIVED_CHARS)


def mirrored_slice_name(
    service_name: str, cluster_id: str, slice_name: str, *, derived: str | None = None
) -> str:
    """The mirrored slice of `cluster_id`'s slice `slice_name`: `<derived Service>-<10 hex>`,
    unique per source slice (a slash cannot occur in a cluster id) and, since two keys
    never share a derived Service and the hash part has a fixed length, per key. `derived`:
    the name of the key's derived Service (default: its first choice). A DNS-1123
    subdomain (≤ 74 characters), as EndpointSlice names must be."""
    prefix = derived if derived is not None else derived_service_name(service_name)
    return f"{prefix}-{_digest(f'{cluster_id}/{slice_name}')}"


def is_managed(obj: Mapping[str, Any] | None) -> bool:
    """True when `obj` carries our managed-by label: the first half of ownership
    (docs/reference.md#export-path); a Service or EndpointSlice needs `owned_by()` too."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return bool(labels.get(LABEL_MANAGED_BY) == MANAGED_BY_MCSYNC)


def owner_uids(obj: Mapping[str, Any] | None) -> frozenset[str]:
    """The uids of `obj`'s controller ownerReferences (what the garbage collector and
    ownership follow)."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return frozenset(
        str(ref.get("uid"))
        for ref in refs
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid")
    )


def owned_by(obj: Mapping[str, Any] | None, owner: Mapping[str, Any] | None) -> bool:
    """True when `obj` is ours as a dependent of `owner` (docs/reference.md#export-path): it carries
    our managed-by label and a controller ownerReference to `owner`'s uid. The caller passes an
    `owner` that is itself ours (our ServiceImport, or a derived Service owned by it), so
    ownership is a chain of uids, never a label alone."""
    if obj is None or owner is None or not is_managed(obj):
        return False
    uid = (owner.get("metadata") or {}).get("uid")
    return bool(uid) and str(uid) in owner_uids(obj)


def _port(port: SlicePort) -> dict[str, Any]:
    wire: dict[str, Any] = {"name": port.name, "protocol": port.protocol, "port": port.port}
    # None: an appProtocol the import no longer has is removed.
    wire["appProtocol"] = port.app_protocol
    return wire


def _owner(api_version: str, kind: str, owner: Mapping[str, Any]) -> dict[str, Any]:
    metadata = owner.get("metadata") or {}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
        "controller": True,
        "blockOwnerDeletion": False,
    }


def _is_headless(imported: HeldImport) -> bool:
    return imported.type == _HEADLESS


def ordered_ips(service: Mapping[str, Any] | None, families: Iterable[str]) -> list[str]:
    """The Service's `clusterIPs`, one per family of `families`, in that order
    (docs/reference.md#import-path).

    Families the Service has no address of are skipped; with no families stated, the
    Service's own order. Empty for a headless Service or none at all."""
    spec = (service or {}).get("spec") or {}
    ips = [ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and ip != "None"]
    by_family = {("IPv6" if ":" in ip else "IPv4"): ip for ip in ips}
    wanted = list(families)
    if not wanted:
        return ips
    return [by_family[family] for family in wanted if family in by_family]


def desired_service_import(
    imported: HeldImport | ServiceImport,
    *,
    api_version: str,
    derived_service: Mapping[str, Any] | None,
    optional_fields: frozenset[str] = OPTIONAL_IMPORT_FIELDS,
) -> dict[str, Any]:
    """The ServiceImport this cluster must hold for the hub's `imported` (without status).

    `api_version`: the served `multicluster.x-k8s.io/<version>`; `derived_service`: this
    cluster's derived Service as it is now (None before it exists: no `ips` yet);
    `optional_fields`: which of `OPTIONAL_IMPORT_FIELDS` the served version has.
    """
    held = HeldImport.of(imported)
    labels = {**dict(held.labels), LABEL_MANAGED_BY: MANAGED_BY_MCSYNC}
    body: dict[str, Any] = {
        "type": held.type,
        "ports": [_port(p) for p in held.ports],
        "sessionAffinity": held.session_affinity,
        "sessionAffinityConfig": held.affinity_config(),
        "ipFamilies": list(held.ip_families) or None,
        "ips": None
        if _is_headless(held)
        else (ordered_ips(derived_service, held.ip_families) or None),
    }
    if "internalTrafficPolicy" in optional_fields:
        body["internalTrafficPolicy"] = held.internal_traffic_policy
    if "trafficDistribution" in optional_fields:
        body["trafficDistribution"] = held.traffic_distribution
    return {
        "apiVersion": api_version,
        "kind": SERVICEIMPORT_KIND,
        "metadata": {
            "name": held.name,
            "namespace": held.namespace,
            "labels": labels,
            "annotations": dict(held.annotations),
        },
        "spec": body,
    }


def desired_service_import_status(imported: HeldImport | ServiceImport) -> dict[str, Any]:
    """`status` of the ServiceImport: the exporting clusters, sorted
    (docs/reference.md#import-path)."""
    return {"clusters": [{"cluster": cluster} for cluster in HeldImport.of(imported).clusters]}


def desired_derived_service(
    imported: HeldImport | ServiceImport,
    *,
    owner: Mapping[str, Any],
    derived_name: str | None = None,
) -> dict[str, Any]:
    """The derived Service of `imported`, owned by `owner` (this cluster's ServiceImport),
    named `derived_name` (default: the first of `derived_service_names()`)."""
    held = HeldImport.of(imported)
    name = held.name
    headless = _is_headless(held)
    families = list(held.ip_families)
    affinity = not headless and held.session_affinity == "ClientIP"
    body: dict[str, Any] = {
        "type": "ClusterIP",
        "selector": None,
        "ports": [_port(p) for p in held.ports],
        # Kubernetes ignores affinity on headless Services: only ClusterSetIP carries it.
        "sessionAffinity": "ClientIP" if affinity else "None",
        "sessionAffinityConfig": None,
        "internalTrafficPolicy": held.internal_traffic_policy or "Cluster",
        "trafficDistribution": held.traffic_distribution,
    }
    if affinity:
        if held.session_affinity_config is not None:
            body["sessionAffinityConfig"] = held.affinity_config()
        else:
            # The API server defaults the ClientIP timeout: not stating it (rather than
            # stating it absent) keeps a defaulted Service from being rewritten for ever.
            del body["sessionAffinityConfig"]
    if headless:
        body["clusterIP"] = "None"
    if families:
        body["ipFamilies"] = families
        body["ipFamilyPolicy"] = "RequireDualStack" if len(families) > 1 else "SingleStack"
    owner_version = str(owner.get("apiVersion") or f"{MCS_GROUP}/v1beta1")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": derived_name if derived_name is not None else derived_service_name(name),
            "namespace": held.namespace,
            "labels": {LABEL_MCS_SERVICE_NAME: name, LABEL_MANAGED_BY: MANAGED_BY_MCSYNC},
            "ownerReferences": [_owner(owner_version, SERVICEIMPORT_KIND, owner)],
        },
        "spec": body,
    }


def served_ports(imported: HeldImport | ServiceImport) -> dict[str, frozenset[str]]:
    """cluster → names of the import ports it serves (the per-port cluster lists,
    docs/reference.md#conflicts)."""
    served: dict[str, set[str]] = {}
    for port_name, clusters in HeldImport.of(imported).served:
        for cluster in clusters:
            served.setdefault(cluster, set()).add(port_name)
    return {cluster: frozenset(names) for cluster, names in served.items()}


class SlicePort(NamedTuple):
    """A port of a source slice, as a mirrored slice states it (None: no appProtocol)."""

    name: str
    protocol: str
    port: int | None
    app_protocol: str | None


def _interned(pairs: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((sys.intern(k), sys.intern(v)) for k, v in pairs.items()))


@dataclass(frozen=True, slots=True)
class HeldImport:
    """The hub's ServiceImport in the compact immutable form the import feed keeps.

    Made once when the hub's `ServiceImport` arrives (already validated by the hub client)
    and read by every reconcile of its key: exactly the fields the three desired objects
    are built from, every string interned, labels and annotations as sorted pairs, the
    status as the sorted exporting clusters and, per import port name, the clusters that
    serve it. Each field of each property of the one table (`shared.properties`) is an
    attribute named as the import spec's, in the form its row's `held` says. It holds a
    tenth of what a validated pydantic model of the same import does, which counts at tens
    of thousands of imported keys (docs/benchmarks.md §11). JSON-valued fields
    (`session_affinity_config`, the cluster selection) are held as canonical JSON bytes
    (rare; kept exact).
    """

    namespace: str
    name: str
    type: str
    ports: tuple[SlicePort, ...]
    session_affinity: str
    session_affinity_config: bytes | None
    internal_traffic_policy: str | None
    traffic_distribution: str | None
    ip_families: tuple[str, ...]
    labels: tuple[tuple[str, str], ...]
    annotations: tuple[tuple[str, str], ...]
    clusters: tuple[str, ...]
    served: tuple[tuple[str, tuple[str, ...]], ...]
    # The winner's cluster selection (docs/reference.md#cluster-selection), each field's
    # canonical JSON; None where absent (`member.imports.selection` reads them).
    cluster_selectors: bytes | None = None
    cluster_selection: bytes | None = None
    import_clusters: bytes | None = None

    @classmethod
    def of(cls, imported: ServiceImport | HeldImport) -> HeldImport:
        """`imported` held compactly (a `HeldImport` is answered as it is).

        Each property of the one table is held as its row says (`_held`); the ports and
        the status are the agent's own forms.
        """
        if isinstance(imported, HeldImport):
            return imported
        spec, status = imported.spec, imported.status
        held: dict[str, Any] = {}
        for prop in properties.PROPERTIES:
            if prop.held is not properties.Held.OWN:
                held.update(_held(prop, spec))
        return cls(
            namespace=sys.intern(imported.metadata.namespace or ""),
            name=sys.intern(imported.metadata.name),
            ports=tuple(
                SlicePort(sys.intern(p.name), sys.intern(p.protocol), p.port, p.app_protocol)
                for p in spec.ports
            ),
            clusters=tuple(sorted({sys.intern(c.cluster) for c in status.clusters})),
            served=tuple(
                (sys.intern(p.name), tuple(sys.intern(c) for c in p.clusters)) for p in status.ports
            ),
            **held,
        )

    def affinity_config(self) -> dict[str, Any] | None:
        """`sessionAffinityConfig` as the objects state it; None when the import has none."""
        if self.session_affinity_config is None:
            return None
        config: dict[str, Any] = json.loads(self.session_affinity_config)
        return config


def _held(prop: properties.ImportProperty, spec: ServiceImportSpec) -> dict[str, Any]:
    """`prop`'s fields in `spec`, by attribute, in the form its row says the agent holds
    them."""
    return {
        attribute: _hold(prop, value) for attribute, value in prop.import_fields(spec).items()
    }


def _hold(prop: properties.ImportProperty, value: Any) -> Any:
    kind = prop.held
    if kind is properties.Held.WORD:
        return sys.intern(str(prop.absent if value is None else value))
    if kind is properties.Held.OPTIONAL_WORD:
        return None if value is None else str(value)
    if kind is properties.Held.WORDS:
        return tuple(sys.intern(str(item)) for item in value or ())
    if kind is properties.Held.PAIRS:
        return _interned(value or {})
    if kind is properties.Held.JSON:
        if value is None:
            return None
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    raise ValueError(f"{prop.name} is held by the agent in its own way, not by its row")


# Every held property of the table has its attribute here: a row added without one fails
# at import, not in a reconcile.
_MISSING = {
    attribute
    for p in properties.PROPERTIES
    if p.held is not properties.Held.OWN
    for attribute in p.import_attributes
} - set(HeldImport.__dataclass_fields__)
if _MISSING:
    raise TypeError(f"HeldImport lacks the held properties {sorted(_MISSING)}")

_ENDPOINTS: TypeAdapter[list[Endpoint]] = TypeAdapter(list[Endpoint])


@dataclass(frozen=True, slots=True)
class SourceSlice:
    """One source cluster's slice, in the compact immutable form the import feed keeps.

    Made once when the hub's `EndpointSliceExport` arrives (already validated by the hub
    client) and never parsed again: a reconcile reads these fields, and two slices with
    the same endpoints compare by one bytes equality. `endpoints` is the `pack_json()` of
    the endpoints exactly as a mirrored slice states them; `mirrored` the name of that
    slice.
    """

    namespace: str
    service: str
    cluster: str
    name: str
    address_type: str
    ports: tuple[SlicePort, ...]
    endpoints: bytes
    mirrored: str
    # When the source agent saw this version (`spec.sourceObservedTime`): where the sync
    # latency starts. Not part of what is mirrored, so not of equality.
    # Seconds since the epoch (a float is a third of a datetime's size, per source slice).
    observed: float | None = field(default=None, compare=False)

    @classmethod
    def of(cls, export: EndpointSliceExport) -> SourceSlice:
        spec = export.spec
        cluster = spec.cluster_id or ""
        return cls(
            namespace=export.metadata.namespace or "",
            service=spec.service_name,
            cluster=cluster,
            name=export.metadata.name,
            address_type=spec.address_type,
            ports=tuple(SlicePort(p.name, p.protocol, p.port, p.app_protocol) for p in spec.ports),
            endpoints=pack_json(
                _ENDPOINTS.dump_python(
                    spec.endpoints, mode="json", by_alias=True, exclude_none=True
                )
            ),
            mirrored=mirrored_slice_name(spec.service_name, cluster, export.metadata.name),
            observed=(
                spec.source_observed_time.timestamp()
                if spec.source_observed_time is not None
                else None
            ),
        )


class MirroredSlice(NamedTuple):
    """The EndpointSlice that must mirror one source slice, compactly: equal desired
    states are equal tuples (`mirrored_body()` gives the object itself)."""

    name: str
    namespace: str
    service: str
    cluster: str
    owner_name: str
    owner_uid: str
    address_type: str
    ports: tuple[SlicePort, ...]
    endpoints: bytes


def mirrored_slice(
    imported: HeldImport | ServiceImport,
    source: SourceSlice,
    *,
    owner: Mapping[str, Any],
    served: Mapping[str, frozenset[str]] | None = None,
) -> MirroredSlice | None:
    """The mirrored slice of `source`, owned by `owner` (this cluster's derived Service);
    None when there must be none: a source of another key or without a cluster, or one
    whose cluster serves none of the import's ports. `served`: `served_ports(imported)`,
    when the caller mirrors many sources of one import."""
    held = HeldImport.of(imported)
    name = held.name
    if source.service != name or source.namespace != held.namespace:
        return None
    if not source.cluster:
        return None
    ports = source.ports
    if held.ports:  # an import without ports: nothing to cut
        kept = (served if served is not None else served_ports(held)).get(source.cluster)
        ports = tuple(p for p in ports if kept and p.name in kept)
        if not ports:
            return None
    metadata = owner.get("metadata") or {}
    owner_name = str(metadata.get("name") or "")
    return MirroredSlice(
        name=_mirrored_name(source, owner_name),
        namespace=source.namespace,
        service=name,
        cluster=source.cluster,
        owner_name=owner_name,
        owner_uid=str(metadata.get("uid") or ""),
        address_type=source.address_type,
        ports=ports,
        endpoints=source.endpoints,
    )


def _mirrored_name(source: SourceSlice, derived: str) -> str:
    """`source.mirrored` (made for the first-choice derived name) when `derived` is that
    name, as for almost every key; else the name under the derived Service in use."""
    mirrored = source.mirrored
    if len(mirrored) == len(derived) + 1 + _HASH_CHARS and mirrored.startswith(derived):
        return mirrored
    return f"{derived}{mirrored[-1 - _HASH_CHARS:]}"


def desired_slices(
    imported: HeldImport | ServiceImport,
    sources: Iterable[SourceSlice],
    *,
    owner: Mapping[str, Any],
) -> dict[str, MirroredSlice]:
    """name → the mirrored slice of each source slice of `imported`'s key (see
    `mirrored_slice()`); sources of another key are ignored."""
    held = HeldImport.of(imported)
    served = served_ports(held)
    slices: dict[str, MirroredSlice] = {}
    for source in sources:
        want = mirrored_slice(held, source, owner=owner, served=served)
        if want is not None:
            slices[want.name] = want
    return slices


def mirrored_body(want: MirroredSlice) -> dict[str, Any]:
    """The EndpointSlice object of `want`, in the dialect of `matches` and `overlay`."""
    return {
        "apiVersion": ENDPOINTSLICE_API_VERSION,
        "kind": "EndpointSlice",
        "metadata": {
            "name": want.name,
            "namespace": want.namespace,
            "labels": {
                LABEL_SERVICE_NAME: want.owner_name,
                LABEL_MCS_SERVICE_NAME: want.service,
                LABEL_MCS_SOURCE_CLUSTER: want.cluster,
                LABEL_ENDPOINTSLICE_MANAGED_BY: ENDPOINTSLICE_MANAGER,
                LABEL_MANAGED_BY: MANAGED_BY_MCSYNC,
            },
            "ownerReferences": [
                _owner(
                    "v1", "Service", {"metadata": {"name": want.owner_name, "uid": want.owner_uid}}
                )
            ],
        },
        "addressType": want.address_type,
        "ports": [
            {"name": p.name, "protocol": p.protocol, "port": p.port, "appProtocol": p.app_protocol}
            for p in want.ports
        ],
        "endpoints": unpack_json(want.endpoints),
    }


# --- comparing and updating -------------------------------------------------------------------

# Of metadata, what we state is compared; labels and annotations are ours entirely (a key
# the winner no longer exports must go), so they are compared whole.
_WHOLE_MAPS = frozenset({"labels", "annotations"})


def matches(desired: Any, existing: Any, *, whole: bool = False) -> bool:
    """True when `existing` holds every field `desired` states (None: must be absent).

    Mappings compare key by key over `desired`'s keys (labels and annotations whole);
    lists element by element, of equal length; scalars by equality.
    """
    if isinstance(desired, Mapping):
        if not isinstance(existing, Mapping):
            return False
        if whole:
            return dict(desired) == dict(existing)
        for key, value in desired.items():
            if value is None:
                if existing.get(key) is not None:
                    return False
            elif not matches(value, existing.get(key), whole=key in _WHOLE_MAPS):
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(existing, list) or len(desired) != len(existing):
            return False
        return all(matches(d, e) for d, e in zip(desired, existing, strict=True))
    return bool(desired == existing)


def overlay(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """`existing` with `desired`'s fields laid on (None removes a field): an update body.

    Lists are replaced whole, except that a mapping element is laid on the existing element
    of the same `name` (so a Service port keeps its defaulted `targetPort`); labels and
    annotations are replaced whole.
    """
    result: dict[str, Any] = dict(existing)
    for key, value in desired.items():
        if value is None:
            result.pop(key, None)
        elif key in _WHOLE_MAPS:
            result[key] = dict(value)
        elif isinstance(value, Mapping) and isinstance(existing.get(key), Mapping):
            result[key] = overlay(existing[key], value)
        elif isinstance(value, list):
            old = existing.get(key)
            by_name = {
                e.get("name"): e
                for e in (old if isinstance(old, list) else [])
                if isinstance(e, Mapping) and "name" in e
            }
            result[key] = [
                overlay(by_name[item["name"]], item)
                if isinstance(item, Mapping) and item.get("name") in by_name
                else _strip_none(item)
                for item in value
            ]
        else:
            result[key] = _strip_none(value)
    return result


def _strip_none(value: Any) -> Any:
    """A create body: what we state, without the None markers of "must be absent"."""
    if isinstance(value, Mapping):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value


def create_body(desired: Mapping[str, Any]) -> dict[str, Any]:
    """The body that creates `desired` (None markers dropped)."""
    stripped: dict[str, Any] = _strip_none(desired)
    return stripped
