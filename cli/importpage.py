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
from shared.importreach import NO as NO
from shared.importreach import UNKNOWN as UNKNOWN
from shared.importreach import YES, where_imported
from shared.models import MemberCluster, ServiceImport


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
