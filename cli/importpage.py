"""`mcsync describe import NS/NAME`: the ServiceImport's page, and for every registered
cluster whether it imports the Service and, if not, why (SPEC §7).

Only what the hub knows is said, and how it knows: the cluster's scope (its
`spec.importNamespaces`, SPEC §4.4: the hub leaves other namespaces out of its import
feed), its state and heartbeat (a Pending cluster's agent never connected; a Stale one's
stopped following the feed, so what it holds is what it last wrote), and whether its agent
reports importing at all (its heartbeat's import counts; absent with `--no-import`). The
hub cannot see a cluster's namespaces, nor a ServiceImport there that mcsync does not own,
so "yes" is qualified by the one condition it cannot check (namespace sameness, SPEC
§2.8), with the command that checks it. A cluster the winner's `mcsync.io/import-clusters`
does not select is named with the selector and its properties (`not_selected`). Two
requests: the import and the clusters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from cli import render
from cli.commands import Context, print_object
from shared.clusterselection import ImportClustersSelector, matches
from shared.models import MemberCluster, ServiceImport
from shared.scope import allows

YES, NO, UNKNOWN = "yes*", "no", "unknown"


def not_selected(selector: ImportClustersSelector | None,
                 cluster: MemberCluster) -> str | None:
    """Why `mcsync.io/import-clusters` (the winner's, `selector`) leaves `cluster` out,
    or None when it does not (docs/reference.md#cluster-selection): the hub then leaves
    the Service out of that cluster's import feed."""
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


def where_imported(item: ServiceImport, clusters: Sequence[MemberCluster], *,
                   now: datetime) -> list[tuple[str, str, str]]:
    """(cluster, imports, why) for every registered cluster, by name."""
    exporters = {c.cluster for c in item.status.clusters}
    namespace = item.metadata.namespace or ""
    rows = []
    for cluster in sorted(clusters, key=lambda c: c.metadata.name):
        name, status = cluster.metadata.name, cluster.status
        scope = cluster.spec.import_namespaces
        if not allows(scope, namespace):
            listed = ", ".join(scope or []) or "none"
            rows.append((name, NO, f"its scope imports only namespaces {listed}, not "
                                   f"{namespace} (`mcsync clusters set-scope {name}` changes "
                                   "it)"))
        elif (why_not := not_selected(getattr(item.spec, "import_clusters", None),
                                      cluster)) is not None:
            rows.append((name, NO, why_not))
        elif status.state == "Pending":
            rows.append((name, NO, "Pending: its agent has never sent a heartbeat, so it "
                                   "follows no import feed"))
        elif status.state == "Stale":
            since = (f" for {render.age(status.last_heartbeat_time, now=now)}"
                     if status.last_heartbeat_time else "")
            rows.append((name, UNKNOWN, f"Stale: no heartbeat{since}; its agent does not "
                                        "follow the feed, and what it last wrote stays as it was"))
        elif status.imported_services is None:
            rows.append((name, NO, "its agent reports no imports (started with --no-import, "
                                   "or too old to import)"))
        else:
            why = "Ready, following the import feed"
            if name in exporters:
                why += "; it exports the Service too"
            rows.append((name, YES, why))
    return rows


def page(item: ServiceImport, clusters: Sequence[MemberCluster], *, now: datetime) -> str:
    namespace, name = item.metadata.namespace, item.metadata.name
    rows = where_imported(item, clusters, now=now)
    lines = ["Imported in:"]
    if rows:
        table = render.Table(("CLUSTER", "IMPORTS", "WHY"), tuple(rows))
        lines += ["  " + line for line in render.format_table(table).splitlines()]
    else:
        lines.append(f"  {render.NONE} (no cluster is registered)")
    if any(imports == YES for _, imports, _ in rows):
        lines.append(
            f"  * when namespace {namespace} exists in that cluster: an agent imports only "
            "into namespaces that exist there, and never over a ServiceImport mcsync does "
            "not own; the hub sees neither (`kubectl get namespace "
            f"{namespace}` and `kubectl get serviceimport {name} -n {namespace} -o yaml` "
            "in the cluster do)")
    return render.describe_import(item, now=now) + "\n".join(lines) + "\n"


def describe(ctx: Context) -> int:
    """The page; with -o json, yaml, jsonpath or name the hub's ServiceImport, as `get`."""
    opts = ctx.options
    assert opts.namespace is not None and opts.name is not None  # args.parse_args sees to it
    item = ctx.client.get_import(opts.namespace, opts.name)
    if print_object(ctx, item):
        return 0
    ctx.out.write(page(item, ctx.client.list_clusters().items, now=ctx.now()))
    return 0
