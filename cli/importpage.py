"""`mcsync describe import NS/NAME`: the ServiceImport's page, and for every registered
cluster whether it imports the Service and, if not, why (docs/reference.md#cli).

Only what the hub knows is said, and how it knows: the cluster's scope (its
`spec.importNamespaces`, docs/reference.md#scope-and-limits: the hub leaves other namespaces out of
its import feed), its state and heartbeat (a Pending cluster's agent never connected; a Stale one's
stopped following the feed, so what it holds is what it last wrote), and whether its agent
reports importing at all (its heartbeat's import counts; absent with `--no-import`), and
whether the namespace is there, as each agent reports the namespaces it holds ("no" with
"namespace absent" where it is not). For a cluster whose agent has not reported yet, "yes"
is qualified (`yes*`) by the condition the hub cannot check (namespace sameness,
docs/reference.md#import-path), with the command that checks it. Three requests: the
import, the clusters and the hub's rows (`GET …/importers`, `shared.importreach`'s
`where_imported` over the namespaces only the hub holds; the console shows the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cli import render
from cli.commands import Context, print_object
from shared.clusterselection import DEFAULT_POLICY
from shared.importreach import NO as NO
from shared.importreach import UNKNOWN as UNKNOWN
from shared.importreach import YES as YES
from shared.importreach import YES_UNCHECKED, where_imported
from shared.models import EndpointSliceExport, ImportAnswer, MemberCluster, ServiceImport
from shared.selectionview import importer_selections


def selection_lines(
    item: ServiceImport,
    clusters: Sequence[MemberCluster],
    slices: Sequence[EndpointSliceExport],
    importing: Sequence[str],
) -> list[str]:
    """Each importing cluster's tiers and active tier (docs/reference.md#cluster-selection),
    as `shared.selectionview` works them out from what the hub holds."""
    chosen = importer_selections(item, clusters, slices, importing)
    if not chosen:
        return []
    policy = item.spec.cluster_selection or DEFAULT_POLICY
    rows = []
    for name, selection in chosen.items():
        tiers = "; ".join(f"{i + 1}: {','.join(t) or render.NONE}"
                          for i, t in enumerate(selection.tiers))
        active = (f"tier {selection.active + 1}" if selection.active is not None
                  else f"fallback {selection.fallback}")
        rows.append((name, tiers, active, ",".join(selection.active_clusters) or render.NONE))
    table = render.Table(("CLUSTER", "TIERS", "ACTIVE", "ACTIVE-CLUSTERS"), tuple(rows))
    return [
        f"Cluster selection (fallback {policy.fallback}, minReadyEndpoints "
        f"{policy.min_ready_endpoints}, minReadyPercent {policy.min_ready_percent}, "
        f"failbackDelaySeconds {policy.failback_delay_seconds}):",
        *["  " + line for line in render.format_table(table).splitlines()],
        "  ACTIVE is what the ready endpoints choose now; each agent waits "
        "failbackDelaySeconds before it moves back to a better tier (its ServiceImport's "
        "mcsync.io/active-clusters annotation says where it is).",
    ]


def page(
    item: ServiceImport,
    clusters: Sequence[MemberCluster],
    *,
    now: datetime,
    slices: Sequence[EndpointSliceExport] = (),
    rows: Sequence[tuple[str, ImportAnswer, str]] | None = None,
) -> str:
    """`rows`: the hub's answer of where the Service is imported (None: worked out here,
    without the namespaces the agents reported)."""
    namespace, name = item.metadata.namespace, item.metadata.name
    if rows is None:
        rows = where_imported(item, clusters, now=now)
    lines = ["Imported in:"]
    if rows:
        table = render.Table(("CLUSTER", "IMPORTS", "WHY"), tuple(rows))
        lines += ["  " + line for line in render.format_table(table).splitlines()]
    else:
        lines.append(f"  {render.NONE} (no cluster is registered)")
    if any(imports == YES_UNCHECKED for _, imports, _ in rows):
        lines.append(
            f"  * when namespace {namespace} exists in that cluster (its agent has not "
            "reported its namespaces yet): an agent imports only "
            "into namespaces that exist there, and never over a ServiceImport mcsync does "
            "not own; the hub sees neither (`kubectl get namespace "
            f"{namespace}` and `kubectl get serviceimport {name} -n {namespace} -o yaml` "
            "in the cluster do)")
    importing = [cluster for cluster, imports, _ in rows if imports != NO]
    lines += selection_lines(item, clusters, slices, importing)
    return render.describe_import(item, now=now) + "\n".join(lines) + "\n"


def describe(ctx: Context) -> int:
    """The page; with -o json, yaml, jsonpath or name the hub's ServiceImport, as `get`."""
    opts = ctx.options
    assert opts.namespace is not None and opts.name is not None  # args.parse_args sees to it
    item = ctx.client.get_import(opts.namespace, opts.name)
    if print_object(ctx, item):
        return 0
    slices = (
        ctx.client.list_endpoint_slices(namespace=opts.namespace, service=opts.name).items
        if item.spec.cluster_selectors
        else []
    )
    rows = [(i.cluster, i.imports, i.why)
            for i in ctx.client.list_importers(opts.namespace, opts.name).items]
    ctx.out.write(page(item, ctx.client.list_clusters().items, now=ctx.now(), slices=slices,
                       rows=rows))
    return 0
