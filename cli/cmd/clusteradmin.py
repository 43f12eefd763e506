"""The admin's words about one member cluster — `clusters register`, `set-scope`,
`deregister`, `allow-withdrawal`, `rotate-token` — and their flags; each runs in
`cli.admin`, which holds what they share (the admin token's errors, the token file)."""

from __future__ import annotations

import argparse

from cli import admin
from cli.cmd.spec import Spec
from cli.values import argtype, parse_cluster, parse_label, parse_namespace_pattern, parse_text

# The member token's file: these commands' own --token-file, the global one (the admin's
# token) being taken only before `clusters`.
OWN_TOKEN_FILE = frozenset({"token_file"})


def _name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", type=argtype(parse_cluster))


def _member_token_file(parser: argparse.ArgumentParser, *, what: str) -> None:
    parser.add_argument(
        "--token-file",
        dest="member_token_file",
        required=True,
        type=argtype(parse_text),
        metavar="PATH",
        help=f"where to write {what} (mode 0600); the admin token comes from "
        "--token, MCSYNC_TOKEN(_FILE), the context, or a --token-file given before `clusters`",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the token file if it exists"
    )


def _scope(parser: argparse.ArgumentParser, *, verb: str) -> None:
    parser.add_argument(
        "--export-namespace",
        dest="export_namespaces",
        action="append",
        type=argtype(parse_namespace_pattern),
        default=None,
        metavar="NS",
        help=f"a namespace (or '*' glob) it {verb} export from (repeatable; default: all)",
    )
    parser.add_argument(
        "--import-namespace",
        dest="import_namespaces",
        action="append",
        type=argtype(parse_namespace_pattern),
        default=None,
        metavar="NS",
        help=f"a namespace (or '*' glob) it {verb} import (repeatable; default: all)",
    )


def register_flags(parser: argparse.ArgumentParser) -> None:
    _name(parser)
    parser.add_argument(
        "--label",
        dest="labels",
        action="append",
        type=argtype(parse_label),
        default=[],
        metavar="KEY=VALUE",
        help="a label of the cluster (repeatable)",
    )
    _member_token_file(parser, what="the member token")
    _scope(parser, verb="may")


def set_scope_flags(parser: argparse.ArgumentParser) -> None:
    _name(parser)
    _scope(parser, verb="may from now on")
    parser.add_argument(
        "--all-export-namespaces",
        action="store_true",
        help="let it export from every namespace the hub does not deny",
    )
    parser.add_argument(
        "--all-import-namespaces", action="store_true", help="let it import every namespace"
    )


def deregister_flags(parser: argparse.ArgumentParser) -> None:
    _name(parser)
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def rotate_token_flags(parser: argparse.ArgumentParser) -> None:
    _name(parser)
    _member_token_file(parser, what="the new member token")


REGISTER = Spec(
    "clusters register",
    "register a member cluster and write its token to a new file (admin token needed)",
    admin.register,
    flags=register_flags,
    exclude_globals=OWN_TOKEN_FILE,
)
SET_SCOPE = Spec(
    "clusters set-scope",
    "change the namespaces a member cluster may export from and imports "
    "(docs/reference.md#scope-and-limits; admin token needed); what is not given is kept",
    admin.set_scope,
    flags=set_scope_flags,
)
DEREGISTER = Spec(
    "clusters deregister",
    "deregister a member cluster, withdrawing all its exports (admin token needed)",
    admin.deregister,
    flags=deregister_flags,
)
ALLOW_WITHDRAWAL = Spec(
    "clusters allow-withdrawal",
    "let a cluster's next held mass withdrawal of exports through, once "
    "(docs/reference.md#failover; admin token needed)",
    admin.allow_withdrawal,
    flags=_name,
)
ROTATE_TOKEN = Spec(
    "clusters rotate-token",
    "issue a new member token and write it to a new file; the old one keeps working "
    "until the agent uses the new one or the hub's --token-grace-seconds pass "
    "(docs/reference.md#credentials; admin token needed)",
    admin.rotate_token,
    flags=rotate_token_flags,
    exclude_globals=OWN_TOKEN_FILE,
)
COMMANDS = (REGISTER, SET_SCOPE, DEREGISTER, ALLOW_WITHDRAWAL, ROTATE_TOKEN)
