"""Which function runs which `mcsync` command: the one table `__main__` consults.

Kept apart from `cli.commands` so that the read commands, the two admin writes
(`cli.admin`) and the config-file commands (`cli.contexts`) each stay one module, and none
of them imports another to find its neighbours.
"""

from __future__ import annotations

from collections.abc import Callable

from cli import admin, commands, conflictpage, contexts, importpage, status
from cli.commands import Context
from cli.completion import script


def sandbox(ctx: Context) -> int:
    """`mcsync sandbox`, imported only when asked: it needs the hub's and the agent's
    extras, which `pip install mcsync` (the CLI alone) does not bring."""
    from sandbox import launcher

    return launcher.run(hub_port=ctx.options.hub_port, out=ctx.out, err=ctx.err)


def sandbox_agent(ctx: Context) -> int:
    """`mcsync sandbox stop-agent|start-agent NAME`: asks the running sandbox (the
    launcher's control socket); needs nothing beyond the CLI."""
    from sandbox import launcher

    assert ctx.options.name is not None
    verb = ctx.options.command.removeprefix("sandbox ")
    return launcher.control(verb, ctx.options.name, out=ctx.out, err=ctx.err)


def get(ctx: Context) -> int:
    """`get`/`describe`: the conflict page and the import's page (which says where it is
    imported) are modules of their own; the rest is `commands.get`'s."""
    if ctx.options.kind == "conflict":
        return conflictpage.describe(ctx)
    if ctx.options.kind == "import" and ctx.options.output != "wide":
        return importpage.describe(ctx)
    return commands.get(ctx)


def completion(ctx: Context) -> int:
    assert ctx.options.shell is not None
    ctx.out.write(script(ctx.options.shell))
    return 0


COMMANDS: dict[str, Callable[[Context], int]] = {
    "clusters": commands.clusters,
    "clusters register": admin.register,
    "clusters deregister": admin.deregister,
    "clusters allow-withdrawal": admin.allow_withdrawal,
    "clusters set-scope": admin.set_scope,
    "clusters rotate-token": admin.rotate_token,
    "exports": commands.exports,
    "imports": commands.imports,
    "endpoints": commands.endpoints,
    "conflicts": commands.conflicts,
    "get": get,
    "version": commands.version,
    "config": contexts.config,
    "completion": completion,
    "sandbox": sandbox,
    "sandbox stop-agent": sandbox_agent,
    "sandbox start-agent": sandbox_agent,
    "status": status.status,
}


def run(ctx: Context) -> int:
    """Run the command `ctx.options` names; its exit code (HubError propagates)."""
    return COMMANDS[ctx.options.command](ctx)
