"""`mcsync completion SHELL`: a completion script for bash, zsh or fish."""

from __future__ import annotations

import argparse

from cli.cmd.spec import Spec
from cli.commands import Context
from cli.options import SHELLS


def flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")


def run(ctx: Context) -> int:
    # Imported here: the script is read off the parser, which is built from these modules.
    from cli.completion import script

    assert ctx.options.shell is not None
    ctx.out.write(script(ctx.options.shell))
    return 0


COMMAND = Spec(
    "completion",
    "print a shell completion script: source <(mcsync completion bash)",
    run,
    flags=flags,
    offline=True,
)
