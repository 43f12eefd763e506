"""The resource types the emulator serves, and how each one behaves.

One `ResourceType` per served resource says where it lives in the URL space, which
versions serve it, and which registry behaviours apply (status subresource, generation,
what DELETE answers, cluster scope), plus what discovery and `kubectl` show of it (short
names, categories, a CRD's printer columns). Every other module reads these flags instead
of special-casing resource names, so adding a resource is one entry here.

The MCS CRDs mirror the upstream definitions (`sigs.k8s.io/mcs-api` v0.5.0): short names
`svcex`/`svcexport` and `svcim`/`svcimport`, no categories, and their printer columns.
The About API (KEP-2149, `sigs.k8s.io/about-api`) is served only when asked for
(`about_api=True`), since a fresh cluster does not have its CRD: `ClusterProperty`,
cluster-scoped, v1beta1 (storage) and v1alpha1, category `multicluster`, its columns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shared.constants import MCS_GROUP, MCS_SERVICEEXPORT_KIND, MCS_SERVICEEXPORT_PLURAL

COORDINATION_GROUP = "coordination.k8s.io"
DISCOVERY_GROUP = "discovery.k8s.io"
APPS_GROUP = "apps"
APIEXTENSIONS_GROUP = "apiextensions.k8s.io"
ABOUT_GROUP = "about.k8s.io"
MCS_SERVICEIMPORT_PLURAL = "serviceimports"
MCS_SERVICEIMPORT_KIND = "ServiceImport"
READ_ONLY_VERBS: tuple[str, ...] = ("get", "list", "watch")
DEFAULT_MCS_VERSIONS: tuple[str, ...] = ("v1beta1", "v1alpha1")
KNOWN_MCS_VERSIONS = frozenset(DEFAULT_MCS_VERSIONS)


@dataclass(frozen=True)
class PrinterColumn:
    """A CRD's `additionalPrinterColumns` entry (simple JSONPath only, as upstream uses)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0

    def crd_form(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "type": self.type,
                                  "jsonPath": self.json_path}
        if self.description:
            out["description"] = self.description
        if self.priority:
            out["priority"] = self.priority
        return out


AGE_COLUMN = PrinterColumn("Age", "date", ".metadata.creationTimestamp")


@dataclass(frozen=True)
class ResourceType:
    """A served resource: URL coordinates plus the registry behaviours that apply to it."""

    group: str  # "" for the core group
    versions: tuple[str, ...]  # served versions, preferred first
    plural: str
    singular: str
    kind: str
    namespaced: bool = True
    has_status: bool = False  # status subresource: main endpoint ignores .status
    tracks_generation: bool = True  # metadata.generation bumped on non-metadata/status change
    returns_deleted_object: bool = True  # DELETE answers the object, else a Status
    custom: bool = False  # a CRD: list items carry apiVersion/kind, no strategic merge
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()  # CRDs: the upstream columns
    verbs: tuple[str, ...] = (
        "create", "delete", "get", "list", "patch", "update", "watch",
    )
    read_only_note: str = ""  # why a verb outside `verbs` is refused, in its 405 message

    @property
    def storage_key(self) -> str:
        """Key shared by all versions of the resource (one storage, several versions)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_resource(self) -> str:
        """`services` or `serviceexports.multicluster.x-k8s.io`, as Kubernetes messages say."""
        return self.storage_key

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


SERVICES = ResourceType(
    group="", versions=("v1",), plural="services", singular="service", kind="Service",
    has_status=True, short_names=("svc",), categories=("all",),
)
EVENTS = ResourceType(
    group="", versions=("v1",), plural="events", singular="event", kind="Event",
    tracks_generation=False, returns_deleted_object=False, short_names=("ev",),
)
LEASES = ResourceType(
    group=COORDINATION_GROUP, versions=("v1",), plural="leases", singular="lease",
    kind="Lease", returns_deleted_object=False,
)


# The agent chart's CoreDNS hook edits the Corefile in one (docs/reference.md#import-path,
# `member.corefile`).
CONFIG_MAPS = ResourceType(
    group="", versions=("v1",), plural="configmaps", singular="configmap", kind="ConfigMap",
    tracks_generation=False, short_names=("cm",),
)
# Stored only, as a cluster with no controller manager would: no ReplicaSets or Pods follow,
# but `kubectl create deployment` / `expose deployment` work, and with the EndpointSlice
# stand-in (`endpoints.py`) the exposed Service gets endpoints (`mcsync sandbox`).
DEPLOYMENTS = ResourceType(
    group=APPS_GROUP, versions=("v1",), plural="deployments", singular="deployment",
    kind="Deployment", has_status=True, short_names=("deploy",), categories=("all",),
)
NAMESPACES = ResourceType(
    group="", versions=("v1",), plural="namespaces", singular="namespace", kind="Namespace",
    namespaced=False, has_status=True, tracks_generation=False, short_names=("ns",),
)
ENDPOINT_SLICES = ResourceType(
    group=DISCOVERY_GROUP, versions=("v1",), plural="endpointslices",
    singular="endpointslice", kind="EndpointSlice", returns_deleted_object=False,
)
CUSTOM_RESOURCE_DEFINITIONS = ResourceType(
    group=APIEXTENSIONS_GROUP, versions=("v1",), plural="customresourcedefinitions",
    singular="customresourcedefinition", kind="CustomResourceDefinition", namespaced=False,
    tracks_generation=False, short_names=("crd", "crds"), categories=("api-extensions",),
    verbs=READ_ONLY_VERBS,  # the emulator's CRDs are fixed: installed at start, never edited
    read_only_note="its CRDs are built in (ServiceExport and ServiceImport of the MCS API, "
                   "already installed): there is no CRD to apply",
)


def service_exports(versions: Iterable[str]) -> ResourceType:
    return ResourceType(
        group=MCS_GROUP, versions=tuple(versions), plural=MCS_SERVICEEXPORT_PLURAL,
        singular="serviceexport", kind=MCS_SERVICEEXPORT_KIND, has_status=True, custom=True,
        short_names=("svcex", "svcexport"), printer_columns=(AGE_COLUMN,),
    )


def service_imports(versions: Iterable[str]) -> ResourceType:
    return ResourceType(
        group=MCS_GROUP, versions=tuple(versions), plural=MCS_SERVICEIMPORT_PLURAL,
        singular="serviceimport", kind=MCS_SERVICEIMPORT_KIND, has_status=True, custom=True,
        short_names=("svcim", "svcimport"),
        printer_columns=(
            PrinterColumn("Type", "string", ".spec.type", "The type of this ServiceImport"),
            PrinterColumn("IP", "string", ".spec.ips", "The VIP for this ServiceImport"),
            AGE_COLUMN,
        ),
    )


# KEP-2149's About API: one cluster-scoped `ClusterProperty` per property, `spec.value`.
CLUSTER_PROPERTIES = ResourceType(
    group=ABOUT_GROUP, versions=("v1beta1", "v1alpha1"), plural="clusterproperties",
    singular="clusterproperty", kind="ClusterProperty", namespaced=False, has_status=True,
    custom=True, categories=("multicluster",),
    printer_columns=(PrinterColumn("value", "string", ".spec.value"),
                     PrinterColumn("age", "date", ".metadata.creationTimestamp")),
)


def parse_mcs_versions(text: str) -> tuple[str, ...]:
    """`"v1beta1,v1alpha1"` -> versions in the given order; rejects unknown or empty lists."""
    versions = tuple(v.strip() for v in text.split(",") if v.strip())
    unknown = [v for v in versions if v not in KNOWN_MCS_VERSIONS]
    if not versions or unknown:
        raise ValueError(
            f"MCS versions must be a non-empty subset of {sorted(KNOWN_MCS_VERSIONS)}, "
            f"got {text!r}"
        )
    return versions


class ResourceCatalog:
    """All resources of one emulated cluster, looked up by (group, version, plural)."""

    def __init__(self, *, mcs_versions: Iterable[str] = DEFAULT_MCS_VERSIONS,
                 about_api: bool = False) -> None:
        versions = tuple(mcs_versions)
        if not versions or any(v not in KNOWN_MCS_VERSIONS for v in versions):
            raise ValueError(f"unsupported MCS versions {versions!r}")
        self.mcs_versions = versions
        self.types: tuple[ResourceType, ...] = (
            NAMESPACES, SERVICES, EVENTS, LEASES, ENDPOINT_SLICES, CONFIG_MAPS, DEPLOYMENTS,
            CUSTOM_RESOURCE_DEFINITIONS, service_exports(versions), service_imports(versions),
            *((CLUSTER_PROPERTIES,) if about_api else ()),
        )

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        for rt in self.types:
            if rt.group == group and rt.plural == plural and version in rt.versions:
                return rt
        return None

    def by_plural(self, plural: str) -> ResourceType:
        """The resource whose plural (or storage key) is given, for in-process test helpers."""
        for rt in self.types:
            if plural in (rt.plural, rt.storage_key):
                return rt
        raise KeyError(plural)

    def groups(self) -> dict[str, tuple[str, ...]]:
        """Non-core groups and their served versions, preferred first."""
        out: dict[str, tuple[str, ...]] = {}
        for rt in self.types:
            if rt.group and rt.group not in out:
                out[rt.group] = rt.versions
        return out

    @property
    def custom_types(self) -> list[ResourceType]:
        """The resources served through CRDs (the MCS ones, and the About API's)."""
        return [rt for rt in self.types if rt.custom]

    @property
    def namespaced_types(self) -> list[ResourceType]:
        return [rt for rt in self.types if rt.namespaced]

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self.types if rt.group == group and version in rt.versions]
