"""`mcsync config ACTION`: the config file's contexts (`get-contexts`, `current-context`,
`use-context`, `set-context`), as kubectl's; it runs in `cli.contexts`."""

from __future__ import annotations

from typing import Any

from cli import contexts
from cli.cmd.spec import Spec, Toolkit
from cli.values import argtype, parse_text
from shared import settingscli

HELP = "contexts of the config file: get-contexts, use-context, …"
# What a context of the config file may set (`config set-context` writes these).
CONTEXT_FIELDS = ("hub_url", "token_file", "certificate_authority", "insecure_skip_tls_verify")
# `set-context`'s own flags land apart from the global flags of the same names.
CONTEXT_DEST = "ctx:"


def parser(commands: Any, kit: Toolkit) -> None:
    config = commands.add_parser(
        "config",
        help=HELP,
        description="read and change the config file's contexts (~/.config/mcsync/config)",
        prog="mcsync config",
    )
    kit.globals(config)
    actions = config.add_subparsers(
        dest="config_action", metavar="ACTION", parser_class=settingscli.OneLineParser
    )
    actions.required = True
    for name, help_text in (
        ("get-contexts", "list the contexts; * marks the current one"),
        ("current-context", "print the current context's name"),
    ):
        kit.globals(actions.add_parser(name, help=help_text, description=help_text))
    use = actions.add_parser(
        "use-context",
        help="make NAME the current context",
        description="make NAME the current context",
    )
    use.add_argument("context_name", metavar="NAME", type=argtype(parse_text))
    kit.globals(use)
    set_context = actions.add_parser(
        "set-context",
        help="create or change the context NAME",
        description="create or change the context NAME (only the settings given change)",
    )
    set_context.add_argument("context_name", metavar="NAME", type=argtype(parse_text))
    kit.settings(set_context, *CONTEXT_FIELDS, dest_prefix=CONTEXT_DEST)
    kit.globals(set_context, exclude=frozenset(CONTEXT_FIELDS))


COMMAND = Spec("config", HELP, contexts.config, parser=parser, offline=True)
