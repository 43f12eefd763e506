"""`mcsync endpoints [[NS/]NAME]`: the exported EndpointSlices, ready/total endpoints per
slice. `--watch` follows the hub's import feed, which carries EndpointSliceExports, and
re-reads the one slice an event names; a hub without that feed is told apart (it answers
the watch with a plain list), and `--watch` then says so and exits 1 after the list (a
warning and 0 when the ask came from `MCSYNC_WATCH`, which is meant for every list at
once)."""

from __future__ import annotations

import argparse
from collections.abc import Hashable, Sequence
from datetime import datetime

from cli import columns, render
from cli.client import HubError, NoWatch
from cli.cmd.spec import Spec
from cli.columns import Column
from cli.commands import CommandError, Context, WatchPrinter, print_list, watch
from cli.watch import View, same_version
from shared.models import EndpointSliceExport, EndpointSliceExportList, WatchEvent


def _addresses(item: EndpointSliceExport) -> str:
    return render.names([a for e in item.spec.endpoints for a in e.addresses])


COLUMNS: tuple[Column[EndpointSliceExport], ...] = (
    Column("NAMESPACE", lambda s, now: render.or_none(s.metadata.namespace)),
    Column("SERVICE", lambda s, now: s.spec.service_name),
    Column("CLUSTER", lambda s, now: render.or_none(s.spec.cluster_id)),
    Column("SLICE", lambda s, now: s.metadata.name),
    Column("ADDRESSTYPE", lambda s, now: s.spec.address_type),
    Column("ENDPOINTS", lambda s, now: render.endpoint_counts(s)),
    Column("PORTS", lambda s, now: render.endpoint_ports(s.spec.ports)),
    Column("AGE", lambda s, now: render.age(s.metadata.creation_timestamp, now=now)),
    Column("ADDRESSES", lambda s, now: _addresses(s), wide=True),
    Column("RESOURCE-VERSION",
           lambda s, now: render.or_none(s.metadata.resource_version), wide=True),
)
HEADERS = columns.headers(COLUMNS)


def table(
    items: Sequence[EndpointSliceExport], *, now: datetime, wide: bool = False
) -> render.Table:
    return columns.table(COLUMNS, items, now=now, wide=wide)


def shape(ctx: Context) -> columns.Shape[EndpointSliceExport]:
    return columns.shape(COLUMNS, now=ctx.now, wide=ctx.options.wide)


def flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "ref", nargs="?", metavar="[NS/]NAME", help="only the slices of this Service"
    )


def _slice_key(item: EndpointSliceExport) -> Hashable:
    return item.spec.cluster_id or "", item.metadata.namespace or "", item.metadata.name


def run(ctx: Context) -> int:
    opts = ctx.options
    listing = ctx.client.list_endpoint_slices(
        namespace=opts.namespace, service=opts.name, cluster=opts.cluster,
        page_size=opts.page_size,
    )
    if opts.watch:
        return _watch(ctx, listing)
    return print_list(ctx, listing, listing.items,
                      lambda: table(listing.items, now=ctx.now(), wide=opts.wide))


def _watch(ctx: Context, listing: EndpointSliceExportList) -> int:
    """Follow the import feed, which carries every cluster's slices (any cluster's feed
    will do: `--cluster`'s, else the first registered cluster's). A feed event's slice has
    its ports cut to what the import serves, so the slice is read again as its source sent
    it — one request per change — and shown as `mcsync endpoints` lists it. The feed
    leaves out the slices of a cluster that serves none of the import's ports (a losing
    cluster in a PortConflict, docs/reference.md#conflicts): their changes show only after
    a relist."""
    opts = ctx.options

    def matches(item: EndpointSliceExport) -> bool:
        return (
            (opts.namespace is None or item.metadata.namespace == opts.namespace)
            and (opts.name is None or item.spec.service_name == opts.name)
            and (opts.cluster is None or item.spec.cluster_id == opts.cluster)
        )

    view: View[EndpointSliceExport] = View(_slice_key, matches=matches, same=same_version)

    def on_event(event: WatchEvent, printer: WatchPrinter[EndpointSliceExport]) -> None:
        item = event.object
        if event.type == "BOOKMARK" or not isinstance(item, EndpointSliceExport):
            return
        if not matches(item):
            return
        key = _slice_key(item)
        if event.type == "DELETED" or item.spec.cluster_id is None:
            printer.emit(view.remove(key))
            return
        try:
            fresh = ctx.client.get_endpoint_slice(
                item.spec.cluster_id, item.metadata.namespace or "", item.metadata.name
            )
        except HubError as exc:
            if exc.code != 404:
                raise
            printer.emit(view.remove(key))  # withdrawn since the event
            return
        printer.emit(view.apply("MODIFIED", fresh))

    def relist() -> tuple[Sequence[EndpointSliceExport], str | None]:
        fresh = ctx.client.list_endpoint_slices(
            namespace=opts.namespace, service=opts.name, cluster=opts.cluster,
            page_size=opts.page_size,
        )
        return fresh.items, fresh.metadata.resource_version

    feed = opts.cluster or next(
        (c.metadata.name for c in ctx.client.list_clusters().items), None
    )
    if feed is None:
        print_list(ctx, listing, listing.items,
                   lambda: table(listing.items, now=ctx.now(), wide=opts.wide))
        return _cannot_watch(ctx, "no cluster is registered, so there is no import feed")
    try:
        return watch(
            ctx, view=view, listing=listing.items, shape=shape(ctx),
            resource_version=listing.metadata.resource_version, on_event=on_event,
            relist=relist,
            stream=lambda revision: ctx.client.watch_imports(feed, resource_version=revision),
        )
    except NoWatch as exc:
        return _cannot_watch(ctx, exc.message)


def _cannot_watch(ctx: Context, reason: str) -> int:
    """The list is printed; say why no changes will follow. An explicit --watch fails
    (exit 1); a session-wide MCSYNC_WATCH must not turn a listing into a failure."""
    why = f"EndpointSlice changes reach clients only through the import feed, and {reason}"
    if ctx.options.watch_from_env:
        ctx.err.write(f"warning: MCSYNC_WATCH ignored: endpoints cannot watch: {why}\n")
        return 0
    ctx.out.flush()
    raise CommandError(f"endpoints --watch is not supported: {why}")


# --- get and version --------------------------------------------------------------------


COMMAND = Spec(
    "endpoints",
    "list exported EndpointSlices: ready/total endpoints per slice",
    run,
    flags=flags,
    settings=("namespace", "cluster"),
    watches=True,
)
