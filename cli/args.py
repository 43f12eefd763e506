"""The command line of `mcsync`: flags, `MCSYNC_*` variables, the config file's context.

The settings are one pydantic model, `CliSettings`, read by `shared.settingscli`,
the layer `mcsync-hub` and `mcsync-agent` use too: it makes the flags and the help's list of
variables from the model, and applies the same precedence to every setting — a flag, then
its environment variable, then the current context of the config file (`cli.config`),
then the default — so `MCSYNC_TOKEN=x mcsync --token-file F clusters` uses F. A value from
any layer goes through the same check as the flag would, and a bad one stops the program
at start with one line naming the flag (and the variable or context it came from), exit
code 2 — the same as a bad flag, because it is the same mistake made in another place.
What is the CLI's own stays here: the sub-commands and their arguments, `--token` and
`--token-file` as one setting (`_token`), and which settings each command reads.

Global options (`--hub-url`, `-o`, `--watch`, …) are accepted before or after the
sub-command (`mcsync -o json exports` and `mcsync exports -o json`), as kubectl accepts
them; the sub-parsers declare them again, and a flag not given leaves no default behind,
so a value given before the sub-command is not overwritten after it. An environment variable
only applies to a command that has its flag: `MCSYNC_WATCH=true` makes every list watch
and leaves `get` or `version` alone, while `--watch` typed on a command that cannot watch
is an error.

`parse_args` answers one typed, frozen `Options`; nothing else in the CLI reads argparse
namespaces, the environment or the config file's settings.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError

from cli import jsonpath
from cli.config import Config, ConfigError, default_path, load
from cli.selector import Selector, parse_selector
from shared import settingscli
from shared.models import ObjectMeta, is_dns1035_label, is_dns1123_label
from shared.scope import pattern_error
from shared.settingscli import Flag, ProgramSettings, UsageError
from shared.version import __version__

PROG = "mcsync"
DEFAULT_HUB_URL = "http://127.0.0.1:8080"
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_PAGE_SIZE = 500
OUTPUTS = ("table", "wide", "json", "yaml", "name", "jsonpath=TEMPLATE")

Output = Literal["table", "wide", "json", "yaml", "name", "jsonpath"]
Command = Literal[
    "clusters",
    "clusters register",
    "clusters deregister",
    "clusters allow-withdrawal",
    "clusters set-scope",
    "clusters rotate-token",
    "exports",
    "imports",
    "endpoints",
    "conflicts",
    "get",
    "version",
    "config",
    "completion",
    "sandbox",
    "sandbox stop-agent",
    "sandbox start-agent",
    "status",
]
Kind = Literal["export", "import", "cluster", "conflict"]
ConfigAction = Literal["get-contexts", "current-context", "use-context", "set-context"]
Shell = Literal["bash", "zsh", "fish"]
SHELLS: tuple[Shell, ...] = ("bash", "zsh", "fish")
LIST_COMMANDS: tuple[Command, ...] = ("clusters", "exports", "imports", "endpoints", "conflicts")
# Commands that speak to no hub: neither a token nor the config file's context is read.
OFFLINE_COMMANDS: tuple[Command, ...] = (
    "config", "completion", "sandbox", "sandbox stop-agent", "sandbox start-agent"
)

T = TypeVar("T")


@dataclass(frozen=True)
class Options:
    """Everything one invocation asked for, checked."""

    command: Command
    hub_url: str = DEFAULT_HUB_URL
    token: str | None = None
    output: Output = "table"
    watch: bool = False
    watch_from_env: bool = False  # MCSYNC_WATCH, not --watch, asked for it
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    page_size: int = DEFAULT_PAGE_SIZE
    namespace: str | None = None
    cluster: str | None = None
    name: str | None = None
    conflict: bool | None = None
    kind: Kind | None = None
    jsonpath: str | None = None  # the template of -o jsonpath=…, checked
    no_headers: bool = False
    verbose: bool = False
    selector: Selector | None = None
    certificate_authority: str | None = None
    insecure_skip_tls_verify: bool = False
    # clusters register / deregister
    labels: tuple[tuple[str, str], ...] = ()
    member_token_file: str | None = None
    overwrite: bool = False
    yes: bool = False
    # clusters register / set-scope: spec.exportNamespaces / importNamespaces (SPEC §4.4);
    # None: not given (register: absent, every namespace; set-scope: kept)
    export_namespaces: tuple[str, ...] | None = None
    import_namespaces: tuple[str, ...] | None = None
    all_export_namespaces: bool = False
    all_import_namespaces: bool = False
    # exports --invalid (SPEC §7)
    invalid: bool = False
    # version, config, completion
    client_only: bool = False
    config_path: str | None = None
    context: str | None = None
    config_action: ConfigAction | None = None
    context_settings: tuple[tuple[str, str], ...] = ()
    shell: Shell | None = None
    # sandbox
    hub_port: int = 0

    @property
    def wide(self) -> bool:
        return self.output == "wide"


# --- value checks, shared by flags and environment variables ----------------------------


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def parse_output(text: str) -> str:
    """`table`, `wide`, `json`, `yaml`, `name` or `jsonpath=TEMPLATE` (template checked)."""
    value = text.strip()
    kind, sep, template = value.partition("=")
    if sep and kind.lower() == "jsonpath":
        try:
            jsonpath.parse(template)
        except ValueError as exc:
            raise ValueError(f"jsonpath: {exc}") from None
        return f"jsonpath={template}"
    if value.lower() not in OUTPUTS:
        raise ValueError(f"expected one of {', '.join(OUTPUTS)}, got {text!r}")
    return value.lower()


def parse_label(text: str) -> tuple[str, str]:
    """`key=value`, a valid Kubernetes label (qualified key, value of 63 characters)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"expected key=value, got {text!r}")
    try:
        ObjectMeta(name="x", labels={key: value})
    except ValidationError as exc:
        raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
    return key, value


def parse_namespace_pattern(text: str) -> str:
    """A namespace name or `*` glob of a cluster's scope (`shared.scope`)."""
    value = text.strip()
    problem = pattern_error(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def parse_url(text: str) -> str:
    value = text.strip().rstrip("/")
    if not value.startswith(("http://", "https://")) or len(value) <= len("https://"):
        raise ValueError(f"expected an http:// or https:// URL, got {text!r}")
    return value


def parse_positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise ValueError(f"must be more than 0, got {text!r}")
    return value


def parse_page_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= 10_000:
        raise ValueError(f"must be between 1 and 10000, got {text!r}")
    return value


def parse_port(text: str) -> int:
    """A TCP port, or 0 for any free one."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise ValueError(f"must be between 0 and 65535, got {text!r}")
    return value


def parse_text(text: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError("must not be empty")
    return value


def _dns1123_label(what: str) -> Callable[[str], str]:
    """A parser for a name that must be a DNS-1123 label; `what` names it in the error."""

    def parse(text: str) -> str:
        value = text.strip()
        if not is_dns1123_label(value):
            raise ValueError(
                f"{text!r} is not {what} (a DNS-1123 label: lowercase letters, "
                "digits and '-', at most 63 characters)"
            )
        return value

    return parse


parse_namespace = _dns1123_label("a namespace")
parse_cluster = _dns1123_label("a cluster name")


def parse_service_name(text: str) -> str:
    value = text.strip()
    if not is_dns1035_label(value):
        raise ValueError(
            f"{text!r} is not a Service name (a DNS-1035 label: lowercase "
            "letters, digits and '-', starting with a letter)"
        )
    return value


def _argtype(check: Callable[[str], T]) -> Callable[[str], T]:
    """Wrap a check for argparse, which reports ArgumentTypeError messages verbatim."""

    def convert(text: str) -> T:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = check.__name__.removeprefix("parse_")
    return convert


# --- the settings: one model, read by the layer the hub and the agent use too -------------


def _checked(check: Callable[[str], object]) -> BeforeValidator:
    """A value check of this module applied to text (a flag, a variable, the context);
    pydantic reports its ValueError, which `shared.settingscli` turns into one line."""
    return BeforeValidator(lambda value: check(value) if isinstance(value, str) else value)


class CliSettings(ProgramSettings):
    """What every `mcsync` command may be told by a flag, an `MCSYNC_*` variable or the
    config file's context (a command takes the ones `COMMAND_SETTINGS` gives it)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: Annotated[Path | None, Flag(metavar="PATH")] = Field(
        default=None, description="the config file (default ~/.config/mcsync/config)"
    )
    hub_url: Annotated[str, Flag(metavar="URL"), _checked(parse_url)] = Field(
        default=DEFAULT_HUB_URL, description="base URL of the hub"
    )
    token: Annotated[str | None, Flag(metavar="TOKEN", echo=False), _checked(parse_text)] = Field(
        default=None,
        description="bearer token (reader or admin); prefer --token-file, a flag shows in `ps`",
    )
    token_file: Annotated[str | None, Flag(metavar="PATH"), _checked(parse_text)] = Field(
        default=None, description="file holding the bearer token"
    )
    output: Annotated[str, Flag(("-o", "--output"), "FORMAT"), _checked(parse_output)] = Field(
        default="table", description="table, wide, json, yaml, name or jsonpath=TEMPLATE"
    )
    watch: Annotated[bool, Flag(("-w", "--watch"))] = Field(
        default=False, description="after listing, follow changes until Ctrl-C (every list)"
    )
    no_headers: bool = Field(default=False, description="print tables without their header line")
    request_timeout: Annotated[float, Flag(metavar="SECONDS"), _checked(parse_positive_float)] = (
        Field(default=DEFAULT_REQUEST_TIMEOUT, description="seconds to wait for each answer")
    )
    page_size: Annotated[int, Flag(metavar="N"), _checked(parse_page_size)] = Field(
        default=DEFAULT_PAGE_SIZE, description="objects per request when listing"
    )
    verbose: Annotated[bool, Flag(("-v", "--verbose"))] = Field(
        default=False,
        description="trace each HTTP request on stderr: method, URL, status, time (never the "
        "token)",
    )
    certificate_authority: Annotated[str | None, Flag(metavar="PATH"), _checked(parse_text)] = (
        Field(default=None, description="PEM file of the CA that signed the hub's certificate")
    )
    insecure_skip_tls_verify: bool = Field(
        default=False, description="do not check the hub's certificate (insecure: for tests only)"
    )
    context: Annotated[str | None, Flag(metavar="NAME"), _checked(parse_text)] = Field(
        default=None, description="the config file's context to use (default: its current one)"
    )
    namespace: Annotated[
        str | None, Flag(("-n", "--namespace"), "NS"), _checked(parse_namespace)
    ] = Field(default=None, description="only this namespace (default: all)")
    cluster: Annotated[str | None, Flag(metavar="CLUSTER"), _checked(parse_cluster)] = Field(
        default=None, description="only this member cluster"
    )
    conflict: Annotated[bool | None, Flag(metavar="true|false"), _checked(parse_bool)] = Field(
        default=None, description="true: only conflicting; false: only clean"
    )
    name: Annotated[str | None, Flag(metavar="NAME"), _checked(parse_service_name)] = Field(
        default=None, description="only services of this name"
    )
    selector: Annotated[
        Selector | None, Flag(("-l", "--selector"), "SELECTOR"), _checked(parse_selector)
    ] = Field(
        default=None,
        description="label selector, as kubectl's: env=prod,tier!=db,region in (eu,us)",
    )
    hub_port: Annotated[int, Flag(metavar="PORT"), _checked(parse_port)] = Field(
        default=0, description="loopback port of the sandbox's hub (default 0: any free port)"
    )


SETTINGS = settingscli.settings_of(CliSettings)
GLOBAL_SETTINGS = settingscli.pick(
    CliSettings, "hub_url", "token", "token_file", "output", "watch", "no_headers",
    "request_timeout", "page_size", "verbose", "certificate_authority",
    "insecure_skip_tls_verify", "context", "config",
)  # fmt: skip
# What a context of the config file may set (`config set-context` writes these).
CONTEXT_SETTINGS = settingscli.pick(
    CliSettings, "hub_url", "token_file", "certificate_authority", "insecure_skip_tls_verify"
)
_VALUE_FLAGS = frozenset(f for s in GLOBAL_SETTINGS if s.action == "store" for f in s.flags)


def _add_globals(parser: argparse.ArgumentParser, *, exclude: frozenset[str] = frozenset()) -> None:
    group = parser.add_argument_group("global options")
    settingscli.add_flags(group, [s for s in GLOBAL_SETTINGS if s.field not in exclude])


def _add_scope_flags(parser: argparse.ArgumentParser, *, verb: str) -> None:
    parser.add_argument(
        "--export-namespace",
        dest="export_namespaces",
        action="append",
        type=_argtype(parse_namespace_pattern),
        default=None,
        metavar="NS",
        help=f"a namespace (or '*' glob) it {verb} export from (repeatable; default: all)",
    )
    parser.add_argument(
        "--import-namespace",
        dest="import_namespaces",
        action="append",
        type=_argtype(parse_namespace_pattern),
        default=None,
        metavar="NS",
        help=f"a namespace (or '*' glob) it {verb} import (repeatable; default: all)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = settingscli.OneLineParser(
        prog="mcsync",
        description="Query an mcsync hub: member clusters, exported services, endpoints, "
        "conflicts; register and deregister clusters.",
        epilog=f"{settingscli.environment_help(SETTINGS)}\n\n"
        "The context (--context, else the config file's current-context) sets hub-url, "
        "token-file, certificate-authority and insecure-skip-tls-verify.\n\n"
        "Exit codes: 0 ok (also an empty result); 1 not found, API error or hub "
        "unreachable; 2 usage error.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mcsync {__version__}")
    _add_globals(parser)
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=settingscli.OneLineParser
    )
    commands.required = True

    def command(
        name: str, help_text: str, *, exclude: frozenset[str] = frozenset()
    ) -> argparse.ArgumentParser:
        sub = cast(
            argparse.ArgumentParser,
            commands.add_parser(name, help=help_text, description=help_text, prog=f"mcsync {name}"),
        )
        settingscli.add_flags(sub, settingscli.pick(CliSettings, *COMMAND_SETTINGS[name]))
        _add_globals(sub, exclude=exclude)
        return sub

    clusters = command(
        "clusters",
        "list member clusters with state and export counts "
        "(also: clusters register, clusters deregister)",
    )
    clusters.add_argument("name", nargs="?", metavar="NAME", help="only this cluster")
    register = command(
        "clusters register",
        "register a member cluster and write its token to a new file (admin token needed)",
        exclude=frozenset({"token_file"}),
    )
    register.add_argument("name", metavar="NAME", type=_argtype(parse_cluster))
    register.add_argument(
        "--label",
        dest="labels",
        action="append",
        type=_argtype(parse_label),
        default=[],
        metavar="KEY=VALUE",
        help="a label of the cluster (repeatable)",
    )
    register.add_argument(
        "--token-file",
        dest="member_token_file",
        required=True,
        type=_argtype(parse_text),
        metavar="PATH",
        help="where to write the member token (mode 0600); the admin "
        "token comes from --token, MCSYNC_TOKEN(_FILE), the context, or a --token-file "
        "given before `clusters`",
    )
    register.add_argument(
        "--overwrite", action="store_true", help="replace the token file if it exists"
    )
    _add_scope_flags(register, verb="may")
    set_scope = command(
        "clusters set-scope",
        "change the namespaces a member cluster may export from and imports (SPEC §4.4; "
        "admin token needed); what is not given is kept",
    )
    set_scope.add_argument("name", metavar="NAME", type=_argtype(parse_cluster))
    _add_scope_flags(set_scope, verb="may from now on")
    set_scope.add_argument(
        "--all-export-namespaces",
        action="store_true",
        help="let it export from every namespace the hub does not deny",
    )
    set_scope.add_argument(
        "--all-import-namespaces", action="store_true", help="let it import every namespace"
    )
    deregister = command(
        "clusters deregister",
        "deregister a member cluster, withdrawing all its exports (admin token needed)",
    )
    deregister.add_argument("name", metavar="NAME", type=_argtype(parse_cluster))
    deregister.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    allow = command(
        "clusters allow-withdrawal",
        "let a cluster's next held mass withdrawal of exports through, once (SPEC §5.1; "
        "admin token needed)",
    )
    allow.add_argument("name", metavar="NAME", type=_argtype(parse_cluster))
    rotate = command(
        "clusters rotate-token",
        "issue a new member token and write it to a new file; the old one keeps working "
        "until the agent uses the new one or the hub's --token-grace-seconds pass "
        "(docs/reference.md#credentials; admin token needed)",
        exclude=frozenset({"token_file"}),
    )
    rotate.add_argument("name", metavar="NAME", type=_argtype(parse_cluster))
    rotate.add_argument(
        "--token-file",
        dest="member_token_file",
        required=True,
        type=_argtype(parse_text),
        metavar="PATH",
        help="where to write the new member token (mode 0600); the admin token comes from "
        "--token, MCSYNC_TOKEN(_FILE), the context, or a --token-file given before `clusters`",
    )
    rotate.add_argument(
        "--overwrite", action="store_true", help="replace the token file if it exists"
    )
    exports = command(
        "exports",
        "list exported services (every cluster's export; --invalid: the ServiceExports "
        "that members could not export, and why)",
    )
    exports.add_argument(
        "--invalid",
        action="store_true",
        help="list the ServiceExports that are Valid=False in their cluster, with the "
        "reason, as each agent last reported them (never exported, so never in conflicts)",
    )
    command("imports", "list derived ServiceImports (one per exported service)")
    endpoints = command(
        "endpoints", "list exported EndpointSlices: ready/total endpoints per slice"
    )
    endpoints.add_argument(
        "ref", nargs="?", metavar="[NS/]NAME", help="only the slices of this Service"
    )
    command("conflicts", "list conflicting services: winner, disputed fields, losers")
    version = command("version", "show the versions of this client and of the hub")
    version.add_argument(
        "--client",
        dest="client_only",
        action="store_true",
        help="only the client's version; no request",
    )

    get = commands.add_parser(
        "get",
        help="show one export, import or cluster in detail (`get exports` and the "
        "other plurals list, as the list commands do; `describe` is the same as `get`)",
        description="show one export, import or cluster in detail",
    )
    kinds = get.add_subparsers(dest="kind", metavar="KIND", parser_class=settingscli.OneLineParser)
    kinds.required = True
    for kind, ref, fields, help_text, description in (
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
    ):
        sub = kinds.add_parser(kind, help=help_text, description=description)
        sub.add_argument(
            "ref", metavar=ref, type=_argtype(parse_cluster) if kind == "cluster" else str
        )
        settingscli.add_flags(sub, settingscli.pick(CliSettings, *fields))
        _add_globals(sub)
    _add_globals(get)

    _config_parser(commands)
    completion = command(
        "completion", "print a shell completion script: source <(mcsync completion bash)"
    )
    completion.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    command(
        "status",
        "the fleet at a glance: hub, token, database, clusters by state, exports, conflicts, "
        "imports; exit 1 when something needs attention",
    )
    command(
        "sandbox",
        "run a fleet on this machine to try mcsync without Kubernetes: a hub, three emulated "
        "clusters and their agents, until Ctrl-C (needs mcsync[hub,agent])",
    )
    for verb, what in (("stop", "stop one agent of"), ("start", "start again one agent of")):
        agent = command(
            f"sandbox {verb}-agent",
            f"{what} the sandbox running in another terminal, without ending it "
            "(a stopped agent's cluster turns Stale and its importers fail over; "
            "docs/reference.md#sandbox)",
        )
        agent.add_argument("name", metavar="NAME", help="the cluster: east, north or west")
    return parser


def _config_parser(commands: Any) -> None:
    config = commands.add_parser(
        "config",
        help="contexts of the config file: get-contexts, use-context, …",
        description="read and change the config file's contexts (~/.config/mcsync/config)",
        prog="mcsync config",
    )
    _add_globals(config)
    actions = config.add_subparsers(
        dest="config_action", metavar="ACTION", parser_class=settingscli.OneLineParser
    )
    actions.required = True
    for name, help_text in (
        ("get-contexts", "list the contexts; * marks the current one"),
        ("current-context", "print the current context's name"),
    ):
        _add_globals(actions.add_parser(name, help=help_text, description=help_text))
    use = actions.add_parser(
        "use-context",
        help="make NAME the current context",
        description="make NAME the current context",
    )
    use.add_argument("context_name", metavar="NAME", type=_argtype(parse_text))
    _add_globals(use)
    set_context = actions.add_parser(
        "set-context",
        help="create or change the context NAME",
        description="create or change the context NAME (only the settings given change)",
    )
    set_context.add_argument("context_name", metavar="NAME", type=_argtype(parse_text))
    # The context's own settings, kept apart from the global flags of the same names.
    settingscli.add_flags(set_context, CONTEXT_SETTINGS, dest_prefix=CONTEXT_DEST)
    _add_globals(set_context, exclude=frozenset(s.field for s in CONTEXT_SETTINGS))


# kubectl's habits: `get <plural>` lists, `describe <kind> <ref>` shows the detail page.
PLURALS = {
    "clusters": "clusters",
    "exports": "exports",
    "serviceexports": "exports",
    "imports": "imports",
    "serviceimports": "imports",
    "endpoints": "endpoints",
    "endpointslices": "endpoints",
    "conflicts": "conflicts",
}


def _rewrite(argv: list[str]) -> list[str]:
    """Command words argparse cannot express, made into ones it can. `clusters register …`
    and `clusters deregister …` become one command word, so that `clusters [NAME]` keeps
    its optional positional; `get <plural>` becomes the list command; `describe` is `get`.
    The command is the first word that is neither an option nor an option's value."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return argv
        if word.startswith("-"):
            index += 2 if word in _VALUE_FLAGS else 1
            continue
        following = argv[index + 1 : index + 2]
        if word == "clusters" and following in (
            ["register"],
            ["deregister"],
            ["allow-withdrawal"],
            ["set-scope"],
            ["rotate-token"],
        ):
            return [*argv[:index], f"clusters {argv[index + 1]}", *argv[index + 2 :]]
        if word == "sandbox" and following in (["stop-agent"], ["start-agent"]):
            return [*argv[:index], f"sandbox {argv[index + 1]}", *argv[index + 2 :]]
        if word == "get" and following and following[0] in PLURALS:
            return [*argv[:index], PLURALS[following[0]], *argv[index + 2 :]]
        if word == "describe":
            return [*argv[:index], "get", *argv[index + 1 :]]
        return argv
    return argv


# --- from parsed values to Options ------------------------------------------------------


def _scope_options(command: str, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The scope flags of `clusters register` / `set-scope`, checked against each other."""
    if command not in ("clusters register", "clusters set-scope"):
        return {}
    found: dict[str, Any] = {}
    for kind in ("export", "import"):
        given = namespace.get(f"{kind}_namespaces")
        every = bool(namespace.get(f"all_{kind}_namespaces"))
        if given is not None and every:
            raise _usage(
                f"argument --all-{kind}-namespaces: not allowed with --{kind}-namespace"
            )
        found[f"{kind}_namespaces"] = None if given is None else tuple(dict.fromkeys(given))
        found[f"all_{kind}_namespaces"] = every
    if command == "clusters set-scope" and not any(found.values()):
        raise _usage(
            "clusters set-scope: nothing to change: give --export-namespace, "
            "--import-namespace, --all-export-namespaces or --all-import-namespaces"
        )
    return found


# The settings of each command beside the global ones: its flags, and the only variables
# and context keys it reads (a list's --watch aside, which `_layered` adds).
COMMAND_SETTINGS: Mapping[str, tuple[str, ...]] = {
    "clusters": ("selector",),
    "clusters register": (),
    "clusters deregister": (),
    "clusters allow-withdrawal": (),
    "clusters set-scope": (),
    "clusters rotate-token": (),
    "exports": ("namespace", "cluster", "conflict", "name"),
    "imports": ("namespace", "conflict"),
    "endpoints": ("namespace", "cluster"),
    "conflicts": ("namespace",),
    "get": ("namespace", "cluster"),
    "version": (),
    "config": (),
    "completion": (),
    "sandbox": ("hub_port",),
    "sandbox stop-agent": (),
    "sandbox start-agent": (),
    "status": (),
}
CONTEXT_DEST = "ctx:"
OPTIONS_AS_SET = (
    "hub_url", "watch", "request_timeout", "page_size", "conflict", "no_headers", "verbose",
    "selector", "certificate_authority", "insecure_skip_tls_verify", "hub_port",
)  # fmt: skip


def _layered(command: str) -> tuple[settingscli.Setting, ...]:
    """The settings `command` takes from every layer: the global ones (but the token:
    --token and --token-file are one setting, resolved by `_token`), its own, and --watch
    for a list — so `MCSYNC_WATCH=true` makes every list watch and leaves `get` alone."""
    fields = [s.field for s in GLOBAL_SETTINGS if s.field not in ("watch", "token", "token_file")]
    fields += COMMAND_SETTINGS[command]
    if command in LIST_COMMANDS:
        fields.append("watch")
    return settingscli.pick(CliSettings, *fields)


def _did_you_mean(exc: UsageError) -> UsageError:
    """argparse's "invalid choice: 'clsters' (choose from …)" made into "did you mean
    'clusters'?" when one choice is close, as git and kubectl answer a typo."""
    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", str(exc))
    if found is None:
        return exc
    choices = re.findall(r"'([^']*)'", found.group(2))
    close = difflib.get_close_matches(found.group(1), choices, n=1, cutoff=0.6)
    if not close:
        return exc
    head = str(exc)[: found.start()]
    return UsageError(f"{head}unknown word {found.group(1)!r}: did you mean {close[0]!r}? "
                      f"(`{PROG} --help` lists the commands)")


def _usage(message: str) -> UsageError:
    return UsageError(f"{PROG}: error: {message}")


def _token_problem(field: str, source: str, message: str) -> UsageError:
    (setting,) = settingscli.pick(CliSettings, field)
    return settingscli.problem(PROG, setting, source, message)


def _read_token(path: str, source: str) -> str:
    try:
        token = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        reason = exc.strerror or exc
        raise _token_problem("token_file", source, f"cannot read {path}: {reason}") from None
    if not token:
        raise _token_problem("token_file", source, f"{path} is empty")
    return token


def _token(layers: settingscli.Layers) -> str | None:
    """The bearer token, `--token`/`--token-file` being one setting: the first layer that
    names either wins (flag, environment, context). Both in one layer is ambiguous."""
    flag_token, flag_file = layers.given.get("token"), layers.given.get("token_file")
    if flag_token is not None and flag_file is not None:
        raise _token_problem("token", "flag", "give --token or --token-file, not both")
    env_token = layers.environ.get("MCSYNC_TOKEN")
    env_file = layers.environ.get("MCSYNC_TOKEN_FILE")
    if flag_token is None and flag_file is None and env_token and env_file:
        raise _token_problem(
            "token", "flag", "MCSYNC_TOKEN and MCSYNC_TOKEN_FILE are both set; unset one"
        )
    if flag_token is not None or (flag_file is None and env_token):
        source = "flag" if flag_token is not None else "MCSYNC_TOKEN"
        try:
            return parse_text(str(flag_token if flag_token is not None else env_token))
        except ValueError as exc:
            raise _token_problem("token", source, str(exc)) from None
    if flag_file is not None:
        return _read_token(str(flag_file), "flag")
    if env_file:
        return _read_token(env_file, "MCSYNC_TOKEN_FILE")
    if layers.file.get("token-file"):
        return _read_token(layers.file["token-file"], f"token-file of {layers.file_name}")
    return None


def split_ref(
    ref: str,
    *,
    what: str,
    flag_names: Sequence[str],
    explicit: Sequence[str | None],
    fallback: Sequence[str | None],
    checks: Sequence[Callable[[str], str]],
) -> list[str]:
    """`cluster/ns/name` → its parts; a shorter ref takes its leading parts from flags.

    `flag_names`, `explicit` (given on the command line) and `fallback` (command line or
    environment) describe the leading parts in order. A part named both in the ref and by
    an explicit flag must agree; the environment never contradicts an explicit ref.
    """
    given = ref.split("/")
    size = len(flag_names) + 1
    if not 1 <= len(given) <= size or not all(given):
        raise _usage(f"expected {what}, got {ref!r}")
    missing = size - len(given)
    parts: list[str] = []
    for index, flag_name in enumerate(flag_names):
        if index < missing:
            value = fallback[index]
            if value is None:
                raise _usage(f"expected {what}, or give {flag_name}; got {ref!r}")
            parts.append(value)
            continue
        from_ref = given[index - missing]
        if explicit[index] is not None and explicit[index] != from_ref:
            raise _usage(f"{ref!r} names {from_ref!r}, but {flag_name} says {explicit[index]!r}")
        parts.append(from_ref)
    parts.append(given[-1])
    for part, check in zip(parts, checks, strict=True):
        try:
            check(part)
        except ValueError as exc:
            raise _usage(f"{what}: {exc}") from None
    return parts


def _load_config(
    explicit: Mapping[str, object], environ: Mapping[str, str], *, may_be_new: bool
) -> Config:
    """The config file; one named explicitly must exist, unless the command is about to
    write it (`config set-context`)."""
    given = explicit.get("config") or environ.get("MCSYNC_CONFIG")
    path = Path(str(given)).expanduser() if given else default_path(environ)
    try:
        return load(path, explicit=bool(given) and not may_be_new)
    except ConfigError as exc:
        raise _usage(f"argument --config: {exc}") from None


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Options:
    """Parse `argv` (without the program name); UsageError on any mistake."""
    env = os.environ if environ is None else environ
    try:
        namespace = vars(build_parser().parse_args(_rewrite(list(argv))))
    except UsageError as exc:
        raise _did_you_mean(exc) from None
    command = cast(Command, namespace["command"])
    given = {s.field: namespace[s.field] for s in SETTINGS if s.field in namespace}
    if given.get("watch") and command not in LIST_COMMANDS:
        raise _usage(f"--watch works with the lists ({', '.join(LIST_COMMANDS)}), not `{command}`")
    config = _load_config(given, env, may_be_new=command == "config")
    context_name = str(given.get("context") or env.get("MCSYNC_CONTEXT") or "") or None
    try:
        context = config.context(context_name) if command not in OFFLINE_COMMANDS else {}
    except ConfigError as exc:
        raise _usage(f"argument --context: {exc}") from None
    layers = settingscli.Layers(given, env, context, f"context {context_name or config.current}")
    values, sources = settingscli.resolve(_layered(command), layers)
    settings = settingscli.validate(CliSettings, values, sources, prog=PROG)
    token = None if command in OFFLINE_COMMANDS else _token(layers)

    def explicit(field: str) -> str | None:
        """The value of a flag given on the command line (checked), else None."""
        return cast(str | None, getattr(settings, field)) if sources.get(field) == "flag" else None

    namespace_name, cluster, name = settings.namespace, settings.cluster, settings.name
    kind: Kind | None = None
    if command == "get":
        kind = cast(Kind, namespace["kind"])
        ref = str(namespace["ref"])
        if kind == "export":
            cluster, namespace_name, name = split_ref(
                ref,
                what="CLUSTER/NAMESPACE/NAME",
                flag_names=("--cluster", "-n/--namespace"),
                explicit=(explicit("cluster"), explicit("namespace")),
                fallback=(cluster, namespace_name),
                checks=(parse_cluster, parse_namespace, parse_service_name),
            )
        elif kind == "cluster":
            name = ref
        else:
            namespace_name, name = split_ref(
                ref,
                what="NAMESPACE/NAME",
                flag_names=("-n/--namespace",),
                explicit=(explicit("namespace"),),
                fallback=(namespace_name,),
                checks=(parse_namespace, parse_service_name),
            )
    elif command == "endpoints" and namespace.get("ref") is not None:
        ref = str(namespace["ref"])
        name = _service_ref(ref, explicit("namespace"))
        if "/" in ref:
            namespace_name = ref.split("/")[0]
    elif command == "clusters" and namespace.get("name") is not None:
        name = str(namespace["name"])
    elif command in (
        "clusters register",
        "clusters deregister",
        "clusters allow-withdrawal",
        "clusters set-scope",
        "clusters rotate-token",
        "sandbox stop-agent",
        "sandbox start-agent",
    ):
        name = str(namespace["name"])
    scope = _scope_options(command, namespace)
    output, _, template = settings.output.partition("=")
    if output == "name" and kind == "conflict":
        raise _usage("argument -o/--output: a conflict has no name of its own; use "
                     "`mcsync get import NAMESPACE/NAME -o name`")
    if output not in ("table", "wide") and command == "status":
        raise _usage("argument -o/--output: `status` prints its page only; for objects use "
                     "`clusters`, `imports` or `conflicts` with -o")
    if namespace.get("invalid") and (settings.watch or settings.conflict is not None):
        raise _usage(
            "argument --invalid: not allowed with --watch or --conflict (invalid "
            "ServiceExports come with heartbeats, not the feed, and take no part in conflicts)"
        )
    if output == "name" and command in ("version", *OFFLINE_COMMANDS):
        raise _usage(f"argument -o/--output: `{command}` has no object to name")
    # The settings an Options field takes as they are; the rest are worked out above.
    as_set = {field: getattr(settings, field) for field in OPTIONS_AS_SET}
    return Options(
        **as_set,
        command=command,
        kind=kind,
        token=token,
        output=cast(Output, output),
        jsonpath=template if output == "jsonpath" else None,
        watch_from_env=sources.get("watch") == "MCSYNC_WATCH",
        namespace=namespace_name,
        cluster=cluster,
        name=name,
        labels=tuple(cast(list[tuple[str, str]], namespace.get("labels") or [])),
        member_token_file=cast(str | None, namespace.get("member_token_file")),
        overwrite=bool(namespace.get("overwrite")),
        yes=bool(namespace.get("yes")),
        **scope,
        invalid=bool(namespace.get("invalid")),
        client_only=bool(namespace.get("client_only")),
        config_path=str(config.path),
        context=cast(str | None, namespace.get("context_name")) or context_name,
        config_action=cast(ConfigAction | None, namespace.get("config_action")),
        context_settings=_context_settings(namespace),
        shell=cast(Shell | None, namespace.get("shell")),
    )


def _context_settings(namespace: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """What `config set-context` was told, checked as the settings themselves are, as the
    config file's keys and text."""
    given = {
        s.field: namespace[CONTEXT_DEST + s.field]
        for s in CONTEXT_SETTINGS
        if CONTEXT_DEST + s.field in namespace
    }
    checked = settingscli.validate(CliSettings, given, dict.fromkeys(given, "flag"), prog=PROG)
    return tuple(
        (s.key, str(value).lower() if isinstance(value, bool) else str(value))
        for s in CONTEXT_SETTINGS
        if s.field in given
        for value in (getattr(checked, s.field),)
    )


def _service_ref(ref: str, explicit_namespace: object) -> str:
    """`[NS/]NAME` of `endpoints`: the Service's name; a namespace in the ref must agree
    with an explicit -n."""
    parts = ref.split("/")
    if len(parts) > 2 or not all(parts):
        raise _usage(f"expected [NAMESPACE/]NAME, got {ref!r}")
    try:
        if len(parts) == 2:
            parse_namespace(parts[0])
        parse_service_name(parts[-1])
    except ValueError as exc:
        raise _usage(f"[NAMESPACE/]NAME: {exc}") from None
    if len(parts) == 2 and explicit_namespace is not None and explicit_namespace != parts[0]:
        raise _usage(f"{ref!r} names {parts[0]!r}, but -n/--namespace says {explicit_namespace!r}")
    return parts[-1]
