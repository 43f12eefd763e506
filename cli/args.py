"""The command line of `mcsync`, every flag also read from its `MCSYNC_*` variable.

Precedence is flag, then environment, then default (SPEC §7). An environment value goes
through the same check as the flag would, and a bad one stops the program at start with
one line naming the flag, the variable and the problem, exit code 2 — the same as a bad
flag, because it is the same mistake made in another place.

Global options (`--hub-url`, `-o`, `--watch`, …) are accepted before or after the
sub-command (`mcsync -o json exports` and `mcsync exports -o json`), as kubectl accepts
them; the sub-parsers declare them again with suppressed defaults so that a value given
before the sub-command is not overwritten by a default after it.

`parse_args` answers one typed, frozen `Options`; nothing else in the CLI reads argparse
namespaces or the environment.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NoReturn, TypeVar, cast

from shared.models import is_dns1035_label, is_dns1123_label
from shared.version import __version__

DEFAULT_HUB_URL = "http://127.0.0.1:8080"
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_PAGE_SIZE = 500
OUTPUTS = ("table", "wide", "json", "yaml")

Output = Literal["table", "wide", "json", "yaml"]
Command = Literal["clusters", "exports", "imports", "conflicts", "get"]
Kind = Literal["export", "import"]

T = TypeVar("T")


@dataclass(frozen=True)
class Options:
    """Everything one invocation asked for, checked."""

    command: Command
    hub_url: str = DEFAULT_HUB_URL
    token: str | None = None
    output: Output = "table"
    watch: bool = False
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    page_size: int = DEFAULT_PAGE_SIZE
    namespace: str | None = None
    cluster: str | None = None
    name: str | None = None
    conflict: bool | None = None
    kind: Kind | None = None

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


def parse_output(text: str) -> Output:
    value = text.strip().lower()
    if value not in OUTPUTS:
        raise ValueError(f"expected one of {', '.join(OUTPUTS)}, got {text!r}")
    return cast(Output, value)


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


GLOBAL_FLAGS: tuple[_Flag, ...] = (
    _Flag(("--hub-url",), "hub_url", "MCSYNC_HUB_URL", parse_url,
          f"base URL of the hub (default {DEFAULT_HUB_URL})", "URL"),
    _Flag(("--token",), "token", "MCSYNC_TOKEN", parse_text,
          "bearer token (reader or admin); prefer --token-file, a flag shows in `ps`", "TOKEN"),
    _Flag(("--token-file",), "token_file", "MCSYNC_TOKEN_FILE", parse_text,
          "file holding the bearer token", "PATH"),
    _Flag(("-o", "--output"), "output", "MCSYNC_OUTPUT", parse_output,
          "table (default), wide (more columns), json or yaml", "FORMAT"),
    _Flag(("-w", "--watch"), "watch", "MCSYNC_WATCH", None,
          "after listing, follow changes until Ctrl-C (exports)"),
    _Flag(("--request-timeout",), "request_timeout", "MCSYNC_REQUEST_TIMEOUT",
          parse_positive_float,
          f"seconds to wait for each answer (default {DEFAULT_REQUEST_TIMEOUT:g})", "SECONDS"),
    _Flag(("--page-size",), "page_size", "MCSYNC_PAGE_SIZE", parse_page_size,
          f"objects per request when listing (default {DEFAULT_PAGE_SIZE})", "N"),
)

NAMESPACE_FLAG = _Flag(("-n", "--namespace"), "namespace", "MCSYNC_NAMESPACE", parse_namespace,
                       "only this namespace (default: all)", "NS")
CLUSTER_FLAG = _Flag(("--cluster",), "cluster", "MCSYNC_CLUSTER", parse_cluster,
                     "only this member cluster", "CLUSTER")
CONFLICT_FLAG = _Flag(("--conflict",), "conflict", "MCSYNC_CONFLICT", parse_bool,
                      "true: only conflicting; false: only clean", "true|false")
NAME_FLAG = _Flag(("--name",), "name", "MCSYNC_NAME", parse_service_name,
                  "only services of this name", "NAME")


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


def _add_globals(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    group = parser.add_argument_group("global options")
    for flag in GLOBAL_FLAGS:
        _add(group, flag, suppress=suppress)  # type: ignore[arg-type]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error raises instead of exiting, so `main` owns exit codes."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mcsync",
        description="Query an mcsync hub: member clusters, exported services, conflicts.",
        epilog="Exit codes: 0 ok (also an empty result); 1 not found, API error or hub "
        "unreachable; 2 usage error.",
    )
    parser.add_argument("--version", action="version", version=f"mcsync {__version__}")
    _add_globals(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    def command(name: str, help_text: str, *flags: _Flag) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        for flag in flags:
            _add(sub, flag, suppress=False)
        _add_globals(sub, suppress=True)
        return sub

    clusters = command("clusters", "list member clusters with state and export counts")
    clusters.add_argument("name", nargs="?", metavar="NAME", help="only this cluster")
    command("exports", "list exported services (every cluster's export)",
            NAMESPACE_FLAG, CLUSTER_FLAG, CONFLICT_FLAG, NAME_FLAG)
    command("imports", "list derived ServiceImports (one per exported service)",
            NAMESPACE_FLAG, CONFLICT_FLAG)
    command("conflicts", "list conflicting services: winner, disputed fields, losers",
            NAMESPACE_FLAG)

    get = commands.add_parser("get", help="show one export or import in detail",
                              description="show one export or import in detail")
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
    _add_globals(get, suppress=True)
    return parser


# --- from parsed values to Options ------------------------------------------------------

COMMAND_FLAGS: Mapping[str, tuple[_Flag, ...]] = {
    "clusters": (),
    "exports": (NAMESPACE_FLAG, CLUSTER_FLAG, CONFLICT_FLAG, NAME_FLAG),
    "imports": (NAMESPACE_FLAG, CONFLICT_FLAG),
    "conflicts": (NAMESPACE_FLAG,),
    "get": (NAMESPACE_FLAG, CLUSTER_FLAG),
}


def _usage(message: str) -> UsageError:
    return UsageError(f"mcsync: error: {message}")


def _from_env(
    values: dict[str, object], flags: Sequence[_Flag], environ: Mapping[str, str]
) -> None:
    """Fill each flag left unset from its environment variable, checked like the flag."""
    for flag in flags:
        if values.get(flag.dest) not in (None, False):
            continue
        raw = environ.get(flag.env)
        if raw is None or raw == "":
            continue
        check = flag.check or parse_bool
        try:
            values[flag.dest] = check(raw)
        except ValueError as exc:
            raise _usage(f"argument {'/'.join(flag.flags)} (from {flag.env}): {exc}") from None


def _read_token(path: str) -> str:
    try:
        token = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise _usage(f"argument --token-file: cannot read {path}: {exc.strerror or exc}") from None
    if not token:
        raise _usage(f"argument --token-file: {path} is empty")
    return token


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


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Options:
    """Parse `argv` (without the program name); UsageError on any mistake."""
    env = os.environ if environ is None else environ
    explicit = vars(build_parser().parse_args(list(argv)))
    command = cast(Command, explicit["command"])
    values = dict(explicit)
    _from_env(values, (*GLOBAL_FLAGS, *COMMAND_FLAGS[command]), env)

    def text(key: str) -> str | None:
        value = values.get(key)
        return str(value) if value is not None else None

    token = text("token")
    token_file = text("token_file")
    if token is None and token_file is not None:
        token = _read_token(token_file)
    watch = bool(values.get("watch"))
    if watch and command != "exports":
        raise _usage(f"--watch works with `exports`, not `{command}`")
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
        else:
            namespace, name = split_ref(
                str(values["ref"]), what="NAMESPACE/NAME", flag_names=("-n/--namespace",),
                explicit=(explicit.get("namespace"),), fallback=(namespace,),
                checks=(parse_namespace, parse_service_name),
            )
    conflict = values.get("conflict")
    return Options(
        command=command,
        kind=kind,
        hub_url=text("hub_url") or DEFAULT_HUB_URL,
        token=token,
        output=cast(Output, values.get("output") or "table"),
        watch=watch,
        request_timeout=cast(float, values.get("request_timeout") or DEFAULT_REQUEST_TIMEOUT),
        page_size=cast(int, values.get("page_size") or DEFAULT_PAGE_SIZE),
        namespace=namespace,
        cluster=cluster,
        name=name,
        conflict=conflict if isinstance(conflict, bool) else None,
    )
