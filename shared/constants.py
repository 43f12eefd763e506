"""Names both sides agree on: API group/version, paths, annotation keys, finalizer, MCS group."""

from __future__ import annotations

from typing import Final

# Hub API objects (SPEC §4.1)
API_VERSION: Final = "mcsync.io/v1alpha1"
API_PREFIX: Final = "/api/v1"
KIND_EXPORT: Final = "InternalServiceExport"
KIND_EXPORT_LIST: Final = "InternalServiceExportList"
KIND_IMPORT: Final = "ServiceImport"
KIND_IMPORT_LIST: Final = "ServiceImportList"
KIND_CLUSTER: Final = "MemberCluster"
KIND_CLUSTER_LIST: Final = "MemberClusterList"

# Annotations and finalizer (SPEC §2.3, §2.6)
ANNOTATION_EXPORTED_SINCE: Final = "mcsync.io/exported-since"
ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION: Final = "mcsync.io/last-observed-resource-version"
# Agent-owned, beside exported-since on the ServiceExport: the digest of the exported spec the
# stamp belongs to, so a restarted agent can tell "same spec, keep the stopwatch" from "changed".
ANNOTATION_EXPORTED_SPEC_HASH: Final = "mcsync.io/exported-spec-hash"
FINALIZER_SERVICEEXPORT_CLEANUP: Final = "mcsync.io/serviceexport-cleanup"

# MCS API (SPEC §2.1): preferred version first, found by API discovery
MCS_GROUP: Final = "multicluster.x-k8s.io"
MCS_VERSIONS: Final[tuple[str, ...]] = ("v1beta1", "v1alpha1")
MCS_SERVICEEXPORT_PLURAL: Final = "serviceexports"
MCS_SERVICEEXPORT_KIND: Final = "ServiceExport"

# Default namespaces the agent refuses to export from (SPEC §2.2)
DEFAULT_DENY_NAMESPACES: Final[tuple[str, ...]] = ("kube-system", "kube-public")

# Cluster states (SPEC §4.2, §5)
CLUSTER_READY: Final = "Ready"
CLUSTER_STALE: Final = "Stale"

# Watch (SPEC §4.3)
WATCH_DEFAULT_TIMEOUT_SECONDS: Final = 300
