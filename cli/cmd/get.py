"""`mcsync get KIND REF` (`describe` is the same command): one object's detail page, or
with -o its object, or with `-o wide` its row of the list's table. `get <plural>` lists,
as the list commands do (`cli.args` rewrites it). The conflict page and the import's page
(which says where it is imported) are modules of their own."""

from __future__ import annotations

from typing import Any

from cli import conflictpage, importpage, render
from cli.cmd import clusters, exports, imports
from cli.cmd.spec import Spec, Toolkit
from cli.commands import Context, print_object, print_table
from cli.options import Kind
from cli.values import argtype, parse_cluster
from shared import settingscli
from shared.models import InternalServiceExport, ServiceImport

HELP = ("show one export, import or cluster in detail (`get exports` and the other plurals "
        "list, as the list commands do; `describe` is the same as `get`)")

# Each kind: its REF, the settings that may give the REF's leading parts, help, description.
KINDS: tuple[tuple[Kind, str, tuple[str, ...], str, str], ...] = (
    (
        "export",
        "CLUSTER/NAMESPACE/NAME",
        ("namespace", "cluster"),
        "CLUSTER/NAMESPACE/NAME, or NAME with --cluster and -n",
        "show one cluster's export of a service",
    ),
    (
        "import",
        "NAMESPACE/NAME",
        ("namespace",),
        "NAMESPACE/NAME, or NAME with -n",
        "show the ServiceImport of a service",
    ),
    ("cluster", "NAME", (), "NAME", "show one member cluster in detail"),
    (
        "conflict",
        "NAMESPACE/NAME",
        ("namespace",),
        "NAMESPACE/NAME, or NAME with -n",
        "show a service's conflict: each cluster's value of every disputed property, "
        "and what to change",
    ),
)


def parser(commands: Any, kit: Toolkit) -> None:
    get = commands.add_parser("get", help=HELP,
                              description="show one export, import or cluster in detail")
    kinds = get.add_subparsers(dest="kind", metavar="KIND", parser_class=settingscli.OneLineParser)
    kinds.required = True
    for kind, ref, fields, help_text, description in KINDS:
        sub = kinds.add_parser(kind, help=help_text, description=description)
        sub.add_argument(
            "ref", metavar=ref, type=argtype(parse_cluster) if kind == "cluster" else str
        )
        kit.settings(sub, *fields)
        kit.globals(sub)
    kit.globals(get)


def run(ctx: Context) -> int:
    opts = ctx.options
    if opts.kind == "conflict":
        return conflictpage.describe(ctx)
    if opts.kind == "import" and opts.output != "wide":
        return importpage.describe(ctx)
    if opts.kind == "cluster":
        assert opts.name is not None
        one = ctx.client.get_cluster(opts.name)
        if print_object(ctx, one):
            return 0
        if opts.output == "wide":
            print_table(ctx, clusters.table([one], now=ctx.now(), wide=True))
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
    if isinstance(obj, InternalServiceExport):
        if opts.output == "wide":
            print_table(ctx, exports.table([obj], now=ctx.now(), wide=True))
        else:
            ctx.out.write(render.describe_export(obj, now=ctx.now()))
    elif opts.output == "wide":
        fleet = imports.fleet_for(ctx, [obj], service=opts.name)
        print_table(ctx, imports.table([obj], now=ctx.now(), wide=True, fleet=fleet))
    else:
        ctx.out.write(render.describe_import(obj, now=ctx.now()))
    return 0


COMMAND = Spec("get", HELP, run, settings=("namespace", "cluster"), parser=parser)
