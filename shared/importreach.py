"""Where a Service is imported and, where not, why: one answer per registered cluster.

Only what the hub knows is said, and how it knows: the cluster's scope (its
`spec.importNamespaces`: the hub leaves other namespaces out of its import feed,
docs/reference.md#scope-and-limits), its state and heartbeat (a Pending cluster's agent
never connected; a Stale one's stopped following the feed, so what it holds is what it
last wrote), and whether its agent reports importing at all (its heartbeat's import
counts; absent with `--no-import`), and whether the winner's `mcsync.io/import-clusters`
selects it by the properties it reported (`not_selected`: the hub leaves the Service out
of that cluster's import feed, docs/reference.md#cluster-selection), and whether the
namespace is there: each agent reports the namespaces it holds within its import scope
(`PUT …/clusters/{c}/namespaces`), so where the namespace is absent the answer is "no"
(`NO`, "namespace absent"), where present "yes" (`YES`). For a cluster whose agent has not
reported yet the hub cannot see the namespace, so "yes" is qualified (`YES_UNCHECKED`,
`yes*`) by the condition it cannot check. A ServiceImport there that mcsync does not own
stays unseen either way.

One function for the CLI's `mcsync describe import` and the hub's
`GET /api/v1/serviceimports/{namespace}/{name}/importers`, which the console shows: the
console asks the hub instead of restating these rules (and the scope's globs) in JS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final

from shared.clusterselection import ImportClustersSelector, matches
from shared.models import ImportAnswer, MemberCluster, ServiceImport
from shared.scope import allows
from shared.timefmt import human_duration

__all__ = ["NO", "UNKNOWN", "YES", "YES_UNCHECKED", "not_selected", "where_imported"]

YES: Final[ImportAnswer] = "yes"
YES_UNCHECKED: Final[ImportAnswer] = "yes*"
NO: Final[ImportAnswer] = "no"
UNKNOWN: Final[ImportAnswer] = "unknown"


def not_selected(selector: ImportClustersSelector | None,
                 cluster: MemberCluster) -> str | None:
    """Why `mcsync.io/import-clusters` (the winner's, `selector`) leaves `cluster` out,
    naming the selector and the properties it judged; None when it does not."""
    if selector is None:
        return None
    properties = cluster.status.properties
    if matches(selector, properties or {}, {}):
        return None
    wanted = json.dumps(selector.model_dump(mode="json", by_alias=True, exclude_defaults=True),
                        sort_keys=True, separators=(",", ":"))
    if properties is None:
        has = "it has reported no properties yet"
    else:
        relevant = sorted({*selector.match_properties,
                           *(t.key for t in selector.match_expressions)})
        shown = ", ".join(f"{k}={properties[k]}" if k in properties else f"no {k}"
                          for k in relevant)
        has = f"it has {shown}"
    return (f"not selected by mcsync.io/import-clusters {wanted}: {has} (the hub leaves the "
            "Service out of its import feed)")


def where_imported(
    item: ServiceImport,
    clusters: Sequence[MemberCluster],
    *,
    now: datetime,
    namespace_present: Mapping[str, bool] | None = None,
) -> list[tuple[str, ImportAnswer, str]]:
    """(cluster, imports, why) for every registered cluster, by name. `namespace_present`:
    per cluster whose agent reported its namespaces, whether the import's namespace is
    among them (a cluster left out has not reported)."""
    reported = namespace_present or {}
    exporters = {c.cluster for c in item.status.clusters}
    namespace = item.metadata.namespace or ""
    rows: list[tuple[str, ImportAnswer, str]] = []
    for cluster in sorted(clusters, key=lambda c: c.metadata.name):
        name, status = cluster.metadata.name, cluster.status
        scope = cluster.spec.import_namespaces
        if not allows(scope, namespace):
            listed = ", ".join(scope or []) or "none"
            rows.append((name, NO, f"its scope imports only namespaces {listed}, not "
                                   f"{namespace} (`mcsync clusters set-scope {name}` changes "
                                   "it)"))
        elif (why_not := not_selected(item.spec.import_clusters, cluster)) is not None:
            rows.append((name, NO, why_not))
        elif status.state == "Pending":
            rows.append((name, NO, "Pending: its agent has never sent a heartbeat, so it "
                                   "follows no import feed"))
        elif status.state == "Stale":
            seen = status.last_heartbeat_time
            since = (f" for {human_duration((now - seen).total_seconds())}"
                     if seen is not None else "")
            rows.append((name, UNKNOWN, f"Stale: no heartbeat{since}; its agent does not "
                                        "follow the feed, and what it last wrote stays as it was"))
        elif status.imported_services is None:
            rows.append((name, NO, "its agent reports no imports (started with --no-import, "
                                   "or too old to import)"))
        elif reported.get(name) is False:
            rows.append((name, NO, f"namespace absent: its agent reports no namespace "
                                   f"{namespace} it may import into (none there, being "
                                   "deleted, or outside its --namespace/--deny-namespace); "
                                   "it imports once there is"))
        else:
            why = "Ready, following the import feed"
            if name in reported:
                why += f"; namespace {namespace} is there"
            if name in exporters:
                why += "; it exports the Service too"
            rows.append((name, YES if name in reported else YES_UNCHECKED, why))
    return rows
