"""`mcsync imports`: the derived ServiceImports, one per exported Service; `--watch`
re-reads the one ServiceImport whose key an export event names — one request per change,
whatever the size of the fleet. `conflicts --watch` follows them the same way.

`-o wide` adds ACTIVE: for an import with cluster selectors, how many of its importing
clusters are on each tier (`tier1:48,tier2:2`, `fallback:N`), as `describe import` works
each one out (`shared.selectionview`, docs/reference.md#cluster-selection). The inputs are
two more listings, the clusters and the endpoint slices, asked once for the whole table
(and only when an import has selectors), never once per row; `--watch` re-reads the slices
of the one Service an event names."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cli import columns, render
from cli.client import HubError
from cli.cmd.spec import Spec
from cli.columns import Column, Shape
from cli.commands import Context, WatchPrinter, changed_export, print_list, watch
from cli.options import Options
from cli.watch import View, same_version
from shared.importreach import NO, where_imported
from shared.models import (
    EndpointSliceExport,
    MemberCluster,
    ServiceImport,
    ServiceImportList,
    WatchEvent,
)
from shared.selectionview import importer_selections

Key = tuple[str, str]


@dataclass
class Fleet:
    """What the ACTIVE cells are worked out from: every cluster (properties, state,
    scope) and the exporters' slices by Service. Empty: the table had no import with
    selectors, so nothing was asked."""

    clusters: Sequence[MemberCluster] = ()
    slices: dict[Key, list[EndpointSliceExport]] = field(default_factory=dict)

    @classmethod
    def of(cls, clusters: Sequence[MemberCluster],
           slices: Iterable[EndpointSliceExport]) -> Fleet:
        fleet = cls(clusters)
        for one in slices:
            fleet.slices.setdefault(
                (one.metadata.namespace or "", one.spec.service_name or ""), []).append(one)
        return fleet


def active_cell(item: ServiceImport, now: datetime, fleet: Fleet) -> str:
    """`tier1:2,tier2:1`: per active tier (fallback last), how many importing clusters are
    on it; `<none>` for an import without selectors or without importers."""
    if not item.spec.cluster_selectors:
        return render.NONE
    importing = [c for c, imports, _ in where_imported(item, fleet.clusters, now=now)
                 if imports != NO]
    key = (item.metadata.namespace or "", item.metadata.name)
    chosen = importer_selections(item, fleet.clusters, fleet.slices.get(key, ()), importing)
    counts = Counter(s.active for s in chosen.values())
    order = sorted(counts, key=lambda tier: len(item.spec.cluster_selectors or ())
                   if tier is None else tier)
    cells = [f"{'fallback' if tier is None else f'tier{tier + 1}'}:{counts[tier]}"
             for tier in order]
    return ",".join(cells) or render.NONE


def columns_for(fleet: Fleet) -> tuple[Column[ServiceImport], ...]:
    """The table's columns, ACTIVE reading `fleet`."""
    return (*BASE_COLUMNS,
            Column("ACTIVE", lambda i, now: active_cell(i, now, fleet), wide=True))


BASE_COLUMNS: tuple[Column[ServiceImport], ...] = (
    Column("NAMESPACE", lambda i, now: i.metadata.namespace or ""),
    Column("NAME", lambda i, now: i.metadata.name),
    Column("TYPE", lambda i, now: i.spec.type),
    Column("PORTS", lambda i, now: render.ports(i.spec.ports)),
    Column("CLUSTERS", lambda i, now: render.names([c.cluster for c in i.status.clusters])),
    Column("CONFLICTS", lambda i, now: ",".join(i.status.conflicts) or render.NONE),
    Column("AGE", lambda i, now: render.age(i.metadata.creation_timestamp, now=now)),
    Column("WINNER", lambda i, now: render.or_none(i.status.winning_cluster), wide=True),
    Column("RESOURCE-VERSION",
           lambda i, now: render.or_none(i.metadata.resource_version), wide=True),
)
# ACTIVE last, so -o wide's earlier columns keep their positions.
COLUMNS = columns_for(Fleet())
HEADERS = columns.headers(COLUMNS)


def table(items: Sequence[ServiceImport], *, now: datetime, wide: bool = False,
          fleet: Fleet | None = None) -> render.Table:
    return columns.table(columns_for(fleet or Fleet()), items, now=now, wide=wide)


def shape(ctx: Context, fleet: Fleet | None = None) -> Shape[ServiceImport]:
    return columns.shape(columns_for(fleet or Fleet()), now=ctx.now, wide=ctx.options.wide)


def fleet_for(ctx: Context, items: Sequence[ServiceImport], *,
              service: str | None = None) -> Fleet:
    """The ACTIVE column's inputs: two listings when the table is wide and an import has
    selectors, else none (`service`: the one Service a `get` shows)."""
    if not ctx.options.wide or not any(i.spec.cluster_selectors for i in items):
        return Fleet()
    opts = ctx.options
    return Fleet.of(
        ctx.client.list_clusters().items,
        ctx.client.list_endpoint_slices(namespace=opts.namespace, service=service,
                                        page_size=opts.page_size).items,
    )


def import_key(item: ServiceImport) -> Hashable:
    return item.metadata.namespace or "", item.metadata.name


def _matches(opts: Options, *, conflicting_only: bool) -> Callable[[ServiceImport], bool]:
    conflict = True if conflicting_only else opts.conflict

    def matches(item: ServiceImport) -> bool:
        if opts.namespace is not None and item.metadata.namespace != opts.namespace:
            return False
        return conflict is None or bool(item.status.conflicts) == conflict

    return matches


def follow_imports(
    ctx: Context, listing: ServiceImportList, shape: Shape[ServiceImport], *,
    conflicting_only: bool, changed: Callable[[Hashable], None] = lambda _: None,
) -> int:
    """Print the imports, then one line per import an export event changes."""
    opts = ctx.options
    view: View[ServiceImport] = View(
        import_key, matches=_matches(opts, conflicting_only=conflicting_only),
        same=same_version,
    )

    def on_event(event: WatchEvent, printer: WatchPrinter[ServiceImport]) -> None:
        export = changed_export(event)
        if export is None:
            return
        ref = export.spec.service_reference
        if opts.namespace is not None and ref.namespace != opts.namespace:
            return
        changed((ref.namespace, ref.name))
        try:
            item = ctx.client.get_import(ref.namespace, ref.name)
        except HubError as exc:
            if exc.code != 404:
                raise
            printer.emit(view.remove((ref.namespace, ref.name)))  # the key's last export went
            return
        printer.emit(view.apply("MODIFIED", item))

    def relist() -> tuple[Sequence[ServiceImport], str | None]:
        fresh = ctx.client.list_imports(namespace=opts.namespace, page_size=opts.page_size)
        return fresh.items, fresh.metadata.resource_version

    return watch(ctx, view=view, listing=listing.items, shape=shape,
                 resource_version=listing.metadata.resource_version,
                 on_event=on_event, relist=relist)


def run(ctx: Context) -> int:
    opts = ctx.options
    listing = ctx.client.list_imports(
        namespace=opts.namespace, conflict=opts.conflict, page_size=opts.page_size
    )
    fleet = fleet_for(ctx, listing.items)
    if opts.watch:
        def changed(key: Hashable) -> None:
            # The Service's slices as they are now, for its ACTIVE cell: one request.
            if opts.wide and fleet.clusters:
                namespace, name = str(key[0]), str(key[1])  # type: ignore[index]
                fleet.slices[(namespace, name)] = list(ctx.client.list_endpoint_slices(
                    namespace=namespace, service=name, page_size=opts.page_size).items)

        return follow_imports(ctx, listing, shape(ctx, fleet), conflicting_only=False,
                              changed=changed)
    return print_list(ctx, listing, listing.items,
                      lambda: table(listing.items, now=ctx.now(), wide=opts.wide, fleet=fleet))


COMMAND = Spec(
    "imports",
    "list derived ServiceImports (one per exported service)",
    run,
    settings=("namespace", "conflict"),
    watches=True,
)
