"""One function per `mcsync` read command: fetch through `HubClient`, print through `render`.

Each command makes a fixed, small number of requests whatever the size of the fleet
(`conflicts` is two listings joined in memory, never one request per service) and writes
to the streams it is given, so the end-to-end tests read exactly what an operator sees.
An empty result is not an error: `No resources found.` goes to stderr (stdout stays
clean for pipes) and the exit code is 0, as with `kubectl get`. JSON and YAML print the
hub's objects, a list for a list command, so they parse back into `shared.models`;
`-o name` prints the refs `get` takes, `-o jsonpath=…` applies the template to the hub's
objects.

Every list watches (`--watch`). The hub has one change feed, that of the exports, and
every listed object is either an export or moved by one, so each watch follows that feed
(`cli.watch.follow`):

* `exports` shows the feed's objects, filtered (`ExportView`);
* `imports` and `conflicts` re-read the one ServiceImport whose key an export event
  names — one request per change, whatever the size of the fleet;
* `clusters` re-lists the clusters (a handful of objects) when an export changes and at
  each BOOKMARK, since heartbeats and the Ready/Stale state have no feed of their own;
* `endpoints` follows the hub's import feed instead, which carries EndpointSliceExports,
  and re-reads the one slice an event names; a hub without that feed is told apart (it
  answers the watch with a plain list), and `--watch` then says so and exits 1 after the
  list (a warning and 0 when the ask came from `MCSYNC_WATCH`, which is meant for every
  list at once).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TextIO, TypeVar, get_args

from pydantic import BaseModel

from cli import render
from cli.args import Options
from cli.client import HubClient, HubError, NoWatch
from cli.watch import ExportFilter, ExportView, View, ViewEventType, follow, same_version
from shared.constants import INVALID_EXPORTS_MAX
from shared.models import (
    EndpointSliceExport,
    EndpointSliceExportList,
    InternalServiceExport,
    InternalServiceExportList,
    MemberCluster,
    MemberClusterList,
    ServiceImport,
    ServiceImportList,
    WatchEvent,
)
from shared.timefmt import utcnow

T = TypeVar("T", bound=BaseModel)


class CommandError(Exception):
    """The command could not do what was asked, for a reason that is not the hub's
    (exit code 1, `error:` and this message on stderr)."""


@dataclass(frozen=True)
class Context:
    """What every command needs: the parsed options, the hub, the streams, the clock."""

    options: Options
    client: HubClient
    out: TextIO
    err: TextIO
    now: Callable[[], datetime] = utcnow
    stdin: TextIO | None = None
    monotonic: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class Shape(Generic[T]):
    """How one kind of object is shown as a table row."""

    headers: render.Cells
    row: Callable[[T], render.Cells]


def _shape_of(ctx: Context, kind: str) -> Shape[Any]:
    wide, now = ctx.options.wide, ctx.now
    if kind == "clusters":
        return Shape(render.CLUSTER_HEADERS + (render.CLUSTER_WIDE_HEADERS if wide else ()),
                     lambda c: render.cluster_row(c, now=now(), wide=wide))
    if kind == "exports":
        return Shape(render.export_headers(wide=wide),
                     lambda e: render.export_row(e, now=now(), wide=wide))
    if kind == "imports":
        return Shape(render.IMPORT_HEADERS + (render.IMPORT_WIDE_HEADERS if wide else ()),
                     lambda i: render.import_row(i, now=now(), wide=wide))
    return Shape(render.endpoint_headers(wide=wide),
                 lambda s: render.endpoint_row(s, now=now(), wide=wide))


def print_object(ctx: Context, obj: BaseModel) -> bool:
    """Print one object if -o asks for json, yaml, jsonpath or name; False for the other
    formats (tables are the caller's)."""
    opts = ctx.options
    if opts.output == "name":
        ctx.out.write(render.name_of(obj) + "\n")
    elif opts.output == "json":
        ctx.out.write(render.to_json(obj))
    elif opts.output == "yaml":
        ctx.out.write(render.to_yaml(obj))
    elif opts.output == "jsonpath":
        assert opts.jsonpath is not None
        try:
            ctx.out.write(render.to_jsonpath(opts.jsonpath, obj))
        except LookupError as exc:
            raise CommandError(f"-o jsonpath: {exc.args[0]}") from None
    else:
        return False
    return True


def _print_list(
    ctx: Context, listing: BaseModel, items: Sequence[BaseModel],
    table: Callable[[], render.Table],
) -> int:
    """Print a listing as -o asks; for tables, `table()` builds the rows."""
    if ctx.options.output == "name":
        if not items:
            ctx.err.write(render.EMPTY_MESSAGE + "\n")
        ctx.out.write("".join(render.name_of(item) + "\n" for item in items))
        return 0
    if print_object(ctx, listing):
        return 0
    out, err = render.listing_output(table(), headers=not ctx.options.no_headers)
    ctx.out.write(out)
    ctx.err.write(err)
    return 0


# --- watching ---------------------------------------------------------------------------


@dataclass
class _WatchPrinter(Generic[T]):
    """Prints the initial list and then each change, in the chosen output format.

    Tables get an EVENT column, as wide as the longest event type from the start (a first
    batch of ADDED rows must not leave a later DELETED pushing its row out of line); the
    other widths come from the first batch printed, so later rows line up unless a cell is
    longer than anything seen before (it then pushes the rest of its line, as kubectl's
    watch output does). JSON is one `{"type", "object"}` event per line; YAML one event
    document per change; `name` one ref per change; jsonpath the template per object.
    """

    ctx: Context
    shape: Shape[T]
    widths: tuple[int, ...] | None = field(default=None)

    def batch(self, events: Sequence[tuple[ViewEventType, T]]) -> None:
        opts = self.ctx.options
        out = self.ctx.out
        if opts.output == "json":
            for event_type, obj in events:
                out.write(render.event_json_line(event_type, obj))
        elif opts.output == "yaml":
            for event_type, obj in events:
                out.write(render.event_yaml(event_type, obj))
        elif opts.output == "name":
            for _, obj in events:
                out.write(render.name_of(obj) + "\n")
        elif opts.output == "jsonpath":
            for _, obj in events:
                print_object(self.ctx, obj)
        elif events:
            headers = ("EVENT", *self.shape.headers)
            rows = tuple((t, *self.shape.row(o)) for t, o in events)
            if self.widths is None:
                event_width, *rest = render.Table(headers, rows).widths()
                self.widths = (max(event_width, *map(len, get_args(ViewEventType))), *rest)
                if not opts.no_headers:
                    out.write(render.format_row(headers, self.widths) + "\n")
            for row in rows:
                out.write(render.format_row(row, self.widths) + "\n")
        out.flush()

    def emit(self, change: tuple[ViewEventType, T] | None) -> None:
        if change is not None:
            self.batch([change])


def _watch(
    ctx: Context,
    *,
    view: View[T],
    listing: Sequence[T],
    shape: Shape[T],
    resource_version: str | None,
    on_event: Callable[[WatchEvent, _WatchPrinter[T]], None],
    relist: Callable[[], tuple[Sequence[T], str | None]],
    stream: Callable[[str | None], Iterable[WatchEvent]] | None = None,
) -> int:
    """Print the list, then follow a feed (the export feed unless `stream` says another)
    until Ctrl-C (see the module doc)."""
    printer: _WatchPrinter[T] = _WatchPrinter(ctx, shape)
    initial = view.replace(listing)
    if initial:
        printer.batch(initial)
    else:
        ctx.err.write(render.EMPTY_MESSAGE + " Watching for changes.\n")
        ctx.err.flush()

    def resync() -> str | None:
        items, revision = relist()
        printer.batch(view.replace(items))
        return revision

    def warn(message: str) -> None:
        ctx.err.write(message + "\n")
        ctx.err.flush()

    follow(
        stream or (lambda revision: ctx.client.watch_exports(resource_version=revision)),
        resource_version=resource_version,
        on_event=lambda event: on_event(event, printer),
        resync=resync,
        warn=warn,
    )
    return 0


def _changed_export(event: WatchEvent) -> InternalServiceExport | None:
    if event.type == "BOOKMARK" or not isinstance(event.object, InternalServiceExport):
        return None
    return event.object


# --- clusters ---------------------------------------------------------------------------


def _select_clusters(ctx: Context, items: Sequence[MemberCluster]) -> list[MemberCluster]:
    opts = ctx.options
    return [
        c for c in items
        if (opts.selector is None or opts.selector.matches(c.metadata.labels))
        and (opts.name is None or c.metadata.name == opts.name)
    ]


def _same_cluster(old: MemberCluster, new: MemberCluster) -> bool:
    """A heartbeat alone is no change worth a line; state, counts, labels and version are."""
    def facts(c: MemberCluster) -> object:
        return c.model_dump(exclude={"status": {"last_heartbeat_time"}})

    return facts(old) == facts(new)


def clusters(ctx: Context) -> int:
    opts = ctx.options
    if opts.name is not None and not opts.watch:
        one = ctx.client.get_cluster(opts.name)
        if opts.output in ("json", "yaml", "jsonpath") and opts.selector is None:
            print_object(ctx, one)
            return 0
        listing = MemberClusterList(items=_select_clusters(ctx, [one]))
    else:
        position = ctx.client.feed_position() if opts.watch else None
        everything = ctx.client.list_clusters()
        listing = MemberClusterList(
            metadata=everything.metadata, items=_select_clusters(ctx, everything.items)
        )
        if opts.watch:
            return _watch_clusters(ctx, listing.items, position)
    shape = _shape_of(ctx, "clusters")
    return _print_list(
        ctx, listing, listing.items, lambda: render.Table(
            shape.headers, tuple(shape.row(c) for c in listing.items))
    )


CLUSTERS_RELIST_SECONDS = 1.0


def _watch_clusters(
    ctx: Context, items: Sequence[MemberCluster], position: str | None
) -> int:
    view: View[MemberCluster] = View(
        lambda c: c.metadata.name, matches=lambda c: bool(_select_clusters(ctx, [c])),
        same=_same_cluster,
    )

    last_listed = float("-inf")  # the first export change lists at once

    def on_event(event: WatchEvent, printer: _WatchPrinter[MemberCluster]) -> None:
        # An export's change moves its cluster's counts; a BOOKMARK is the moment to see
        # heartbeats and Ready/Stale, which have no feed. A burst of export changes costs
        # one listing per CLUSTERS_RELIST_SECONDS; the rest wait for the next event or
        # BOOKMARK (the hub sends one within seconds once the burst ends).
        nonlocal last_listed
        if event.type != "BOOKMARK":
            if _changed_export(event) is None:
                return
            if ctx.monotonic() - last_listed < CLUSTERS_RELIST_SECONDS:
                return
        last_listed = ctx.monotonic()
        printer.batch(view.replace(ctx.client.list_clusters().items))

    def relist() -> tuple[Sequence[MemberCluster], str | None]:
        revision = ctx.client.feed_position()
        return ctx.client.list_clusters().items, revision

    return _watch(ctx, view=view, listing=items, shape=_shape_of(ctx, "clusters"),
                  resource_version=position, on_event=on_event, relist=relist)


# --- exports ----------------------------------------------------------------------------


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
    if ctx.options.invalid:
        return invalid_exports(ctx)
    listing = _list_exports(ctx)
    shape = _shape_of(ctx, "exports")
    if ctx.options.watch:
        view = ExportView(_export_filter(ctx.options))

        def on_event(
            event: WatchEvent, printer: _WatchPrinter[InternalServiceExport]
        ) -> None:
            export = _changed_export(event)
            if export is not None:
                printer.emit(view.apply(event.type, export))

        def relist() -> tuple[Sequence[InternalServiceExport], str | None]:
            fresh = _list_exports(ctx)
            return fresh.items, fresh.metadata.resource_version

        return _watch(ctx, view=view, listing=listing.items, shape=shape,
                      resource_version=listing.metadata.resource_version,
                      on_event=on_event, relist=relist,
                      stream=lambda revision: ctx.client.watch_exports(
                          resource_version=revision, cluster=ctx.options.cluster))
    return _print_list(
        ctx, listing, listing.items,
        lambda: render.Table(shape.headers, tuple(shape.row(e) for e in listing.items)),
    )


def invalid_exports(ctx: Context) -> int:
    """`exports --invalid`: ServiceExports that members could not export, and why (SPEC §7).
    What each agent last reported in its heartbeat, so up to one interval old."""
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
    return _print_list(
        ctx, listing, items,
        lambda: render.Table(
            ("CLUSTER", "NAMESPACE", "NAME", "REASON", "MESSAGE"),
            tuple((i.cluster, i.namespace, i.name, i.reason, i.message) for i in items),
        ),
    )  # fmt: skip


# --- imports and conflicts --------------------------------------------------------------


def _import_key(item: ServiceImport) -> Hashable:
    return item.metadata.namespace or "", item.metadata.name


def _import_matches(opts: Options, *, conflicting_only: bool) -> Callable[[ServiceImport], bool]:
    conflict = True if conflicting_only else opts.conflict

    def matches(item: ServiceImport) -> bool:
        if opts.namespace is not None and item.metadata.namespace != opts.namespace:
            return False
        return conflict is None or bool(item.status.conflicts) == conflict

    return matches


def _follow_imports(
    ctx: Context, listing: ServiceImportList, shape: Shape[ServiceImport], *,
    conflicting_only: bool, changed: Callable[[Hashable], None] = lambda _: None,
) -> int:
    opts = ctx.options
    view: View[ServiceImport] = View(
        _import_key, matches=_import_matches(opts, conflicting_only=conflicting_only),
        same=same_version,
    )

    def on_event(event: WatchEvent, printer: _WatchPrinter[ServiceImport]) -> None:
        export = _changed_export(event)
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

    return _watch(ctx, view=view, listing=listing.items, shape=shape,
                  resource_version=listing.metadata.resource_version,
                  on_event=on_event, relist=relist)


def imports(ctx: Context) -> int:
    opts = ctx.options
    listing = ctx.client.list_imports(
        namespace=opts.namespace, conflict=opts.conflict, page_size=opts.page_size
    )
    shape = _shape_of(ctx, "imports")
    if opts.watch:
        return _follow_imports(ctx, listing, shape, conflicting_only=False)
    return _print_list(
        ctx, listing, listing.items,
        lambda: render.Table(shape.headers, tuple(shape.row(i) for i in listing.items)),
    )


class _ConflictRows:
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
        key = _import_key(item)
        if key not in self.exports:
            self.exports[key] = self.ctx.client.list_exports(
                namespace=item.metadata.namespace, name=item.metadata.name, conflict=True,
                page_size=opts.page_size,
            ).items
        views = render.conflict_views([item], self.exports[key])
        table = render.conflicts_table(views, now=self.ctx.now(), wide=opts.wide)
        if table.rows:
            return table.rows[0]
        # No longer conflicting (the row of its DELETED event): name it, nothing disputed.
        size = len(self.shape().headers)
        return (item.metadata.namespace or "", item.metadata.name,
                render.or_none(item.status.winning_cluster), *([render.NONE] * (size - 3)))

    def shape(self) -> Shape[ServiceImport]:
        wide_headers = render.CONFLICT_WIDE_HEADERS if self.ctx.options.wide else ()
        return Shape(render.CONFLICT_HEADERS + wide_headers, self.row)


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
    if opts.output in ("json", "yaml", "jsonpath", "name") and not opts.watch:
        return _print_list(ctx, listing, listing.items, lambda: render.Table((), ()))
    conflicting: list[InternalServiceExport] = []
    if listing.items:
        conflicting = ctx.client.list_exports(
            namespace=opts.namespace, conflict=True, page_size=opts.page_size
        ).items
    if opts.watch:
        rows = _ConflictRows(ctx)
        rows.prime(conflicting)
        return _follow_imports(ctx, listing, rows.shape(), conflicting_only=True,
                               changed=rows.forget)
    views = render.conflict_views(listing.items, conflicting)
    return _print_list(
        ctx, listing, listing.items,
        lambda: render.conflicts_table(views, now=ctx.now(), wide=opts.wide),
    )


# --- endpoints --------------------------------------------------------------------------


def _slice_key(item: EndpointSliceExport) -> Hashable:
    return item.spec.cluster_id or "", item.metadata.namespace or "", item.metadata.name


def endpoints(ctx: Context) -> int:
    opts = ctx.options
    listing = ctx.client.list_endpoint_slices(
        namespace=opts.namespace, service=opts.name, cluster=opts.cluster,
        page_size=opts.page_size,
    )
    shape = _shape_of(ctx, "endpoints")
    if opts.watch:
        return _watch_endpoints(ctx, listing, shape)
    return _print_list(
        ctx, listing, listing.items,
        lambda: render.Table(shape.headers, tuple(shape.row(s) for s in listing.items)),
    )


def _watch_endpoints(
    ctx: Context, listing: EndpointSliceExportList, shape: Shape[EndpointSliceExport]
) -> int:
    """Follow the import feed, which carries every cluster's slices (any cluster's feed
    will do: `--cluster`'s, else the first registered cluster's). A feed event's slice has
    its ports cut to what the import serves, so the slice is read again as its source sent
    it — one request per change — and shown as `mcsync endpoints` lists it. The feed
    leaves out the slices of a cluster that serves none of the import's ports (a losing
    cluster in a PortConflict, SPEC §2.8): their changes show only after a relist."""
    opts = ctx.options

    def matches(item: EndpointSliceExport) -> bool:
        return (
            (opts.namespace is None or item.metadata.namespace == opts.namespace)
            and (opts.name is None or item.spec.service_name == opts.name)
            and (opts.cluster is None or item.spec.cluster_id == opts.cluster)
        )

    view: View[EndpointSliceExport] = View(_slice_key, matches=matches, same=same_version)

    def on_event(event: WatchEvent, printer: _WatchPrinter[EndpointSliceExport]) -> None:
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
        _print_list(
            ctx, listing, listing.items,
            lambda: render.Table(shape.headers, tuple(shape.row(s) for s in listing.items)),
        )
        return _cannot_watch(ctx, "no cluster is registered, so there is no import feed")
    try:
        return _watch(
            ctx, view=view, listing=listing.items, shape=shape,
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


def get(ctx: Context) -> int:
    """One object's detail page (`describe` is the same command), or with -o its object."""
    opts = ctx.options
    if opts.kind == "cluster":
        assert opts.name is not None
        one = ctx.client.get_cluster(opts.name)
        if print_object(ctx, one):
            return 0
        if opts.output == "wide":
            shape = _shape_of(ctx, "clusters")
            table = render.Table(shape.headers, (shape.row(one),))
            ctx.out.write(render.format_table(table, headers=not opts.no_headers))
        else:
            ctx.out.write(render.describe_cluster(one, now=ctx.now()))
        return 0
    obj: InternalServiceExport | ServiceImport
    assert opts.namespace is not None and opts.name is not None  # args.parse_args sees to it
    if opts.kind == "export":
        assert opts.cluster is not None
        obj = ctx.client.get_export(opts.cluster, opts.namespace, opts.name)
    else:
        obj = ctx.client.get_import(opts.namespace, opts.name)
    if print_object(ctx, obj):
        return 0
    if opts.output == "wide":
        shape = _shape_of(ctx, "exports" if opts.kind == "export" else "imports")
        table = render.Table(shape.headers, (shape.row(obj),))
        ctx.out.write(render.format_table(table, headers=not opts.no_headers))
    elif isinstance(obj, InternalServiceExport):
        ctx.out.write(render.describe_export(obj, now=ctx.now()))
    else:
        ctx.out.write(render.describe_import(obj, now=ctx.now()))
    return 0


def version(ctx: Context) -> int:
    """Client and hub versions, as `kubectl version` shows both. The client's line is
    printed before the hub is asked, so it shows even when the hub is unreachable."""
    opts = ctx.options
    if opts.output in ("json", "yaml", "jsonpath"):
        info = render.VersionReport(client_version=render.CLIENT_VERSION)
        if not opts.client_only:
            info.server = ctx.client.version()
        print_object(ctx, info)
        return 0
    ctx.out.write(f"Client Version: {render.CLIENT_VERSION}\n")
    ctx.out.flush()
    if not opts.client_only:
        server = ctx.client.version()
        ctx.out.write(f"Hub Version: {server.hub_version}\n"
                      f"API Version: {server.api_version}\n"
                      f"Min Agent Version: {server.min_agent_version}\n")
    return 0
