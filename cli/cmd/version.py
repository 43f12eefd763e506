"""`mcsync version [--client]`: this client's version and the hub's."""

from __future__ import annotations

import argparse

from cli import render
from cli.cmd.spec import Spec
from cli.commands import Context, print_object


def flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--client",
        dest="client_only",
        action="store_true",
        help="only the client's version; no request",
    )


def run(ctx: Context) -> int:
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


COMMAND = Spec("version", "show the versions of this client and of the hub", run, flags=flags)
