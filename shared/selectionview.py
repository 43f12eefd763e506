"""Each importing cluster's cluster selection as the hub can work it out, for people.

Tiers depend on properties only, and the hub holds every cluster's properties and the
import's selectors; the active tier depends on the exporters' ready endpoints, which the
hub holds too (a cluster whose endpoints are withdrawn counts none,
docs/reference.md#failover). So `describe import` and the console show, per importing
cluster, what its agent's selection core (`shared.clusterselection.select`) decides from
the same inputs. What the hub cannot see is the agent's damping: a move back to a better
tier waits `failbackDelaySeconds` in the agent, so the active tier shown is the one the
endpoints choose now (the ServiceImport's `mcsync.io/active-clusters` annotation in the
member cluster says where the agent is).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shared.clusterselection import (
    DEFAULT_POLICY,
    EndpointCounts,
    Selection,
    endpoint_is_ready,
    select,
)
from shared.models import EndpointSliceExport, MemberCluster, ServiceImport

__all__ = ["importer_selections"]


def importer_selections(
    item: ServiceImport,
    clusters: Sequence[MemberCluster],
    slices: Iterable[EndpointSliceExport],
    importing: Iterable[str],
) -> dict[str, Selection]:
    """For each cluster of `importing`: its tiers and the tier active now. Empty when the
    import has no selectors (every exporter serves every importer)."""
    selectors = item.spec.cluster_selectors
    if not selectors:
        return {}
    policy = item.spec.cluster_selection or DEFAULT_POLICY
    known = {c.metadata.name: c for c in clusters}
    exporters = sorted({s.cluster for s in item.status.clusters})
    properties = {e: known[e].status.properties if e in known else None for e in exporters}
    ready = dict.fromkeys(exporters, 0)
    total = dict.fromkeys(exporters, 0)
    for one in slices:
        source = one.spec.cluster_id
        if source is None or source not in total:
            continue
        if source in known and known[source].status.endpoints_withdrawn:
            continue
        for endpoint in one.spec.endpoints:
            total[source] += 1
            ready[source] += endpoint_is_ready(endpoint.conditions.model_dump())
    counts = {e: EndpointCounts(ready[e], total[e]) for e in exporters}
    answer: dict[str, Selection] = {}
    for name in importing:
        own = (known[name].status.properties or {}) if name in known else {}
        answer[name] = select(selectors, policy, own, properties, counts, None, 0.0)
    return answer
