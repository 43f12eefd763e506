"""KEP-2149's About API: the names and the id rule both the hub and the agent apply.

A cluster's id and its clusterset's name live, for every multi-cluster tool, in two
cluster-scoped `ClusterProperty` objects (group `about.k8s.io`): `cluster.clusterset.k8s.io`
and `clusterset.k8s.io` (docs/reference.md#export-path). The hub validates its `--clusterset-name`
and the agent the properties it reads with the same rule, here, so that what one side accepts the
other never refuses.
"""

from __future__ import annotations

from shared.validation import is_dns1123_subdomain

__all__ = [
    "ABOUT_GROUP",
    "ABOUT_VERSIONS",
    "CLUSTERSET_PROPERTY",
    "CLUSTER_ID_PROPERTY",
    "CLUSTER_PROPERTY_KIND",
    "CLUSTER_PROPERTY_PLURAL",
    "MAX_ID_LENGTH",
    "id_problem",
]

ABOUT_GROUP = "about.k8s.io"
ABOUT_VERSIONS: tuple[str, ...] = ("v1beta1", "v1alpha1")  # preferred first
CLUSTER_PROPERTY_PLURAL = "clusterproperties"
CLUSTER_PROPERTY_KIND = "ClusterProperty"
CLUSTER_ID_PROPERTY = "cluster.clusterset.k8s.io"
CLUSTERSET_PROPERTY = "clusterset.k8s.io"
# KEP-2149: an id is a valid RFC 1123 DNS subdomain of fewer than 128 characters.
MAX_ID_LENGTH = 127


def id_problem(value: str) -> str | None:
    """Why `value` is not a KEP-2149 id (cluster id or clusterset name), or None."""
    if not value:
        return "is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long (at most {MAX_ID_LENGTH})"
    if not is_dns1123_subdomain(value):
        return ("is not an RFC 1123 DNS subdomain (lower-case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit)")
    return None
