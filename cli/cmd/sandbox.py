"""`mcsync sandbox` and `sandbox stop-agent|start-agent NAME`: a fleet on this machine.

The launcher is imported only when asked: it needs the hub's and the agent's extras,
which `pip install mcsync` (the CLI alone) does not bring.
"""

from __future__ import annotations

import argparse

from cli.cmd.spec import Spec
from cli.commands import Context


def run(ctx: Context) -> int:
    from sandbox import launcher

    return launcher.run(hub_port=ctx.options.hub_port, out=ctx.out, err=ctx.err)


def run_agent(ctx: Context) -> int:
    """Asks the running sandbox (the launcher's control socket); needs nothing beyond the
    CLI."""
    from sandbox import launcher

    assert ctx.options.name is not None
    verb = ctx.options.command.removeprefix("sandbox ")
    return launcher.control(verb, ctx.options.name, out=ctx.out, err=ctx.err)


def agent_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the cluster: east, north or west")


SANDBOX = Spec(
    "sandbox",
    "run a fleet on this machine to try mcsync without Kubernetes: a hub, three emulated "
    "clusters and their agents, until Ctrl-C (needs mcsync[hub,agent])",
    run,
    settings=("hub_port",),
    offline=True,
)
AGENTS = tuple(
    Spec(
        f"sandbox {verb}-agent",
        f"{what} the sandbox running in another terminal, without ending it "
        "(a stopped agent's cluster turns Stale and its importers fail over; "
        "docs/reference.md#sandbox)",
        run_agent,
        flags=agent_flags,
        offline=True,
    )
    for verb, what in (("stop", "stop one agent of"), ("start", "start again one agent of"))
)
COMMANDS = (SANDBOX, *AGENTS)
