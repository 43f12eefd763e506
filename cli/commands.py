"""What every `mcsync` command shares: its `Context`, the output formats of one object
and of a list, and the watch loop every list follows. The commands themselves are modules
of `cli.cmd`, each with its flags, its columns and its run function.

Each command makes a fixed, small number of requests whatever the size of the fleet
and writes to the streams it is given, so the end-to-end tests read exactly what an
operator sees. An empty result is not an error: `No resources found.` goes to stderr
(stdout stays clean for pipes) and the exit code is 0, as with `kubectl get`. JSON and
YAML print the hub's objects, a list for a list command, so they parse back into
`shared.models`; `-o name` prints the refs `get` takes, `-o jsonpath=…` applies the
template to the hub's objects.

Every list watches (`--watch`). The hub has one change feed, that of the exports, and
every listed object is either an export or moved by one, so each watch follows that feed
(`cli.watch.follow`) unless it names another (`endpoints` follows the import feed); each
list module says what it does with an event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TextIO, TypeVar, get_args

from pydantic import BaseModel

from cli import render
from cli.client import HubClient
from cli.columns import Shape
from cli.options import Options
from cli.watch import View, ViewEventType, follow
from shared.models import InternalServiceExport, WatchEvent
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


def print_list(
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
class WatchPrinter(Generic[T]):
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


def watch(
    ctx: Context,
    *,
    view: View[T],
    listing: Sequence[T],
    shape: Shape[T],
    resource_version: str | None,
    on_event: Callable[[WatchEvent, WatchPrinter[T]], None],
    relist: Callable[[], tuple[Sequence[T], str | None]],
    stream: Callable[[str | None], Iterable[WatchEvent]] | None = None,
) -> int:
    """Print the list, then follow a feed (the export feed unless `stream` says another)
    until Ctrl-C (see the module doc)."""
    printer: WatchPrinter[T] = WatchPrinter(ctx, shape)
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


def changed_export(event: WatchEvent) -> InternalServiceExport | None:
    if event.type == "BOOKMARK" or not isinstance(event.object, InternalServiceExport):
        return None
    return event.object


def print_table(ctx: Context, table: render.Table) -> None:
    """One table without the empty-list message (`get … -o wide`: one object's row)."""
    ctx.out.write(render.format_table(table, headers=not ctx.options.no_headers))
