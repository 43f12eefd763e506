"""Pydantic v2 models of every object on the wire between hub, agent and CLI
(docs/reference.md#rest-api).

Objects are Kubernetes-shaped (`apiVersion`, `kind`, `metadata`, `spec`, `status`) and
camelCase on the wire; Python code uses snake_case attributes. Aliases are generated, and
`serialize_by_alias` makes every dump camelCase, so no caller has to remember `by_alias`.
Use `to_wire()` to produce the JSON-ready dict both sides send.

Validation here is the hub's first line of defence (docs/reference.md#scope-and-limits: malformed
input is 422 with the field named): names are DNS labels, ports are in range and unique, enums are
closed. `spec` models forbid unknown fields, because a misspelt field would silently change a
conflict verdict; `metadata` and `status` ignore unknown fields so that a client may send
back an object it read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from shared import constants
from shared.clusterselection import (
    ClusterSelectionPolicy,
    ClusterSelectors,
    ImportClustersSelector,
)
from shared.scope import check_patterns
from shared.validation import (
    DNS1035_LABEL_RE,
    DNS1123_LABEL_RE,
    PortNumber,
    StrictBool,
    StrictInt,
    check_annotations,
    check_labels,
    endpoint_address_error,
    export_timestamp_error,
    is_dns1123_label,
    is_dns1123_subdomain,
    qualified_name_error,
)
from shared.validation import (
    DNS1123_SUBDOMAIN_RE as DNS1123_SUBDOMAIN_RE,
)
from shared.validation import (
    QUALIFIED_NAME_RE as QUALIFIED_NAME_RE,
)
from shared.validation import (
    is_dns1035_label as is_dns1035_label,
)
from shared.wirebase import StrictWireModel as StrictWireModel
from shared.wirebase import WireModel as WireModel
from shared.wirebase import to_wire as to_wire

# --- name rules (Kubernetes' own): `shared.validation`, re-exported for existing callers --

INT64_MAX = 2**63 - 1  # Kubernetes' generations are int64

Namespace = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS1123_LABEL_RE.pattern)]
ServiceName = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS1035_LABEL_RE.pattern)]
ClusterId = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS1123_LABEL_RE.pattern)]


def _utc_representable(value: datetime) -> datetime:
    # `0001-01-01T00:00:00+14:00` parses, but is before year 1 in UTC: every store and
    # comparison works in UTC, so such an instant must be refused here (a 422 naming the
    # field), not overflow later inside a database write.
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise ValueError("timestamp is out of range once converted to UTC") from None
    return value


# An RFC 3339 instant with an offset that has a UTC equivalent (years 1 to 9999).
Timestamp = Annotated[AwareDatetime, AfterValidator(_utc_representable)]


def _port_name(value: str) -> str:
    if value and not is_dns1123_label(value):
        raise ValueError(f"port name {value!r} is not a DNS-1123 label")
    return value


# A port's name (a Service's, an EndpointSlice's): empty, or a DNS-1123 label.
PortName = Annotated[str, Field(max_length=63), AfterValidator(_port_name)]


def _app_protocol(value: str | None) -> str | None:
    # Kubernetes validates a port's appProtocol as a qualified name.
    if value is not None:
        problem = qualified_name_error(value)
        if problem is not None:
            raise ValueError(f"appProtocol {problem}")
    return value


AppProtocol = Annotated[
    str | None, Field(min_length=1, max_length=316), AfterValidator(_app_protocol)
]


# --- common pieces ----------------------------------------------------------------------


class ObjectMeta(WireModel):
    # Every object name is at least a DNS-1123 subdomain (kinds narrow it further: a
    # cluster's is a label, an export's a DNS-1035 label); every namespace a DNS-1123 label.
    name: str = Field(min_length=1, max_length=253)
    namespace: Namespace | None = None
    resource_version: str | None = None
    creation_timestamp: Timestamp | None = None
    # None on a PUT means "keep what the hub has"; the hub always answers a dict.
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not is_dns1123_subdomain(value):
            raise ValueError(f"{value!r} is not a DNS-1123 subdomain")
        return value

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            check_annotations(value, "annotations")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            check_labels(value, "label")
        return value


class ListMeta(WireModel):
    resource_version: str | None = None
    continue_: str | None = Field(default=None, alias="continue")


class Condition(WireModel):
    type: str = Field(min_length=1, max_length=316)
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(min_length=1, max_length=1024)
    message: str = Field(default="", max_length=32768)
    observed_generation: StrictInt | None = Field(default=None, ge=0, le=INT64_MAX)
    last_transition_time: Timestamp | None = None


# --- InternalServiceExport --------------------------------------------------------------


class ServicePort(StrictWireModel):
    name: PortName = ""
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    port: PortNumber
    app_protocol: AppProtocol = None


class ClientIPConfig(StrictWireModel):
    timeout_seconds: StrictInt | None = Field(default=None, ge=1, le=86400)


class SessionAffinityConfig(StrictWireModel):
    client_ip: ClientIPConfig | None = Field(default=None, alias="clientIP")


class ServiceReference(StrictWireModel):
    cluster_id: ClusterId
    kind: Literal["Service"] = "Service"
    namespace: Namespace
    name: ServiceName
    uid: str = Field(default="", max_length=128)
    resource_version: str = Field(min_length=1, max_length=128)
    generation: StrictInt = Field(default=0, ge=0, le=INT64_MAX)
    exported_since: Timestamp
    export_creation_timestamp: Timestamp

    @field_validator("export_creation_timestamp")
    @classmethod
    def _not_before_2014(cls, value: datetime) -> datetime:
        # docs/reference.md#conflicts; the upper bound needs the hub's clock and is the hub's (its
        # routes).
        problem = export_timestamp_error(value)
        if problem is not None:
            raise ValueError(problem)
        return value


ServiceImportType = Literal["ClusterSetIP", "Headless"]
SessionAffinity = Literal["None", "ClientIP"]
InternalTrafficPolicy = Literal["Cluster", "Local"]
TrafficDistribution = Literal["PreferClose", "PreferSameZone", "PreferSameNode"]
IPFamily = Literal["IPv4", "IPv6"]


def _check_ports(ports: list[ServicePort]) -> list[ServicePort]:
    names: set[str] = set()
    numbers: set[tuple[str, int]] = set()
    for index, port in enumerate(ports):
        if port.name:
            if port.name in names:
                raise ValueError(f"ports[{index}]: duplicate port name {port.name!r}")
            names.add(port.name)
        elif len(ports) > 1:
            raise ValueError(f"ports[{index}]: a port must be named when there are several")
        key = (port.protocol, port.port)
        if key in numbers:
            raise ValueError(f"ports[{index}]: duplicate port {port.port}/{port.protocol}")
        numbers.add(key)
    return ports


class InternalServiceExportSpec(StrictWireModel):
    """The exported spec of docs/reference.md#export-path: what other clusters see of one cluster's
    Service."""

    ports: list[ServicePort] = Field(default_factory=list, max_length=1000)
    type: ServiceImportType = "ClusterSetIP"
    session_affinity: SessionAffinity = "None"
    session_affinity_config: SessionAffinityConfig | None = None
    internal_traffic_policy: InternalTrafficPolicy | None = None
    traffic_distribution: TrafficDistribution | None = None
    ip_families: list[IPFamily] = Field(default_factory=list, max_length=2)
    exported_labels: dict[str, str] = Field(default_factory=dict)
    exported_annotations: dict[str, str] = Field(default_factory=dict)
    # Cluster selection (docs/reference.md#cluster-selection): the three ServiceExport
    # annotations as the agent parsed them; None where the annotation is absent.
    cluster_selectors: ClusterSelectors | None = None
    cluster_selection: ClusterSelectionPolicy | None = None
    import_clusters: ImportClustersSelector | None = None
    service_reference: ServiceReference

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: list[ServicePort]) -> list[ServicePort]:
        return _check_ports(value)

    @field_validator("ip_families")
    @classmethod
    def _ip_families(cls, value: list[IPFamily]) -> list[IPFamily]:
        if len(set(value)) != len(value):
            raise ValueError("ipFamilies lists a family twice")
        return value

    @field_validator("exported_labels")
    @classmethod
    def _exported_labels(cls, value: dict[str, str]) -> dict[str, str]:
        check_labels(value, "exportedLabels")
        return value

    @field_validator("exported_annotations")
    @classmethod
    def _exported_annotations(cls, value: dict[str, str]) -> dict[str, str]:
        check_annotations(value, "exportedAnnotations")
        return value


class InternalServiceExportStatus(WireModel):
    conditions: list[Condition] = Field(default_factory=list)
    # Derived by the hub at read time from the exporting cluster's heartbeat
    # (docs/reference.md#failover).
    cluster_state: str | None = None


class InternalServiceExport(WireModel):
    api_version: Literal["mcsync.io/v1alpha1"] = constants.API_VERSION  # type: ignore[assignment]
    kind: Literal["InternalServiceExport"] = constants.KIND_EXPORT  # type: ignore[assignment]
    metadata: ObjectMeta
    spec: InternalServiceExportSpec
    status: InternalServiceExportStatus = Field(default_factory=InternalServiceExportStatus)

    @model_validator(mode="after")
    def _names_agree(self) -> InternalServiceExport:
        ref = self.spec.service_reference
        if self.metadata.name != ref.name:
            raise ValueError(
                f"metadata.name {self.metadata.name!r} differs from "
                f"spec.serviceReference.name {ref.name!r}"
            )
        if self.metadata.namespace not in (None, ref.namespace):
            raise ValueError(
                f"metadata.namespace {self.metadata.namespace!r} differs from "
                f"spec.serviceReference.namespace {ref.namespace!r}"
            )
        return self

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.status.conditions if c.type == type_), None)


class InternalServiceExportList(WireModel):
    api_version: str = constants.API_VERSION
    kind: Literal["InternalServiceExportList"] = constants.KIND_EXPORT_LIST  # type: ignore[assignment]
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[InternalServiceExport] = Field(default_factory=list)


class PropertyConflict(WireModel):
    """One decided property (docs/reference.md#conflicts) on which an export differs from its key's
    winner."""

    field: str  # its wire name, e.g. "type", "exportedLabels"
    reason: str  # the Conflict reason it gives, e.g. "TypeConflict"
    value: Any = None  # this export's value (absent: unset)
    decided_value: Any = None  # the winner's value, the ServiceImport's (absent: unset)


class ExportConflict(WireModel):
    """An export whose decided properties differ from its key's winner's, and how."""

    namespace: str
    name: str
    cluster: str
    winner: str
    properties: list[PropertyConflict] = Field(default_factory=list)


class ExportConflictList(WireModel):
    """`GET /api/v1/conflicts`: every export that disagrees with its key's decided values."""

    api_version: str = constants.API_VERSION
    kind: Literal["ExportConflictList"] = "ExportConflictList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[ExportConflict] = Field(default_factory=list)


class AnnotationPatchMeta(WireModel):
    model_config = ConfigDict(extra="forbid")

    resource_version: str = Field(min_length=1, max_length=64)
    # JSON merge patch: a null value removes the annotation.
    annotations: dict[str, str | None] = Field(default_factory=dict)

    @field_validator("annotations")
    @classmethod
    def _keys(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        check_annotations(value, "annotations")
        return value


class AnnotationPatch(WireModel):
    """Body of `PATCH .../serviceexports/{ns}/{name}`: a merge patch of annotations only."""

    model_config = ConfigDict(extra="forbid")

    metadata: AnnotationPatchMeta


class SyncResult(WireModel):
    """Answer of the full-state sync `PUT /api/v1/clusters/{cluster}/serviceexports`."""

    api_version: str = constants.API_VERSION
    kind: Literal["SyncResult"] = "SyncResult"
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    withdrawn: int = 0
    resource_version: str | None = None


# --- ServiceImport ----------------------------------------------------------------------


class ServiceImportSpec(WireModel):
    ports: list[ServicePort] = Field(default_factory=list)
    type: ServiceImportType = "ClusterSetIP"
    session_affinity: SessionAffinity = "None"
    session_affinity_config: SessionAffinityConfig | None = None
    internal_traffic_policy: InternalTrafficPolicy | None = None
    traffic_distribution: TrafficDistribution | None = None
    ip_families: list[IPFamily] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    # The winner's cluster selection (docs/reference.md#cluster-selection); None: absent.
    cluster_selectors: ClusterSelectors | None = None
    cluster_selection: ClusterSelectionPolicy | None = None
    import_clusters: ImportClustersSelector | None = None


class ImportClusterStatus(WireModel):
    cluster: str
    state: str | None = None  # Ready / Stale, derived at read time


class ImportPortStatus(WireModel):
    name: str = ""
    protocol: str = "TCP"
    port: int
    app_protocol: str | None = None
    clusters: list[str] = Field(default_factory=list)


class ServiceImportStatus(WireModel):
    clusters: list[ImportClusterStatus] = Field(default_factory=list)
    ports: list[ImportPortStatus] = Field(default_factory=list)
    conflicts: list[str] = Field(default_factory=list)
    winning_cluster: str | None = None


class ServiceImport(WireModel):
    api_version: str = constants.API_VERSION
    kind: Literal["ServiceImport"] = constants.KIND_IMPORT  # type: ignore[assignment]
    metadata: ObjectMeta
    spec: ServiceImportSpec = Field(default_factory=ServiceImportSpec)
    status: ServiceImportStatus = Field(default_factory=ServiceImportStatus)


# Whether a cluster imports a Service: yes (qualified: where the namespace exists there),
# no, or unknown (its agent stopped following the feed).
ImportAnswer = Literal["yes", "yes*", "no", "unknown"]


class Importer(WireModel):
    """One registered cluster: whether it imports a Service, and why
    (`shared.importreach.where_imported`)."""

    cluster: str
    imports: ImportAnswer
    why: str
    # With cluster selection (docs/reference.md#cluster-selection): the cluster's tiers (per
    # selector, the exporting clusters it selects) and the tier its exporters' ready
    # endpoints make active now (1-based; None on fallback), with the clusters it uses.
    tiers: list[list[str]] | None = None
    active_tier: int | None = None
    active_clusters: list[str] | None = None


class ImporterList(WireModel):
    """`GET /api/v1/serviceimports/{namespace}/{name}/importers`: every registered cluster,
    by name."""

    api_version: str = constants.API_VERSION
    kind: Literal["ImporterList"] = "ImporterList"
    items: list[Importer] = Field(default_factory=list)


class ServiceImportList(WireModel):
    api_version: str = constants.API_VERSION
    kind: Literal["ServiceImportList"] = constants.KIND_IMPORT_LIST  # type: ignore[assignment]
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[ServiceImport] = Field(default_factory=list)


# --- EndpointSliceExport (docs/reference.md#import-path, #rest-api)
# ----------------------------------------------
#
# One source cluster's EndpointSlice of an exported Service, as the agent sends it: what
# another cluster needs to mirror it, nothing local. `nodeName` and `targetRef` name objects
# of the source cluster and are not sent; ports are the slice's own (the Service port's
# name with the *target* port number, which is what kube-proxy matches by name).

AddressType = Literal["IPv4", "IPv6", "FQDN"]


class EndpointConditions(StrictWireModel):
    ready: StrictBool | None = None
    serving: StrictBool | None = None
    terminating: StrictBool | None = None


class Endpoint(StrictWireModel):
    addresses: list[str] = Field(min_length=1, max_length=constants.ADDRESSES_PER_ENDPOINT_MAX)
    conditions: EndpointConditions = Field(default_factory=EndpointConditions)
    hostname: str | None = Field(default=None, min_length=1, max_length=63)
    zone: str | None = Field(default=None, min_length=1, max_length=253)

    @field_validator("hostname")
    @classmethod
    def _hostname(cls, value: str | None) -> str | None:
        if value is not None and not is_dns1123_label(value):
            raise ValueError(f"hostname {value!r} is not a DNS-1123 label")
        return value


class EndpointPort(StrictWireModel):
    """A port of an EndpointSlice: `port` is the target port; None means all ports."""

    name: PortName = ""
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    port: PortNumber | None = None
    app_protocol: AppProtocol = None


class EndpointSliceExportSpec(StrictWireModel):
    # The Service this slice belongs to (its `kubernetes.io/service-name` label); the hub
    # refuses a slice of a Service the cluster does not export (409).
    service_name: ServiceName
    # The source cluster; filled in by the hub from the path, a different value is a 422.
    cluster_id: ClusterId | None = None
    address_type: AddressType
    ports: list[EndpointPort] = Field(
        default_factory=list, max_length=constants.PORTS_PER_SLICE_MAX
    )
    endpoints: list[Endpoint] = Field(
        default_factory=list, max_length=constants.ENDPOINTS_PER_SLICE_MAX
    )
    # The source slice's resourceVersion, so an agent can tell an unchanged slice after a
    # restart without comparing contents.
    source_resource_version: str | None = Field(default=None, max_length=128)
    # When the source agent saw this version of the slice (its informer's event): where the
    # importing agents' `mcs_endpointslice_sync_latency_seconds` starts
    # (docs/reference.md#observability). Absent from older agents.
    source_observed_time: Timestamp | None = None

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: list[EndpointPort]) -> list[EndpointPort]:
        names: set[str] = set()
        for index, port in enumerate(value):
            if port.name in names:
                raise ValueError(f"ports[{index}]: duplicate port name {port.name!r}")
            names.add(port.name)
        return value

    @model_validator(mode="after")
    def _addresses(self) -> EndpointSliceExportSpec:
        for index, endpoint in enumerate(self.endpoints):
            for position, address in enumerate(endpoint.addresses):
                problem = endpoint_address_error(self.address_type, address)
                if problem is not None:
                    raise ValueError(f"endpoints[{index}].addresses[{position}]: {problem}")
        return self


class EndpointSliceExport(WireModel):
    api_version: Literal["mcsync.io/v1alpha1"] = constants.API_VERSION  # type: ignore[assignment]
    kind: Literal["EndpointSliceExport"] = constants.KIND_ENDPOINT_SLICE  # type: ignore[assignment]
    metadata: ObjectMeta
    spec: EndpointSliceExportSpec

    @field_validator("metadata")
    @classmethod
    def _slice_name(cls, value: ObjectMeta) -> ObjectMeta:
        # EndpointSlice names are DNS-1123 subdomains (generated: `<service>-<5 chars>`).
        if not is_dns1123_subdomain(value.name):
            raise ValueError(f"metadata.name {value.name!r} is not a DNS-1123 subdomain")
        if value.namespace is not None and not is_dns1123_label(value.namespace):
            raise ValueError(f"metadata.namespace {value.namespace!r} is not a DNS-1123 label")
        return value


class EndpointSliceExportList(WireModel):
    api_version: str = constants.API_VERSION
    kind: Literal["EndpointSliceExportList"] = constants.KIND_ENDPOINT_SLICE_LIST  # type: ignore[assignment]
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[EndpointSliceExport] = Field(default_factory=list)


ImportObject = Annotated[ServiceImport | EndpointSliceExport, Field(discriminator="kind")]


class ClusterImportList(WireModel):
    """`GET /api/v1/clusters/{cluster}/imports`: everything that cluster must import — every
    ServiceImport and every EndpointSliceExport of the fleet, each slice's ports already cut
    to those its source cluster serves in the import (docs/reference.md#import-path)."""

    api_version: str = constants.API_VERSION
    kind: Literal["ClusterImportList"] = constants.KIND_CLUSTER_IMPORT_LIST  # type: ignore[assignment]
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[ImportObject] = Field(default_factory=list)


# --- MemberCluster ----------------------------------------------------------------------


class MemberClusterMeta(ObjectMeta):
    @field_validator("name")
    @classmethod
    def _cluster_name(cls, value: str) -> str:
        if not is_dns1123_label(value):
            raise ValueError(f"cluster name {value!r} is not a DNS-1123 label")
        return value


class MemberClusterStatus(WireModel):
    # Ready: heartbeat within the TTL; Stale: heartbeats stopped; Pending: none received yet.
    state: Literal["Ready", "Stale", "Pending"] = "Pending"
    last_heartbeat_time: Timestamp | None = None
    agent_version: str | None = None
    export_count: int = 0
    conflict_count: int = 0
    # As the agent's last heartbeat said (None: it does not import, or has not said).
    imported_services: int | None = None
    imported_endpoints: int | None = None
    # ServiceExports the agent could not export (`Valid=False`), as its last report said:
    # they need a person (`mcsync exports --invalid` lists them and why).
    invalid_export_count: int = 0
    # docs/reference.md#failover: True while the import feed withdraws this cluster's endpoints (it
    # is Stale, and neither fail-open nor the panic threshold gives them back).
    endpoints_withdrawn: bool = False
    # docs/reference.md#failover: `WithdrawalHeld` (reason `MassWithdrawal`) while the agent holds a
    # repair that would withdraw most of the cluster's exports; absent when nothing is held.
    conditions: list[Condition] = Field(default_factory=list)
    # True while an admin's one-shot allowance for the held withdrawal is armed (given
    # for the hold current then; used once, or lapsed when that hold clears).
    withdrawal_allowed: bool = False
    # The cluster's ClusterProperty objects (name → value) as its agent last reported them
    # (docs/reference.md#cluster-properties); None until it reports.
    properties: dict[str, str] | None = None


ScopeList = Annotated[list[str], Field(max_length=1000)]


class MemberClusterSpec(StrictWireModel):
    """A member's scope (docs/reference.md#scope-and-limits): the namespaces (names and `*` globs)
    it may export from and those it imports. Absent (None): every namespace; empty: none."""

    export_namespaces: ScopeList | None = None
    import_namespaces: ScopeList | None = None

    @field_validator("export_namespaces", "import_namespaces")
    @classmethod
    def _patterns(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_patterns(value, "namespace pattern")


def properties_problem(properties: dict[str, str]) -> str | None:
    """Why `properties` cannot be a cluster's reported ClusterProperty set, or None: at
    most `CLUSTER_PROPERTIES_MAX` of them, names KEP-2149's (DNS subdomains), values of 1
    to `CLUSTER_PROPERTY_VALUE_MAX` characters without NUL (docs/reference.md#cluster-properties).
    The agent checks with this before it sends, the hub when it stores: one rule."""
    if len(properties) > constants.CLUSTER_PROPERTIES_MAX:
        return (
            f"{len(properties)} ClusterProperty objects, at most "
            f"{constants.CLUSTER_PROPERTIES_MAX} may be reported"
        )
    for name in sorted(properties):
        value = properties[name]
        if not is_dns1123_subdomain(name):
            return f"property name {name!r} is not a DNS-1123 subdomain"
        if not isinstance(value, str) or not value:
            return f"property {name!r}: the value is empty"
        if len(value) > constants.CLUSTER_PROPERTY_VALUE_MAX:
            return (
                f"property {name!r}: the value is {len(value)} characters long, at most "
                f"{constants.CLUSTER_PROPERTY_VALUE_MAX}"
            )
        if "\x00" in value:
            return f"property {name!r}: the value holds a NUL character"
    return None


class ClusterPropertiesReport(StrictWireModel):
    """`PUT /api/v1/clusters/{cluster}/properties`: every ClusterProperty of the agent's
    cluster, replacing what the hub had (docs/reference.md#cluster-properties)."""

    properties: dict[str, str]

    @field_validator("properties")
    @classmethod
    def _check(cls, value: dict[str, str]) -> dict[str, str]:
        problem = properties_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


def namespaces_problem(namespaces: list[str]) -> str | None:
    """Why `namespaces` cannot be a cluster's report of the namespaces it holds, or None:
    at most `CLUSTER_NAMESPACES_MAX` names, each a DNS-1123 label (a namespace's name)
    (docs/reference.md#scope-and-limits). The agent checks with this before it sends, the
    hub when it stores: one rule."""
    if len(namespaces) > constants.CLUSTER_NAMESPACES_MAX:
        return (
            f"{len(namespaces)} namespaces, at most {constants.CLUSTER_NAMESPACES_MAX} may "
            "be reported (docs/reference.md#scope-and-limits)"
        )
    for name in namespaces:
        if not isinstance(name, str) or not is_dns1123_label(name):
            return f"namespace name {name!r} is not a DNS-1123 label"
    return None


class ClusterNamespacesReport(StrictWireModel):
    """`PUT /api/v1/clusters/{cluster}/namespaces`: every namespace the agent's cluster
    holds within its import scope (exists, not being deleted, watched, not denied),
    replacing what the hub had; `mcsync describe import` says "no" where one is absent."""

    namespaces: list[str]

    @field_validator("namespaces")
    @classmethod
    def _check(cls, value: list[str]) -> list[str]:
        problem = namespaces_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return sorted(set(value))


class ClusterPropertiesMeta(WireModel):
    # The cluster's name.
    name: str = Field(min_length=1, max_length=63)
    resource_version: str | None = None
    annotations: dict[str, str] | None = None


class ClusterPropertiesSpec(WireModel):
    properties: dict[str, str] = Field(default_factory=dict)


class ClusterProperties(WireModel):
    """One cluster's reported properties as the fleet-properties feed carries them
    (`GET /api/v1/clusters/{cluster}/fleetproperties`): `metadata.name` is the cluster."""

    api_version: str = constants.API_VERSION
    kind: Literal["ClusterProperties"] = constants.KIND_CLUSTER_PROPERTIES  # type: ignore[assignment]
    metadata: ClusterPropertiesMeta
    spec: ClusterPropertiesSpec = Field(default_factory=ClusterPropertiesSpec)


class ClusterPropertiesList(WireModel):
    """Every cluster's reported properties, and the revision to watch them from."""

    api_version: str = constants.API_VERSION
    kind: Literal["ClusterPropertiesList"] = constants.KIND_CLUSTER_PROPERTIES_LIST  # type: ignore[assignment]
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[ClusterProperties] = Field(default_factory=list)


class MemberCluster(WireModel):
    api_version: str = constants.API_VERSION
    kind: Literal["MemberCluster"] = constants.KIND_CLUSTER  # type: ignore[assignment]
    metadata: MemberClusterMeta
    spec: MemberClusterSpec = Field(default_factory=MemberClusterSpec)
    status: MemberClusterStatus = Field(default_factory=MemberClusterStatus)


class MemberClusterPatchMeta(WireModel):
    model_config = ConfigDict(extra="forbid")

    # JSON merge patch: a null value removes the label.
    labels: dict[str, str | None] | None = None

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str | None] | None) -> dict[str, str | None] | None:
        if value is not None:
            check_labels({k: v for k, v in value.items() if v is not None}, "label")
            check_labels({k: "" for k in value}, "label")
        return value


class MemberClusterPatch(WireModel):
    """Body of the admin's `PATCH /api/v1/clusters/{cluster}` (docs/reference.md#rest-api): a JSON
    merge patch of `metadata.labels` and `spec`. A field left out is kept; a `spec` field set to
    null becomes absent (every namespace)."""

    model_config = ConfigDict(extra="forbid")

    metadata: MemberClusterPatchMeta | None = None
    spec: MemberClusterSpec | None = None


class RegisteredMemberCluster(MemberCluster):
    """The answer of `POST /api/v1/clusters`: the only place the member token is ever shown."""

    token: str


class RotatedMemberCluster(RegisteredMemberCluster):
    """The answer of `POST /api/v1/clusters/{cluster}/token`: the new member token, shown
    once, and until when the token it replaces is still accepted (absent: no longer)."""

    previous_token_expires: Timestamp | None = None


class MemberClusterList(WireModel):
    api_version: str = constants.API_VERSION
    kind: Literal["MemberClusterList"] = constants.KIND_CLUSTER_LIST  # type: ignore[assignment]
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[MemberCluster] = Field(default_factory=list)


class Heartbeat(WireModel):
    # A version string (`0.1.0`, `0.2.0.dev3+g1a2b3c`): printable, so that the hub can
    # store it as plain text on both databases (PostgreSQL text refuses NUL characters).
    agent_version: str = Field(
        min_length=1, max_length=64, pattern=r"^[0-9A-Za-z][0-9A-Za-z.+_~-]*$"
    )
    # What the agent's cluster holds of the fleet's imports (docs/reference.md#import-path), so that
    # `mcsync clusters` shows it; absent from an agent that does not import.
    imported_services: StrictInt | None = Field(default=None, ge=0, le=2**31)
    imported_endpoints: StrictInt | None = Field(default=None, ge=0, le=2**31)
    # docs/reference.md#failover mass-withdrawal guard: the repair the agent is holding, or None
    # when it holds none (which clears the cluster's `WithdrawalHeld` condition on the hub).
    withdrawal_held: WithdrawalHold | None = None
    # docs/reference.md#cli (`mcsync exports --invalid`): the cluster's `Valid=False`
    # ServiceExports, sent when they changed since the last beat the hub answered; None: unchanged.
    invalid_exports: InvalidExports | None = None


class InvalidExportReport(WireModel):
    """A ServiceExport that is `Valid=False` in its cluster (docs/reference.md#conditions): never
    exported, so the hub knows of it only through its agent's heartbeat (`mcsync exports
    --invalid`)."""

    namespace: Namespace
    name: ServiceName
    # A condition reason, as Kubernetes writes them (`NoService`, `InvalidServiceType`, …).
    reason: str = Field(
        min_length=1, max_length=128, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    )
    message: str = Field(default="", max_length=1024)


class InvalidExports(WireModel):
    """A cluster's invalid ServiceExports: at most `INVALID_EXPORTS_MAX` of them listed (in
    namespace/name order), `total` counting them all."""

    items: list[InvalidExportReport] = Field(
        default_factory=list, max_length=constants.INVALID_EXPORTS_MAX
    )
    total: StrictInt = Field(ge=0, le=2**31)

    @model_validator(mode="after")
    def _total_counts_items(self) -> InvalidExports:
        if self.total < len(self.items):
            raise ValueError(f"total {self.total} is less than the {len(self.items)} items")
        return self


class InvalidServiceExport(WireModel):
    """`GET /api/v1/invalidexports`: one cluster's invalid ServiceExport, as its agent said."""

    cluster: ClusterId
    namespace: str
    name: str
    reason: str
    message: str = ""


class InvalidServiceExportList(WireModel):
    api_version: str = constants.API_VERSION
    kind: Literal["InvalidServiceExportList"] = "InvalidServiceExportList"
    items: list[InvalidServiceExport] = Field(default_factory=list)
    # Clusters that have more invalid ServiceExports than their agent lists (`total` each).
    truncated: dict[str, int] = Field(default_factory=dict)


class WithdrawalHold(WireModel):
    """A repair the agent did not carry out: it would withdraw `would_withdraw` of the
    cluster's `exports` hub records at once (docs/reference.md#failover)."""

    would_withdraw: StrictInt = Field(ge=0, le=2**31)
    exports: StrictInt = Field(ge=0, le=2**31)
    since: Timestamp


class Identity(WireModel):
    """`GET /api/v1/whoami`: the role the caller's token gives (docs/reference.md#credentials), as
    `kubectl auth whoami` answers; `cluster` names a member token's cluster. `mcsync status` shows
    it."""

    role: Literal["admin", "reader", "member"]
    cluster: str | None = None


class HeartbeatResponse(WireModel):
    hub_version: str
    min_agent_version: str
    server_time: Timestamp
    state: str
    # docs/reference.md#failover: the hub's `--cluster-ttl`; the agent beats at least three times
    # per TTL. None from a hub older than docs/reference.md#failover.
    cluster_ttl_seconds: float | None = None
    # docs/reference.md#failover: an admin's one-shot `allow-withdrawal`, handed to the agent that
    # reported a hold (and consumed by that answer): its next held repair goes through.
    withdrawal_allowed: bool = False
    # docs/reference.md#export-path (KEP-2149): the hub's `--clusterset-name`, which the agent
    # writes into the About API's `clusterset.k8s.io` ClusterProperty; None when the hub names none.
    clusterset_name: str | None = None


class VersionInfo(WireModel):
    hub_version: str
    api_version: str = constants.API_VERSION
    min_agent_version: str


# --- errors -----------------------------------------------------------------------------


class StatusCause(WireModel):
    field: str | None = None
    message: str
    reason: str | None = None


class StatusDetails(WireModel):
    name: str | None = None
    kind: str | None = None
    causes: list[StatusCause] = Field(default_factory=list)
    retry_after_seconds: int | None = None


class Status(WireModel):
    """A failed request, Kubernetes style. Never carries a stack trace."""

    api_version: str = "v1"
    kind: Literal["Status"] = "Status"
    status: Literal["Failure", "Success"] = "Failure"
    code: int
    reason: str
    message: str
    details: StatusDetails | None = None


# --- watch ------------------------------------------------------------------------------


class BookmarkMeta(WireModel):
    resource_version: str


class BookmarkObject(WireModel):
    """The object of a BOOKMARK event: only the revision the watcher has reached."""

    model_config = ConfigDict(extra="forbid")

    api_version: str = constants.API_VERSION
    kind: str = constants.KIND_EXPORT
    metadata: BookmarkMeta


WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]


class WatchEvent(WireModel):
    """One newline-delimited JSON line of the change feed (docs/reference.md#change-feeds).

    ERROR carries a `Status` (410 when the watcher fell behind the retained history
    while connected); the client then relists.
    """

    type: WatchEventType
    # The export feed carries InternalServiceExports; the import feed
    # (docs/reference.md#change-feeds) ServiceImports and EndpointSliceExports. Each object's `kind`
    # says which.
    object: (
        InternalServiceExport
        | ServiceImport
        | EndpointSliceExport
        | ClusterProperties
        | BookmarkObject
        | Status
    )

    @property
    def resource_version(self) -> str | None:
        meta = getattr(self.object, "metadata", None)
        return getattr(meta, "resource_version", None)
