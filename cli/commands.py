"""One function per `mcsync` sub-command: fetch through `HubClient`, print through `render`.

Each command makes a fixed, small number of requests whatever the size of the fleet
(`conflicts` is two listings joined in memory, never one request per service) and writes
to the streams it is given, so the end-to-end tests read exactly what an operator sees.
An empty result is not an error: `No resources found.` goes to stderr (stdout stays
clean for pipes) and the exit code is 0, as with `kubectl get`. JSON and YAML print the
hub's objects, a list for a list command, so they parse back into `shared.models`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TextIO, get_args

from pydantic import BaseModel

from cli import render
from cli.args import Options
from cli.client import HubClient
from cli.watch import ExportFilter, ExportView, ViewEventType, follow
from shared.models import (
    InternalServiceExport,
    InternalServiceExportList,
    MemberClusterList,
    ServiceImportList,
    WatchEvent,
)
from shared.timefmt import utcnow


@dataclass(frozen=True)
class Context:
    """What every command needs: the parsed options, the hub, the streams, the clock."""

    options: Options
    client: HubClient
    out: TextIO
    err: TextIO
    now: Callable[[], datetime] = utcnow


def _print_objects(ctx: Context, obj: BaseModel, table: Callable[[], render.Table]) -> int:
    """Print `obj` as -o asks; for tables, `table()` builds the rows."""
    output = ctx.options.output
    if output == "json":
        ctx.out.write(render.to_json(obj))
    elif output == "yaml":
        ctx.out.write(render.to_yaml(obj))
    else:
        out, err = render.listing_output(table())
        ctx.out.write(out)
        ctx.err.write(err)
    return 0


def clusters(ctx: Context) -> int:
    opts = ctx.options
    if opts.name is not None:
        one = ctx.client.get_cluster(opts.name)
        if opts.output in ("json", "yaml"):
            return _print_objects(ctx, one, lambda: render.Table((), ()))
        listing = MemberClusterList(items=[one])
    else:
        listing = ctx.client.list_clusters()
    return _print_objects(
        ctx, listing, lambda: render.clusters_table(listing.items, now=ctx.now(), wide=opts.wide)
    )


def _export_filter(opts: Options) -> ExportFilter:
    return ExportFilter(
        namespace=opts.namespace, name=opts.name, cluster=opts.cluster, conflict=opts.conflict
    )


def _list_exports(ctx: Context) -> InternalServiceExportList:
    opts = ctx.options
    return ctx.client.list_exports(
        namespace=opts.namespace, name=opts.name, cluster=opts.cluster,
        conflict=opts.conflict, page_size=opts.page_size,
    )


def exports(ctx: Context) -> int:
    listing = _list_exports(ctx)
    if ctx.options.watch:
        return _watch_exports(ctx, listing)
    return _print_objects(
        ctx, listing,
        lambda: render.exports_table(listing.items, now=ctx.now(), wide=ctx.options.wide),
    )


class _WatchPrinter:
    """Prints the initial list and then each change, in the chosen output format.

    Tables get an EVENT column, as wide as the longest event type from the start (a first
    batch of ADDED rows must not leave a later DELETED pushing its row out of line); the
    other widths come from the first batch printed, so later rows line up unless a cell is
    longer than anything seen before (it then pushes the rest of its line, as kubectl's
    watch output does). JSON is one `WatchEvent` per line; YAML one `WatchEvent` document
    per change.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.widths: tuple[int, ...] | None = None
        self.headers = ("EVENT", *render.export_headers(wide=ctx.options.wide))

    def _row(self, event_type: str, export: InternalServiceExport) -> render.Cells:
        cells = render.export_row(export, now=self.ctx.now(), wide=self.ctx.options.wide)
        return (event_type, *cells)

    def batch(self, events: list[tuple[ViewEventType, InternalServiceExport]]) -> None:
        output = self.ctx.options.output
        out = self.ctx.out
        if output in ("json", "yaml"):
            for event_type, export in events:
                event = WatchEvent(type=event_type, object=export)
                if output == "json":
                    out.write(render.to_json_line(event))
                else:
                    out.write("---\n" + render.to_yaml(event))
        else:
            rows = tuple(self._row(t, e) for t, e in events)
            if self.widths is None:
                event_width, *rest = render.Table(self.headers, rows).widths()
                self.widths = (max(event_width, *map(len, get_args(ViewEventType))), *rest)
                out.write(render.format_row(self.headers, self.widths) + "\n")
            for row in rows:
                out.write(render.format_row(row, self.widths) + "\n")
        out.flush()

    def emit(self, event_type: ViewEventType, export: InternalServiceExport) -> None:
        self.batch([(event_type, export)])


def _watch_exports(ctx: Context, listing: InternalServiceExportList) -> int:
    view = ExportView(_export_filter(ctx.options))
    initial = view.replace(listing.items)
    printer = _WatchPrinter(ctx)
    if initial:
        printer.batch(initial)
    else:
        ctx.err.write(render.EMPTY_MESSAGE + " Watching for changes.\n")
        ctx.err.flush()

    def warn(message: str) -> None:
        ctx.err.write(message + "\n")
        ctx.err.flush()

    follow(
        ctx.client,
        view=view,
        resource_version=listing.metadata.resource_version,
        relist=lambda: _list_exports(ctx),
        emit=printer.emit,
        warn=warn,
    )
    return 0


def imports(ctx: Context) -> int:
    opts = ctx.options
    listing = ctx.client.list_imports(
        namespace=opts.namespace, conflict=opts.conflict, page_size=opts.page_size
    )
    return _print_objects(
        ctx, listing, lambda: render.imports_table(listing.items, now=ctx.now(), wide=opts.wide)
    )


def conflicts(ctx: Context) -> int:
    """Conflicting services: the conflicting imports, joined with the conflicting exports.

    JSON/YAML print the ServiceImportList of conflicting imports (the hub's objects); the
    table adds what the exports tell (SINCE).
    """
    opts = ctx.options
    listing = ctx.client.list_imports(
        namespace=opts.namespace, conflict=True, page_size=opts.page_size
    )
    # The hub filters already; this keeps the view right should an import say otherwise.
    listing = ServiceImportList(
        metadata=listing.metadata, items=[i for i in listing.items if i.status.conflicts]
    )
    if opts.output in ("json", "yaml"):
        return _print_objects(ctx, listing, lambda: render.Table((), ()))
    conflicting: list[InternalServiceExport] = []
    if listing.items:
        conflicting = ctx.client.list_exports(
            namespace=opts.namespace, conflict=True, page_size=opts.page_size
        ).items
    views = render.conflict_views(listing.items, conflicting)
    return _print_objects(
        ctx, listing, lambda: render.conflicts_table(views, now=ctx.now(), wide=opts.wide)
    )


def get(ctx: Context) -> int:
    opts = ctx.options
    assert opts.namespace is not None and opts.name is not None  # args.parse_args sees to it
    if opts.kind == "export":
        assert opts.cluster is not None
        export = ctx.client.get_export(opts.cluster, opts.namespace, opts.name)
        if opts.output == "table":
            ctx.out.write(render.describe_export(export, now=ctx.now()))
            return 0
        return _print_objects(
            ctx, export, lambda: render.exports_table([export], now=ctx.now(), wide=True)
        )
    item = ctx.client.get_import(opts.namespace, opts.name)
    if opts.output == "table":
        ctx.out.write(render.describe_import(item, now=ctx.now()))
        return 0
    return _print_objects(
        ctx, item, lambda: render.imports_table([item], now=ctx.now(), wide=True)
    )


COMMANDS: dict[str, Callable[[Context], int]] = {
    "clusters": clusters,
    "exports": exports,
    "imports": imports,
    "conflicts": conflicts,
    "get": get,
}


def run(ctx: Context) -> int:
    """Run the command `ctx.options` names; its exit code (HubError propagates)."""
    return COMMANDS[ctx.options.command](ctx)
