"""The command line of `mcsync`: flags, `MCSYNC_*` variables, the config file's context.

Precedence is the same for every setting: a flag, then its environment variable, then the
current context of the config file (`cli.config`), then the default — so `MCSYNC_TOKEN=x
mcsync --token-file F clusters` uses F. A value from any layer goes through the same check
as the flag would, and a bad one stops the program at start with one line naming the flag
(and the variable or context it came from), exit code 2 — the same as a bad flag, because
it is the same mistake made in another place.

Global options (`--hub-url`, `-o`, `--watch`, …) are accepted before or after the
sub-command (`mcsync -o json exports` and `mcsync exports -o json`), as kubectl accepts
them; the sub-parsers declare them again with suppressed defaults so that a value given
before the sub-command is not overwritten by a default after it. An environment variable
only applies to a command that has its flag: `MCSYNC_WATCH=true` makes every list watch
and leaves `get` or `version` alone, while `--watch` typed on a command that cannot watch
is an error.

`parse_args` answers one typed, frozen `Options`; nothing else in the CLI reads argparse
namespaces, the environment or the config file's settings.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar, cast

from pydantic import ValidationError

from cli import jsonpath
from cli.config import Config, ConfigError, default_path, load
from cli.selector import Selector, parse_selector
from shared.models import ObjectMeta, is_dns1035_label, is_dns1123_label
from shared.version import __version__

DEFAULT_HUB_URL = "http://127.0.0.1:8080"
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_PAGE_SIZE = 500
OUTPUTS = ("table", "wide", "json", "yaml", "name", "jsonpath=TEMPLATE")

Output = Literal["table", "wide", "json", "yaml", "name", "jsonpath"]
Command = Literal[
    "clusters", "clusters register", "clusters deregister", "exports", "imports",
    "endpoints", "conflicts", "get", "version", "config", "completion",
]
Kind = Literal["export", "import", "cluster"]
ConfigAction = Literal["get-contexts", "current-context", "use-context", "set-context"]
Shell = Literal["bash", "zsh", "fish"]
SHELLS: tuple[Shell, ...] = ("bash", "zsh", "fish")
LIST_COMMANDS: tuple[Command, ...] = ("clusters", "exports", "imports", "endpoints", "conflicts")

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
    # version, config, completion
    client_only: bool = False
    config_path: str | None = None
    context: str | None = None
    config_action: ConfigAction | None = None
    context_settings: tuple[tuple[str, str], ...] = ()
    shell: Shell | None = None

    @property
    def wide(self) -> bool:
        return self.output == "wide"


class UsageError(Exception):
    """A mistake in how the program was called (exit code 2)."""


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
            raise ValueError(f"{text!r} is not {what} (a DNS-1123 label: lowercase letters, "
                             "digits and '-', at most 63 characters)")
        return value

    return parse


parse_namespace = _dns1123_label("a namespace")
parse_cluster = _dns1123_label("a cluster name")


def parse_service_name(text: str) -> str:
    value = text.strip()
    if not is_dns1035_label(value):
        raise ValueError(f"{text!r} is not a Service name (a DNS-1035 label: lowercase "
                         "letters, digits and '-', starting with a letter)")
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


# --- the parser -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Flag:
    flags: tuple[str, ...]
    dest: str
    env: str
    check: Callable[[str], object] | None  # None: a switch (store_true)
    help: str
    metavar: str | None = None
    config_key: str | None = None  # the setting of a config-file context, if any


HUB_URL_FLAG = _Flag(("--hub-url",), "hub_url", "MCSYNC_HUB_URL", parse_url,
                     f"base URL of the hub (default {DEFAULT_HUB_URL})", "URL", "hub-url")
TOKEN_FLAG = _Flag(("--token",), "token", "MCSYNC_TOKEN", parse_text,
                   "bearer token (reader or admin); prefer --token-file, a flag shows in `ps`",
                   "TOKEN")
TOKEN_FILE_FLAG = _Flag(("--token-file",), "token_file", "MCSYNC_TOKEN_FILE", parse_text,
                        "file holding the bearer token", "PATH", "token-file")
CA_FLAG = _Flag(("--certificate-authority",), "certificate_authority",
                "MCSYNC_CERTIFICATE_AUTHORITY", parse_text,
                "PEM file of the CA that signed the hub's certificate", "PATH",
                "certificate-authority")
INSECURE_FLAG = _Flag(("--insecure-skip-tls-verify",), "insecure_skip_tls_verify",
                      "MCSYNC_INSECURE_SKIP_TLS_VERIFY", None,
                      "do not check the hub's certificate (insecure: for tests only)",
                      config_key="insecure-skip-tls-verify")
WATCH_FLAG = _Flag(("-w", "--watch"), "watch", "MCSYNC_WATCH", None,
                   "after listing, follow changes until Ctrl-C (every list)")

GLOBAL_FLAGS: tuple[_Flag, ...] = (
    HUB_URL_FLAG,
    TOKEN_FLAG,
    TOKEN_FILE_FLAG,
    _Flag(("-o", "--output"), "output", "MCSYNC_OUTPUT", parse_output,
          "table (default), wide, json, yaml, name or jsonpath=TEMPLATE", "FORMAT"),
    WATCH_FLAG,
    _Flag(("--no-headers",), "no_headers", "MCSYNC_NO_HEADERS", None,
          "print tables without their header line"),
    _Flag(("--request-timeout",), "request_timeout", "MCSYNC_REQUEST_TIMEOUT",
          parse_positive_float,
          f"seconds to wait for each answer (default {DEFAULT_REQUEST_TIMEOUT:g})", "SECONDS"),
    _Flag(("--page-size",), "page_size", "MCSYNC_PAGE_SIZE", parse_page_size,
          f"objects per request when listing (default {DEFAULT_PAGE_SIZE})", "N"),
    _Flag(("-v", "--verbose"), "verbose", "MCSYNC_VERBOSE", None,
          "trace each HTTP request on stderr: method, URL, status, time (never the token)"),
    CA_FLAG,
    INSECURE_FLAG,
    _Flag(("--context",), "context", "MCSYNC_CONTEXT", parse_text,
          "the config file's context to use (default: its current-context)", "NAME"),
    _Flag(("--config",), "config", "MCSYNC_CONFIG", parse_text,
          "the config file (default ~/.config/mcsync/config)", "PATH"),
)
_VALUE_FLAGS = frozenset(f for flag in GLOBAL_FLAGS if flag.check is not None
                         for f in flag.flags)

NAMESPACE_FLAG = _Flag(("-n", "--namespace"), "namespace", "MCSYNC_NAMESPACE", parse_namespace,
                       "only this namespace (default: all)", "NS")
CLUSTER_FLAG = _Flag(("--cluster",), "cluster", "MCSYNC_CLUSTER", parse_cluster,
                     "only this member cluster", "CLUSTER")
CONFLICT_FLAG = _Flag(("--conflict",), "conflict", "MCSYNC_CONFLICT", parse_bool,
                      "true: only conflicting; false: only clean", "true|false")
NAME_FLAG = _Flag(("--name",), "name", "MCSYNC_NAME", parse_service_name,
                  "only services of this name", "NAME")
SELECTOR_FLAG = _Flag(("-l", "--selector"), "selector", "MCSYNC_SELECTOR", parse_selector,
                      "label selector, as kubectl's: env=prod,tier!=db,region in (eu,us)",
                      "SELECTOR")


def _add(parser: argparse.ArgumentParser, flag: _Flag, *, suppress: bool) -> None:
    help_text = f"{flag.help} [env {flag.env}]"
    default = argparse.SUPPRESS if suppress else None
    if flag.check is None:
        parser.add_argument(
            *flag.flags, dest=flag.dest, action="store_true", default=default, help=help_text
        )
    else:
        parser.add_argument(
            *flag.flags, dest=flag.dest, type=_argtype(flag.check), default=default,
            metavar=flag.metavar, help=help_text,
        )


def _add_globals(
    parser: argparse.ArgumentParser, *, suppress: bool, exclude: frozenset[str] = frozenset()
) -> None:
    group = parser.add_argument_group("global options")
    for flag in GLOBAL_FLAGS:
        if flag.dest not in exclude:
            _add(group, flag, suppress=suppress)  # type: ignore[arg-type]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error raises instead of exiting, so `main` owns exit codes."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mcsync",
        description="Query an mcsync hub: member clusters, exported services, endpoints, "
        "conflicts; register and deregister clusters.",
        epilog="Precedence: flag, then MCSYNC_* variable, then the config file's context, "
        "then the default. Exit codes: 0 ok (also an empty result); 1 not found, API error "
        "or hub unreachable; 2 usage error.",
    )
    parser.add_argument("--version", action="version", version=f"mcsync {__version__}")
    _add_globals(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    def command(
        name: str, help_text: str, *flags: _Flag, exclude: frozenset[str] = frozenset()
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text,
                                  prog=f"mcsync {name}")
        for flag in flags:
            _add(sub, flag, suppress=False)
        _add_globals(sub, suppress=True, exclude=exclude)
        return sub

    clusters = command(
        "clusters", "list member clusters with state and export counts "
        "(also: clusters register, clusters deregister)", SELECTOR_FLAG,
    )
    clusters.add_argument("name", nargs="?", metavar="NAME", help="only this cluster")
    register = command(
        "clusters register",
        "register a member cluster and write its token to a new file (admin token needed)",
        exclude=frozenset({"token_file"}),
    )
    register.add_argument("name", metavar="NAME", type=_argtype(parse_cluster))
    register.add_argument(
        "--label", dest="labels", action="append", type=_argtype(parse_label), default=[],
        metavar="KEY=VALUE", help="a label of the cluster (repeatable)",
    )
    register.add_argument(
        "--token-file", dest="member_token_file", required=True, type=_argtype(parse_text),
        metavar="PATH", help="where to write the member token (mode 0600); the admin "
        "token comes from --token, MCSYNC_TOKEN(_FILE), the context, or a --token-file "
        "given before `clusters`",
    )
    register.add_argument("--overwrite", action="store_true",
                          help="replace the token file if it exists")
    deregister = command(
        "clusters deregister",
        "deregister a member cluster, withdrawing all its exports (admin token needed)",
    )
    deregister.add_argument("name", metavar="NAME", type=_argtype(parse_cluster))
    deregister.add_argument("-y", "--yes", action="store_true",
                            help="do not ask for confirmation")
    command("exports", "list exported services (every cluster's export)",
            NAMESPACE_FLAG, CLUSTER_FLAG, CONFLICT_FLAG, NAME_FLAG)
    command("imports", "list derived ServiceImports (one per exported service)",
            NAMESPACE_FLAG, CONFLICT_FLAG)
    endpoints = command(
        "endpoints", "list exported EndpointSlices: ready/total endpoints per slice",
        NAMESPACE_FLAG, CLUSTER_FLAG,
    )
    endpoints.add_argument("ref", nargs="?", metavar="[NS/]NAME",
                           help="only the slices of this Service")
    command("conflicts", "list conflicting services: winner, disputed fields, losers",
            NAMESPACE_FLAG)
    version = command("version", "show the versions of this client and of the hub")
    version.add_argument("--client", dest="client_only", action="store_true",
                         help="only the client's version; no request")

    get = commands.add_parser(
        "get", help="show one export, import or cluster in detail (`get exports` and the "
        "other plurals list, as the list commands do; `describe` is the same as `get`)",
        description="show one export, import or cluster in detail",
    )
    kinds = get.add_subparsers(dest="kind", metavar="KIND", parser_class=_Parser)
    kinds.required = True
    export = kinds.add_parser(
        "export", help="CLUSTER/NAMESPACE/NAME, or NAME with --cluster and -n",
        description="show one cluster's export of a service",
    )
    export.add_argument("ref", metavar="CLUSTER/NAMESPACE/NAME")
    for flag in (NAMESPACE_FLAG, CLUSTER_FLAG):
        _add(export, flag, suppress=False)
    _add_globals(export, suppress=True)
    imp = kinds.add_parser(
        "import", help="NAMESPACE/NAME, or NAME with -n",
        description="show the ServiceImport of a service",
    )
    imp.add_argument("ref", metavar="NAMESPACE/NAME")
    _add(imp, NAMESPACE_FLAG, suppress=False)
    _add_globals(imp, suppress=True)
    one_cluster = kinds.add_parser(
        "cluster", help="NAME", description="show one member cluster in detail",
    )
    one_cluster.add_argument("ref", metavar="NAME", type=_argtype(parse_cluster))
    _add_globals(one_cluster, suppress=True)
    _add_globals(get, suppress=True)

    _config_parser(commands)
    completion = command("completion", "print a shell completion script: "
                         "source <(mcsync completion bash)")
    completion.add_argument("shell", choices=SHELLS, metavar="SHELL",
                            help="bash, zsh or fish")
    return parser


CONTEXT_SETTING_FLAGS = (HUB_URL_FLAG, TOKEN_FILE_FLAG, CA_FLAG, INSECURE_FLAG)


def _config_parser(commands: Any) -> None:
    config = commands.add_parser(
        "config", help="contexts of the config file: get-contexts, use-context, …",
        description="read and change the config file's contexts (~/.config/mcsync/config)",
        prog="mcsync config",
    )
    _add_globals(config, suppress=True)
    actions = config.add_subparsers(dest="config_action", metavar="ACTION", parser_class=_Parser)
    actions.required = True
    exclude = frozenset(flag.dest for flag in CONTEXT_SETTING_FLAGS)
    for name, help_text in (
        ("get-contexts", "list the contexts; * marks the current one"),
        ("current-context", "print the current context's name"),
    ):
        sub = actions.add_parser(name, help=help_text, description=help_text)
        _add_globals(sub, suppress=True)
    use = actions.add_parser("use-context", help="make NAME the current context",
                             description="make NAME the current context")
    use.add_argument("context_name", metavar="NAME", type=_argtype(parse_text))
    _add_globals(use, suppress=True)
    set_context = actions.add_parser(
        "set-context", help="create or change the context NAME",
        description="create or change the context NAME (only the settings given change)",
    )
    set_context.add_argument("context_name", metavar="NAME", type=_argtype(parse_text))
    for flag in CONTEXT_SETTING_FLAGS:
        assert flag.config_key is not None
        dest = "ctx:" + flag.config_key
        if flag.check is None:
            set_context.add_argument(flag.flags[0], dest=dest, action="store_true",
                                     default=None, help=flag.help)
        else:
            set_context.add_argument(flag.flags[0], dest=dest, type=_argtype(flag.check),
                                     metavar=flag.metavar, help=flag.help)
    _add_globals(set_context, suppress=True, exclude=exclude)


# kubectl's habits: `get <plural>` lists, `describe <kind> <ref>` shows the detail page.
PLURALS = {
    "clusters": "clusters", "exports": "exports", "serviceexports": "exports",
    "imports": "imports", "serviceimports": "imports", "endpoints": "endpoints",
    "endpointslices": "endpoints", "conflicts": "conflicts",
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
        following = argv[index + 1:index + 2]
        if word == "clusters" and following in (["register"], ["deregister"]):
            return [*argv[:index], f"clusters {argv[index + 1]}", *argv[index + 2:]]
        if word == "get" and following and following[0] in PLURALS:
            return [*argv[:index], PLURALS[following[0]], *argv[index + 2:]]
        if word == "describe":
            return [*argv[:index], "get", *argv[index + 1:]]
        return argv
    return argv


# --- from parsed values to Options ------------------------------------------------------

COMMAND_FLAGS: Mapping[str, tuple[_Flag, ...]] = {
    "clusters": (WATCH_FLAG, SELECTOR_FLAG),
    "clusters register": (),
    "clusters deregister": (),
    "exports": (WATCH_FLAG, NAMESPACE_FLAG, CLUSTER_FLAG, CONFLICT_FLAG, NAME_FLAG),
    "imports": (WATCH_FLAG, NAMESPACE_FLAG, CONFLICT_FLAG),
    "endpoints": (WATCH_FLAG, NAMESPACE_FLAG, CLUSTER_FLAG),
    "conflicts": (WATCH_FLAG, NAMESPACE_FLAG),
    "get": (NAMESPACE_FLAG, CLUSTER_FLAG),
    "version": (),
    "config": (),
    "completion": (),
}
# Settings every command takes from the environment and the context (the token aside:
# --token and --token-file are one setting, resolved by `_token`).
_LAYERED = tuple(
    flag for flag in GLOBAL_FLAGS if flag not in (WATCH_FLAG, TOKEN_FLAG, TOKEN_FILE_FLAG)
)


def _usage(message: str) -> UsageError:
    return UsageError(f"mcsync: error: {message}")


def _fill(
    values: dict[str, object],
    flags: Sequence[_Flag],
    environ: Mapping[str, str],
    context: Mapping[str, str],
    context_name: str,
) -> None:
    """Fill each flag left unset from its environment variable, then from the context,
    each value checked as the flag's would be."""
    for flag in flags:
        if values.get(flag.dest) not in (None, False):
            continue
        raw = environ.get(flag.env)
        source = flag.env
        if raw is None or raw == "":
            raw = context.get(flag.config_key) if flag.config_key else None
            source = f"{flag.config_key} of context {context_name}"
        if raw is None or raw == "":
            continue
        check = flag.check or parse_bool
        try:
            values[flag.dest] = check(raw)
        except ValueError as exc:
            raise _usage(f"argument {'/'.join(flag.flags)} (from {source}): {exc}") from None


def _read_token(path: str, where: str) -> str:
    try:
        token = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise _usage(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    if not token:
        raise _usage(f"{where}: {path} is empty")
    return token


def _token(
    explicit: Mapping[str, object],
    environ: Mapping[str, str],
    context: Mapping[str, str],
    context_name: str,
) -> str | None:
    """The bearer token, `--token`/`--token-file` being one setting: the first layer that
    names either wins (flag, environment, context). Both in one layer is ambiguous."""
    flag_token, flag_file = explicit.get("token"), explicit.get("token_file")
    if flag_token is not None and flag_file is not None:
        raise _usage("argument --token: give --token or --token-file, not both")
    if flag_token is not None:
        return str(flag_token)
    if flag_file is not None:
        return _read_token(str(flag_file), "argument --token-file")
    env_token, env_file = environ.get("MCSYNC_TOKEN"), environ.get("MCSYNC_TOKEN_FILE")
    if env_token and env_file:
        raise _usage("argument --token: MCSYNC_TOKEN and MCSYNC_TOKEN_FILE are both set; "
                     "unset one")
    if env_token:
        try:
            return parse_text(env_token)
        except ValueError as exc:
            raise _usage(f"argument --token (from MCSYNC_TOKEN): {exc}") from None
    if env_file:
        return _read_token(env_file, "argument --token-file (from MCSYNC_TOKEN_FILE)")
    if context.get("token-file"):
        return _read_token(context["token-file"],
                           f"argument --token-file (from token-file of context {context_name})")
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
    explicit = vars(build_parser().parse_args(_rewrite(list(argv))))
    command = cast(Command, explicit["command"])
    values = dict(explicit)
    config = _load_config(explicit, env, may_be_new=command == "config")
    context_name = str(explicit.get("context") or env.get("MCSYNC_CONTEXT") or "") or None
    try:
        context = config.context(context_name) if command not in ("config", "completion") else {}
    except ConfigError as exc:
        raise _usage(f"argument --context: {exc}") from None
    shown_name = context_name or config.current or ""
    _fill(values, (*_LAYERED, *COMMAND_FLAGS[command]), env, context, shown_name)

    def text(key: str) -> str | None:
        value = values.get(key)
        return str(value) if value is not None else None

    token = None if command in ("config", "completion") else _token(
        explicit, env, context, shown_name
    )
    watch = bool(values.get("watch"))
    if watch and command not in LIST_COMMANDS:
        raise _usage(f"--watch works with the lists ({', '.join(LIST_COMMANDS)}), "
                     f"not `{command}`")
    namespace, cluster, name = text("namespace"), text("cluster"), text("name")
    kind: Kind | None = None
    if command == "get":
        kind = cast(Kind, values["kind"])
        if kind == "export":
            cluster, namespace, name = split_ref(
                str(values["ref"]), what="CLUSTER/NAMESPACE/NAME",
                flag_names=("--cluster", "-n/--namespace"),
                explicit=(explicit.get("cluster"), explicit.get("namespace")),
                fallback=(cluster, namespace),
                checks=(parse_cluster, parse_namespace, parse_service_name),
            )
        elif kind == "cluster":
            name = str(values["ref"])
        else:
            namespace, name = split_ref(
                str(values["ref"]), what="NAMESPACE/NAME", flag_names=("-n/--namespace",),
                explicit=(explicit.get("namespace"),), fallback=(namespace,),
                checks=(parse_namespace, parse_service_name),
            )
    elif command == "endpoints" and values.get("ref") is not None:
        name = _service_ref(str(values["ref"]), explicit.get("namespace"))
        if "/" in str(values["ref"]):
            namespace = str(values["ref"]).split("/")[0]
    elif command == "clusters" and values.get("name") is not None:
        name = str(values["name"])
    elif command in ("clusters register", "clusters deregister"):
        name = str(values["name"])
    output_text = str(values.get("output") or "table")
    output, _, template = output_text.partition("=")
    if output == "name" and command in ("version", "config", "completion"):
        raise _usage(f"argument -o/--output: `{command}` has no object to name")
    conflict = values.get("conflict")
    settings = tuple(
        (key.removeprefix("ctx:"), str(value).lower() if isinstance(value, bool) else str(value))
        for key, value in values.items() if key.startswith("ctx:") and value is not None
    )
    return Options(
        command=command,
        kind=kind,
        hub_url=text("hub_url") or DEFAULT_HUB_URL,
        token=token,
        output=cast(Output, output),
        jsonpath=template if output == "jsonpath" else None,
        watch=watch,
        watch_from_env=watch and not explicit.get("watch"),
        request_timeout=cast(float, values.get("request_timeout") or DEFAULT_REQUEST_TIMEOUT),
        page_size=cast(int, values.get("page_size") or DEFAULT_PAGE_SIZE),
        namespace=namespace,
        cluster=cluster,
        name=name,
        conflict=conflict if isinstance(conflict, bool) else None,
        no_headers=bool(values.get("no_headers")),
        verbose=bool(values.get("verbose")),
        selector=cast(Selector | None, values.get("selector")),
        certificate_authority=text("certificate_authority"),
        insecure_skip_tls_verify=bool(values.get("insecure_skip_tls_verify")),
        labels=tuple(cast(list[tuple[str, str]], values.get("labels") or [])),
        member_token_file=text("member_token_file"),
        overwrite=bool(values.get("overwrite")),
        yes=bool(values.get("yes")),
        client_only=bool(values.get("client_only")),
        config_path=str(config.path),
        context=text("context_name") or context_name,
        config_action=cast(ConfigAction | None, values.get("config_action")),
        context_settings=settings,
        shell=cast(Shell | None, values.get("shell")),
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
        raise _usage(f"{ref!r} names {parts[0]!r}, but -n/--namespace says "
                     f"{explicit_namespace!r}")
    return parts[-1]
