"""`mcsync exports`: every cluster's export of a Service; `--watch` shows the export feed's
objects, filtered (`ExportView`). `--invalid` lists instead the ServiceExports that members
could not export, and why, as each agent last reported them in its heartbeat."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import datetime

from cli import columns, render
from cli.cmd.spec import Spec
from cli.columns import Column
from cli.commands import Context, WatchPrinter, changed_export, print_list, watch
from cli.options import Options
from cli.watch import ExportFilter, ExportView
from shared.constants import INVALID_EXPORTS_MAX
from shared.models import (
    InternalServiceExport,
    InternalServiceExportList,
    InvalidServiceExport,
    WatchEvent,
)


def _conflict_status(export: InternalServiceExport) -> str:
    condition = render.conflict_condition(export)
    return condition.status if condition else render.NONE


def _conflict_reason(export: InternalServiceExport) -> str:
    condition = render.conflict_condition(export)
    return condition.reason if condition else render.NONE


def _created(export: InternalServiceExport) -> datetime:
    ref = export.spec.service_reference
    return export.metadata.creation_timestamp or ref.export_creation_timestamp


COLUMNS: tuple[Column[InternalServiceExport], ...] = (
    Column("NAMESPACE",
           lambda e, now: e.metadata.namespace or e.spec.service_reference.namespace),
    Column("NAME", lambda e, now: e.metadata.name),
    Column("CLUSTER", lambda e, now: e.spec.service_reference.cluster_id),
    Column("TYPE", lambda e, now: e.spec.type),
    Column("PORTS", lambda e, now: render.ports(e.spec.ports)),
    Column("CONFLICT", lambda e, now: _conflict_status(e)),
    Column("REASON", lambda e, now: _conflict_reason(e)),
    Column("AGE", lambda e, now: render.age(_created(e), now=now)),
    Column("CLUSTER-STATE", lambda e, now: render.or_none(e.status.cluster_state), wide=True),
    Column("CREATED",
           lambda e, now: render.timestamp(e.spec.service_reference.export_creation_timestamp),
           wide=True),
    Column("RESOURCE-VERSION",
           lambda e, now: render.or_none(e.metadata.resource_version), wide=True),
)
HEADERS = columns.headers(COLUMNS)

INVALID_COLUMNS: tuple[Column[InvalidServiceExport], ...] = (
    Column("CLUSTER", lambda i, now: i.cluster),
    Column("NAMESPACE", lambda i, now: i.namespace),
    Column("NAME", lambda i, now: i.name),
    Column("REASON", lambda i, now: i.reason),
    Column("MESSAGE", lambda i, now: i.message),
)


def table(
    items: Sequence[InternalServiceExport], *, now: datetime, wide: bool = False
) -> render.Table:
    return columns.table(COLUMNS, items, now=now, wide=wide)


def shape(ctx: Context) -> columns.Shape[InternalServiceExport]:
    return columns.shape(COLUMNS, now=ctx.now, wide=ctx.options.wide)


def flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--invalid",
        action="store_true",
        help="list the ServiceExports that are Valid=False in their cluster, with the "
        "reason, as each agent last reported them (never exported, so never in conflicts)",
    )


def _export_filter(opts: Options) -> ExportFilter:
    return ExportFilter(
        namespace=opts.namespace, name=opts.name, cluster=opts.cluster, conflict=opts.conflict
    )


def _list(ctx: Context) -> InternalServiceExportList:
    opts = ctx.options
    return ctx.client.list_exports(
        namespace=opts.namespace, name=opts.name, cluster=opts.cluster,
        conflict=opts.conflict, page_size=opts.page_size,
    )


def run(ctx: Context) -> int:
    if ctx.options.invalid:
        return invalid(ctx)
    listing = _list(ctx)
    if ctx.options.watch:
        view = ExportView(_export_filter(ctx.options))

        def on_event(
            event: WatchEvent, printer: WatchPrinter[InternalServiceExport]
        ) -> None:
            export = changed_export(event)
            if export is not None:
                printer.emit(view.apply(event.type, export))

        def relist() -> tuple[Sequence[InternalServiceExport], str | None]:
            fresh = _list(ctx)
            return fresh.items, fresh.metadata.resource_version

        return watch(ctx, view=view, listing=listing.items, shape=shape(ctx),
                     resource_version=listing.metadata.resource_version,
                     on_event=on_event, relist=relist,
                     stream=lambda revision: ctx.client.watch_exports(
                         resource_version=revision, cluster=ctx.options.cluster))
    return print_list(ctx, listing, listing.items,
                      lambda: table(listing.items, now=ctx.now(), wide=ctx.options.wide))


def invalid(ctx: Context) -> int:
    """`exports --invalid`: ServiceExports that members could not export, and why
    (docs/reference.md#conditions). What each agent last reported in its heartbeat, so up
    to one interval old."""
    opts = ctx.options
    listing = ctx.client.list_invalid_exports(namespace=opts.namespace, cluster=opts.cluster)
    items = [i for i in listing.items if opts.name is None or i.name == opts.name]
    listing = listing.model_copy(update={"items": items})
    for cluster, total in sorted(listing.truncated.items()):
        ctx.err.write(
            f"cluster {cluster} has {total} invalid ServiceExports; its agent lists the "
            f"first {INVALID_EXPORTS_MAX} (by namespace and name)\n"
        )
    if opts.output == "name":
        ctx.out.write("".join(f"{i.cluster}/{i.namespace}/{i.name}\n" for i in items))
        return 0
    return print_list(ctx, listing, items,
                      lambda: columns.table(INVALID_COLUMNS, items, now=ctx.now()))


COMMAND = Spec(
    "exports",
    "list exported services (every cluster's export; --invalid: the ServiceExports "
    "that members could not export, and why)",
    run,
    flags=flags,
    settings=("namespace", "cluster", "conflict", "name"),
    watches=True,
)
