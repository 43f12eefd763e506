"""Names both sides agree on: API group/version, paths, annotation keys, finalizer, MCS group."""

from __future__ import annotations

from typing import Final

# Hub API objects (docs/reference.md#rest-api)
API_VERSION: Final = "mcsync.io/v1alpha1"
API_PREFIX: Final = "/api/v1"
KIND_EXPORT: Final = "InternalServiceExport"
KIND_EXPORT_LIST: Final = "InternalServiceExportList"
KIND_IMPORT: Final = "ServiceImport"
KIND_IMPORT_LIST: Final = "ServiceImportList"
KIND_ENDPOINT_SLICE: Final = "EndpointSliceExport"
KIND_ENDPOINT_SLICE_LIST: Final = "EndpointSliceExportList"
KIND_CLUSTER_IMPORT_LIST: Final = "ClusterImportList"
KIND_CLUSTER: Final = "MemberCluster"
KIND_CLUSTER_LIST: Final = "MemberClusterList"
# One cluster's ClusterProperty objects as its agent reported them, and the fleet's, as
# one member reads them (docs/reference.md#cluster-properties).
KIND_CLUSTER_PROPERTIES: Final = "ClusterProperties"
KIND_CLUSTER_PROPERTIES_LIST: Final = "ClusterPropertiesList"

# Annotations and finalizer (docs/reference.md#export-path)
ANNOTATION_EXPORTED_SINCE: Final = "mcsync.io/exported-since"
ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION: Final = "mcsync.io/last-observed-resource-version"
# Agent-owned, beside exported-since on the ServiceExport: the digest of the exported spec the
# stamp belongs to, so a restarted agent can tell "same spec, keep the stopwatch" from "changed".
ANNOTATION_EXPORTED_SPEC_HASH: Final = "mcsync.io/exported-spec-hash"
FINALIZER_SERVICEEXPORT_CLEANUP: Final = "mcsync.io/serviceexport-cleanup"
# On the import feed's objects (ServiceImport, EndpointSliceExport): when the hub committed
# the change an event carries (RFC 3339, milliseconds), so an agent can measure its import
# lag, commit → object written in its cluster (docs/reference.md#observability). Listed objects do
# not carry it.
ANNOTATION_CHANGED_AT: Final = "mcsync.io/changed-at"

# MCS API (docs/reference.md#export-path): preferred version first, found by API discovery
MCS_GROUP: Final = "multicluster.x-k8s.io"
MCS_VERSIONS: Final[tuple[str, ...]] = ("v1beta1", "v1alpha1")
MCS_SERVICEEXPORT_PLURAL: Final = "serviceexports"
MCS_SERVICEEXPORT_KIND: Final = "ServiceExport"

# Default namespaces the agent refuses to export from (docs/reference.md#conditions)
DEFAULT_DENY_NAMESPACES: Final[tuple[str, ...]] = ("kube-system", "kube-public")

# Cluster states (docs/reference.md#rest-api, #failover)
CLUSTER_READY: Final = "Ready"
CLUSTER_STALE: Final = "Stale"
CLUSTER_PENDING: Final = "Pending"
# MemberCluster condition (docs/reference.md#failover mass-withdrawal guard)
CONDITION_WITHDRAWAL_HELD: Final = "WithdrawalHeld"
REASON_MASS_WITHDRAWAL: Final = "MassWithdrawal"
# The most `Valid=False` ServiceExports one heartbeat lists (docs/reference.md#cli `exports
# --invalid`); the rest are only counted. 1,000 reports are ~200 KB, well under the hub's 1 MiB
# bodies.
INVALID_EXPORTS_MAX: Final = 1000
# What a cluster may report of its ClusterProperty objects (docs/reference.md#cluster-properties):
# at most this many, each value at most this many characters. Cluster selection reads them
# on every importing cluster, so they are kept small; an agent with more or longer ones
# says which and reports none of them rather than a subset a selector would misjudge.
CLUSTER_PROPERTIES_MAX: Final = 64
CLUSTER_PROPERTY_VALUE_MAX: Final = 1024
# What a cluster may report of the namespaces it holds within its import scope
# (docs/reference.md#scope-and-limits): at most this many names, Kubernetes' own scalability
# threshold for namespaces a cluster. An agent with more reports none (the hub then says
# `yes*` for it, as for one that never reported), never a subset that would say "absent"
# of a namespace that is there.
CLUSTER_NAMESPACES_MAX: Final = 10_000
# docs/reference.md#failover: an agent beats at least this many times per TTL, and never more often
# than once a this many seconds; so the hub's --cluster-ttl may not be shorter than their product.
HEARTBEATS_PER_TTL: Final = 3
HEARTBEAT_INTERVAL_MIN_SECONDS: Final = 1.0
HEARTBEAT_INTERVAL_DEFAULT_SECONDS: Final = 30.0
# Each wait between an agent's heartbeats is its interval times a factor drawn from 1 ± this.
HEARTBEAT_JITTER: Final = 0.2
# An agent keeps its idle connection to the hub this long past its longest wait between
# beats, so that a quiet agent's heartbeats reuse one TCP connection
# (`member.hubclient.idle_connection_seconds`). The hub keeps an idle connection longer than
# that (`--keep-alive-timeout-seconds`), so that the client, not the hub, closes it: a hub
# closing first races a request the client is sending on it.
IDLE_CONNECTION_MARGIN_SECONDS: Final = 5.0

# EndpointSlices (docs/reference.md#import-path). Kubernetes' own limits: 1,000 endpoints a slice,
# 100 addresses an endpoint, 100 ports a slice.
ENDPOINTS_PER_SLICE_MAX: Final = 1000
ADDRESSES_PER_ENDPOINT_MAX: Final = 100
PORTS_PER_SLICE_MAX: Final = 100
LABEL_SERVICE_NAME: Final = "kubernetes.io/service-name"
LABEL_ENDPOINTSLICE_MANAGED_BY: Final = "endpointslice.kubernetes.io/managed-by"
ENDPOINTSLICE_MANAGER: Final = "mcsync.io"
LABEL_MCS_SERVICE_NAME: Final = "multicluster.kubernetes.io/service-name"
LABEL_MCS_SOURCE_CLUSTER: Final = "multicluster.kubernetes.io/source-cluster"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_MCSYNC: Final = "mcsync"

# Watch (docs/reference.md#change-feeds)
WATCH_DEFAULT_TIMEOUT_SECONDS: Final = 300

# The file a hub started without an admin token writes its generated one to (beside its
# SQLite database, else in its working directory); the CLI names it in its hints.
ADMIN_TOKEN_FILE_NAME: Final = "mcsync-admin-token"
