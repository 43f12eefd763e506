"""Condition types, reasons and Event reasons of docs/reference.md#conditions, #export-path,
#conflicts.

The order of `CONFLICT_REASONS` is the fixed order in which the hub comma-joins the
reasons of a conflicting key (alphabetical, so `PortConflict,TypeConflict`).
"""

from __future__ import annotations

from typing import Final

# Condition types
VALID: Final = "Valid"
CONFLICT: Final = "Conflict"
READY: Final = "Ready"

# Condition statuses (Kubernetes spells them as strings)
TRUE: Final = "True"
FALSE: Final = "False"

# Valid reasons (docs/reference.md#conditions)
REASON_VALID: Final = "Valid"
REASON_NO_SERVICE: Final = "NoService"
REASON_INVALID_SERVICE_TYPE: Final = "InvalidServiceType"
REASON_NAMESPACE_NOT_ALLOWED: Final = "NamespaceNotAllowed"
# A cluster-selection annotation is malformed (docs/reference.md#cluster-selection).
REASON_INVALID_CLUSTER_SELECTOR: Final = "InvalidClusterSelector"

# Conflict reasons (docs/reference.md#conflicts), one per disputed property
TYPE_CONFLICT: Final = "TypeConflict"
PORT_CONFLICT: Final = "PortConflict"
SESSION_AFFINITY_CONFLICT: Final = "SessionAffinityConflict"
SESSION_AFFINITY_CONFIG_CONFLICT: Final = "SessionAffinityConfigConflict"
INTERNAL_TRAFFIC_POLICY_CONFLICT: Final = "InternalTrafficPolicyConflict"
TRAFFIC_DISTRIBUTION_CONFLICT: Final = "TrafficDistributionConflict"
IP_FAMILY_CONFLICT: Final = "IPFamilyConflict"
LABELS_CONFLICT: Final = "LabelsConflict"
ANNOTATIONS_CONFLICT: Final = "AnnotationsConflict"
CLUSTER_SELECTORS_CONFLICT: Final = "ClusterSelectorsConflict"
NO_CONFLICTS: Final = "NoConflicts"

CONFLICT_REASONS: Final[tuple[str, ...]] = tuple(
    sorted(
        (
            TYPE_CONFLICT,
            PORT_CONFLICT,
            SESSION_AFFINITY_CONFLICT,
            SESSION_AFFINITY_CONFIG_CONFLICT,
            INTERNAL_TRAFFIC_POLICY_CONFLICT,
            TRAFFIC_DISTRIBUTION_CONFLICT,
            IP_FAMILY_CONFLICT,
            LABELS_CONFLICT,
            ANNOTATIONS_CONFLICT,
            CLUSTER_SELECTORS_CONFLICT,
        )
    )
)


def join_conflict_reasons(reasons: set[str] | frozenset[str]) -> str:
    """Comma-join conflict reasons in the fixed order of `CONFLICT_REASONS`."""
    unknown = set(reasons) - set(CONFLICT_REASONS)
    if unknown:
        raise ValueError(f"unknown conflict reasons: {sorted(unknown)}")
    return ",".join(r for r in CONFLICT_REASONS if r in reasons)


# Ready reasons (docs/reference.md#export-path)
REASON_EXPORTED: Final = "Exported"
REASON_PENDING: Final = "Pending"
REASON_FAILED: Final = "Failed"

# Event reasons emitted on the ServiceExport (docs/reference.md#export-path)
EVENT_CONFLICT_FOUND: Final = "ServiceExportConflictFound"
EVENT_NO_CONFLICT_FOUND: Final = "NoServiceExportConflictFound"
EVENT_TYPE_NORMAL: Final = "Normal"
EVENT_TYPE_WARNING: Final = "Warning"
