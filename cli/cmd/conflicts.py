"""`mcsync conflicts`: the conflicting Services — the conflicting imports (who won, what is
disputed) joined with the conflicting exports (since when): two listings joined in memory,
never one request per Service. JSON and YAML print the ServiceImportList of conflicting
imports, the hub's objects; the table adds what the exports tell (SINCE)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime

from cli import columns, render
from cli.cmd import imports
from cli.cmd.spec import Spec
from cli.columns import Column, Shape
from cli.commands import Context, print_list
from shared.models import InternalServiceExport, ServiceImport, ServiceImportList

COLUMNS: tuple[Column[render.ConflictView], ...] = (
    Column("NAMESPACE", lambda v, now: v.namespace),
    Column("NAME", lambda v, now: v.name),
    Column("WINNER", lambda v, now: render.or_none(v.winner)),
    Column("REASONS", lambda v, now: ",".join(v.reasons) or render.NONE),
    Column("LOSING-CLUSTERS", lambda v, now: ",".join(v.losing_clusters) or render.NONE),
    Column("SINCE", lambda v, now: render.age(v.since, now=now)),
    Column("EXPORTS", lambda v, now: str(v.exports), wide=True),
)
HEADERS = columns.headers(COLUMNS)


def table(
    views: Sequence[render.ConflictView], *, now: datetime, wide: bool = False
) -> render.Table:
    return columns.table(COLUMNS, views, now=now, wide=wide)


class WatchRows:
    """`conflicts --watch` rows: SINCE needs each key's conflicting exports. They come
    from one listing for the initial view, then are read again only for the key an
    export event names (never one request per key of the list)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.exports: dict[Hashable, list[InternalServiceExport]] = {}

    def prime(self, exports: Sequence[InternalServiceExport]) -> None:
        self.exports = {}
        for export in exports:
            ref = export.spec.service_reference
            self.exports.setdefault((ref.namespace, ref.name), []).append(export)

    def forget(self, key: Hashable) -> None:
        self.exports.pop(key, None)

    def row(self, item: ServiceImport) -> render.Cells:
        opts = self.ctx.options
        key = imports.import_key(item)
        if key not in self.exports:
            self.exports[key] = self.ctx.client.list_exports(
                namespace=item.metadata.namespace, name=item.metadata.name, conflict=True,
                page_size=opts.page_size,
            ).items
        views = render.conflict_views([item], self.exports[key])
        if views:
            return columns.row(COLUMNS, views[0], now=self.ctx.now(), wide=opts.wide)
        # No longer conflicting (the row of its DELETED event): name it, nothing disputed.
        size = len(self.shape().headers)
        return (item.metadata.namespace or "", item.metadata.name,
                render.or_none(item.status.winning_cluster), *([render.NONE] * (size - 3)))

    def shape(self) -> Shape[ServiceImport]:
        return Shape(columns.headers(COLUMNS, wide=self.ctx.options.wide), self.row)


def run(ctx: Context) -> int:
    opts = ctx.options
    listing = ctx.client.list_imports(
        namespace=opts.namespace, conflict=True, page_size=opts.page_size
    )
    # The hub filters already; this keeps the view right should an import say otherwise.
    listing = ServiceImportList(
        metadata=listing.metadata, items=[i for i in listing.items if i.status.conflicts]
    )
    if opts.output in ("json", "yaml", "jsonpath", "name") and not opts.watch:
        return print_list(ctx, listing, listing.items, lambda: render.Table((), ()))
    conflicting: list[InternalServiceExport] = []
    if listing.items:
        conflicting = ctx.client.list_exports(
            namespace=opts.namespace, conflict=True, page_size=opts.page_size
        ).items
    if opts.watch:
        rows = WatchRows(ctx)
        rows.prime(conflicting)
        return imports.follow_imports(ctx, listing, rows.shape(), conflicting_only=True,
                                      changed=rows.forget)
    views = render.conflict_views(listing.items, conflicting)
    return print_list(ctx, listing, listing.items,
                      lambda: table(views, now=ctx.now(), wide=opts.wide))


COMMAND = Spec(
    "conflicts",
    "list conflicting services: winner, disputed fields, losers",
    run,
    settings=("namespace",),
    watches=True,
)
