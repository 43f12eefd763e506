"""`mcsync describe import NS/NAME`: the ServiceImport's page, and for every registered
cluster whether it imports the Service and, if not, why (SPEC §7).

Only what the hub knows is said, and how it knows: the cluster's scope (its
`spec.importNamespaces`, SPEC §4.4: the hub leaves other namespaces out of its import
feed), its state and heartbeat (a Pending cluster's agent never connected; a Stale one's
stopped following the feed, so what it holds is what it last wrote), and whether its agent
reports importing at all (its heartbeat's import counts; absent with `--no-import`). The
hub cannot see a cluster's namespaces, nor a ServiceImport there that mcsync does not own,
so "yes" is qualified by the one condition it cannot check (namespace sameness, SPEC
§2.8), with the command that checks it. Two requests: the import and the clusters. The
rows are `shared.importreach.where_imported`'s, which the hub also answers the console.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cli import render
from cli.commands import Context, print_object
from shared.clusterselection import DEFAULT_POLICY, EndpointCounts, endpoint_is_ready, select
from shared.importreach import NO as NO
from shared.importreach import UNKNOWN as UNKNOWN
from shared.importreach import YES, where_imported
from shared.models import EndpointSliceExport, MemberCluster, ServiceImport


def selection_lines(
    item: ServiceImport,
    clusters: Sequence[MemberCluster],
    slices: Sequence[EndpointSliceExport],
    importing: Sequence[str],
) -> list[str]:
    """Each importing cluster's tiers and active tier (docs/reference.md#cluster-selection),
    worked out as its agent does from what the hub holds: every cluster's properties, the
    import's selectors and policy, and the exporters' ready endpoints (none for a cluster
    whose endpoints are withdrawn). The agent also delays a move back to a better tier by
    `failbackDelaySeconds`, which the hub cannot see: ACTIVE is what the endpoints choose
    now, the page says so."""
    selectors = item.spec.cluster_selectors
    if not selectors:
        return []
    policy = item.spec.cluster_selection or DEFAULT_POLICY
    known = {c.metadata.name: c for c in clusters}
    exporters = sorted({s.cluster for s in item.status.clusters})
    properties = {e: known[e].status.properties if e in known else None for e in exporters}
    ready: dict[str, int] = dict.fromkeys(exporters, 0)
    total: dict[str, int] = dict.fromkeys(exporters, 0)
    for one in slices:
        source = one.spec.cluster_id
        if source not in total or (source in known and known[source].status.endpoints_withdrawn):
            continue
        for endpoint in one.spec.endpoints:
            total[source] += 1
            ready[source] += endpoint_is_ready(endpoint.conditions.model_dump())
    counts = {e: EndpointCounts(ready[e], total[e]) for e in exporters}
    rows = []
    for name in importing:
        own = (known[name].status.properties or {}) if name in known else {}
        chosen = select(selectors, policy, own, properties, counts, None, 0.0)
        tiers = "; ".join(f"{i + 1}: {','.join(t) or render.NONE}"
                          for i, t in enumerate(chosen.tiers))
        active = (f"tier {chosen.active + 1}" if chosen.active is not None
                  else f"fallback {chosen.fallback}")
        rows.append((name, tiers, active, ",".join(chosen.active_clusters) or render.NONE))
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
) -> str:
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
    ctx.out.write(page(item, ctx.client.list_clusters().items, now=ctx.now(), slices=slices))
    return 0
