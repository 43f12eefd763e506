"""`mcsync clusters [NAME]`: the member clusters, their state and counts; `--watch`
re-lists them (a handful of objects) when an export changes and at each BOOKMARK, since
heartbeats and the Ready/Stale state have no feed of their own."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import datetime

from cli import columns, render
from cli.cmd.spec import Spec
from cli.columns import Column
from cli.commands import Context, WatchPrinter, changed_export, print_list, print_object, watch
from cli.watch import View
from shared.constants import CONDITION_WITHDRAWAL_HELD
from shared.models import MemberCluster, MemberClusterList, MemberClusterStatus, WatchEvent


def imports_cell(status: MemberClusterStatus) -> str:
    """What the cluster imports, as its agent's heartbeat said: `12/340`, ServiceImports /
    mirrored endpoints, as the header `IMPORTED-SVC/EP` says (a bare `IMPORTS 12/340` read
    as "12 of 340"); one word, so the table splits on white space as kubectl's do;
    `<none>` for an agent that does not import (or has not said)."""
    if status.imported_services is None:
        return "<none>"
    return f"{status.imported_services}/{status.imported_endpoints or 0}"


def state_cell(status: MemberClusterStatus) -> str:
    """The state, qualified as `kubectl get nodes` does (`Ready,SchedulingDisabled`) by what
    failover does about it (docs/reference.md#failover): `Stale,EndpointsWithdrawn` while
    the fleet sends the cluster no traffic, `…,WithdrawalHeld` while its agent (or the hub)
    holds a mass withdrawal, and `…,WithdrawalAllowed` while an admin's allowance for it is
    armed."""
    parts: list[str] = [status.state]
    if status.endpoints_withdrawn:
        parts.append("EndpointsWithdrawn")
    if any(c.type == CONDITION_WITHDRAWAL_HELD and c.status == "True" for c in status.conditions):
        parts.append(CONDITION_WITHDRAWAL_HELD)
    if status.withdrawal_allowed:
        parts.append("WithdrawalAllowed")
    return ",".join(parts)


COLUMNS: tuple[Column[MemberCluster], ...] = (
    Column("NAME", lambda c, now: c.metadata.name),
    Column("STATE", lambda c, now: state_cell(c.status)),
    Column("LAST-HEARTBEAT", lambda c, now: render.age(c.status.last_heartbeat_time, now=now)),
    Column("EXPORTS", lambda c, now: str(c.status.export_count)),
    Column("CONFLICTS", lambda c, now: str(c.status.conflict_count)),
    Column("IMPORTED-SVC/EP", lambda c, now: imports_cell(c.status)),
    Column("AGE", lambda c, now: render.age(c.metadata.creation_timestamp, now=now)),
    Column("AGENT-VERSION", lambda c, now: render.or_none(c.status.agent_version), wide=True),
    Column("LABELS", lambda c, now: render.labels(c.metadata.labels), wide=True),
)
HEADERS = columns.headers(COLUMNS)


def table(items: Sequence[MemberCluster], *, now: datetime, wide: bool = False) -> render.Table:
    return columns.table(COLUMNS, items, now=now, wide=wide)


def shape(ctx: Context) -> columns.Shape[MemberCluster]:
    return columns.shape(COLUMNS, now=ctx.now, wide=ctx.options.wide)


def flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", metavar="NAME", help="only this cluster")


def _select(ctx: Context, items: Sequence[MemberCluster]) -> list[MemberCluster]:
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


def run(ctx: Context) -> int:
    opts = ctx.options
    if opts.name is not None and not opts.watch:
        one = ctx.client.get_cluster(opts.name)
        if opts.output in ("json", "yaml", "jsonpath") and opts.selector is None:
            print_object(ctx, one)
            return 0
        listing = MemberClusterList(items=_select(ctx, [one]))
    else:
        position = ctx.client.feed_position() if opts.watch else None
        everything = ctx.client.list_clusters()
        listing = MemberClusterList(
            metadata=everything.metadata, items=_select(ctx, everything.items)
        )
        if opts.watch:
            return _watch(ctx, listing.items, position)
    return print_list(ctx, listing, listing.items,
                      lambda: table(listing.items, now=ctx.now(), wide=opts.wide))


RELIST_SECONDS = 1.0


def _watch(ctx: Context, items: Sequence[MemberCluster], position: str | None) -> int:
    view: View[MemberCluster] = View(
        lambda c: c.metadata.name, matches=lambda c: bool(_select(ctx, [c])),
        same=_same_cluster,
    )

    last_listed = float("-inf")  # the first export change lists at once

    def on_event(event: WatchEvent, printer: WatchPrinter[MemberCluster]) -> None:
        # An export's change moves its cluster's counts; a BOOKMARK is the moment to see
        # heartbeats and Ready/Stale, which have no feed. A burst of export changes costs
        # one listing per RELIST_SECONDS; the rest wait for the next event or
        # BOOKMARK (the hub sends one within seconds once the burst ends).
        nonlocal last_listed
        if event.type != "BOOKMARK":
            if changed_export(event) is None:
                return
            if ctx.monotonic() - last_listed < RELIST_SECONDS:
                return
        last_listed = ctx.monotonic()
        printer.batch(view.replace(ctx.client.list_clusters().items))

    def relist() -> tuple[Sequence[MemberCluster], str | None]:
        revision = ctx.client.feed_position()
        return ctx.client.list_clusters().items, revision

    return watch(ctx, view=view, listing=items, shape=shape(ctx),
                 resource_version=position, on_event=on_event, relist=relist)


COMMAND = Spec(
    "clusters",
    "list member clusters with state and export counts "
    "(also: clusters register, clusters deregister)",
    run,
    flags=flags,
    settings=("selector",),
    watches=True,
)
