"""Which function runs which `mcsync` command: each command's module says (`cli.cmd`), and
this is the one place `__main__` asks."""

from __future__ import annotations

from cli.cmd import BY_NAME
from cli.commands import Context


def run(ctx: Context) -> int:
    """Run the command `ctx.options` names; its exit code (HubError propagates)."""
    return BY_NAME[ctx.options.command].run(ctx)
