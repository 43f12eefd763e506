"""`mcsync imports`: the derived ServiceImports, one per exported Service; `--watch`
re-reads the one ServiceImport whose key an export event names — one request per change,
whatever the size of the fleet. `conflicts --watch` follows them the same way."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from datetime import datetime

from cli import columns, render
from cli.client import HubError
from cli.cmd.spec import Spec
from cli.columns import Column, Shape
from cli.commands import Context, WatchPrinter, changed_export, print_list, watch
from cli.options import Options
from cli.watch import View, same_version
from shared.models import ServiceImport, ServiceImportList, WatchEvent

COLUMNS: tuple[Column[ServiceImport], ...] = (
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
HEADERS = columns.headers(COLUMNS)


def table(items: Sequence[ServiceImport], *, now: datetime, wide: bool = False) -> render.Table:
    return columns.table(COLUMNS, items, now=now, wide=wide)


def shape(ctx: Context) -> Shape[ServiceImport]:
    return columns.shape(COLUMNS, now=ctx.now, wide=ctx.options.wide)


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
    if opts.watch:
        return follow_imports(ctx, listing, shape(ctx), conflicting_only=False)
    return print_list(ctx, listing, listing.items,
                      lambda: table(listing.items, now=ctx.now(), wide=opts.wide))


DECLARED = Spec(
    "imports",
    "list derived ServiceImports (one per exported service)",
    run,
    settings=("namespace", "conflict"),
    watches=True,
)
