"""One settings layer for `mcsync-hub`, `mcsync-agent` and `mcsync`: flags, environment and
config file in, one validated pydantic model out.

Each program describes what it can be told once, as a `ProgramSettings` model (field,
type, default, description, validators); everything else is derived from that model here,
so the three programs cannot drift apart:

* the argparse flags (`--field-name`, or the names a `Flag` marker gives), which only
  collect text: every check is the model's, so a flag, its variable and its config-file
  key can never disagree about what is valid;
* the environment variable of every field (`MCSYNC_FIELD_NAME`), and the config-file key
  (`field-name`, as the CLI's contexts already spelled them);
* the precedence, the same everywhere: flag, then environment variable, then config file,
  then the model's default (`resolve`). An empty variable counts as unset;
* the one line a bad value gives: `PROG: error: argument --flag (from SOURCE): problem`,
  naming the flag even when the value came from a variable or the file (`validate`); the
  caller exits 2, the bad-usage code, whichever layer the mistake was made in;
* the "Environment variables:" section of `--help`, listing every `MCSYNC_*` variable
  the program reads with its flag (`environment_help`).

pydantic-settings and its CLI source (`CliSettingsSource`) were the other candidate. Its
CLI decides its own help layout, error text and exit handling, knows no config-file layer
between the environment and the defaults, and cannot express the CLI's kubectl-style
sub-commands with global flags on either side of them; and `mcsync` itself must install
with pydantic alone (`pip install mcsync`, no server packages). So the models are plain
pydantic models, built only from what they are given, and this module reads the layers:
the environment is read in one place, from a mapping a test can pass.
"""

from __future__ import annotations

import argparse
import difflib
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ENV_PREFIX = "MCSYNC_"
PRECEDENCE = "flag > environment variable > config file > default"

M = TypeVar("M", bound="ProgramSettings")


class UsageError(Exception):
    """A mistake in how a program was called or configured: the one line to print, exit 2."""


@dataclass(frozen=True)
class Flag:
    """How a field shows on the command line, where `--field-name` is not what it needs.

    `names` replaces the flag's spellings (`-o`, `--output`); `const` makes a switch that
    stores that value (`--no-migrate` stores False); `environment_only` keeps a secret off
    the command line, where `ps` would show it, and out of the config file; `echo=False`
    keeps a value out of error lines (a database URL may carry a password)."""

    names: tuple[str, ...] = ()
    metavar: str | None = None
    const: Any = None
    environment_only: bool = False
    echo: bool = True


@dataclass(frozen=True)
class Setting:
    """One field of a settings model, as the command line, the environment and the config
    file know it."""

    field: str
    flags: tuple[str, ...]  # () for a setting read only from the environment
    env: str
    key: str  # in the config file
    help: str
    metavar: str | None
    action: Literal["store", "store_const", "append"]
    const: Any
    echo: bool
    required: bool

    @property
    def name(self) -> str:
        """How errors and help name it: its flags, or its variable when it has none."""
        return "/".join(self.flags) or self.env


class ProgramSettings(BaseModel):
    """The base of the three programs' settings models: built only from its arguments
    (this module reads the environment and the config file, and passes what applies)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    config: Path | None = Field(
        default=None,
        description="YAML file of settings, keyed by flag name without the dashes",
    )


def _marker(info: FieldInfo) -> Flag:
    return next((m for m in info.metadata if isinstance(m, Flag)), Flag())


def _members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _default_text(info: FieldInfo) -> str:
    default = info.default
    if default is PydanticUndefined or default is None or info.default_factory is not None:
        return ""
    if isinstance(default, bool):
        return f" (default {str(default).lower()})"
    if isinstance(default, list | tuple):
        return f" (default {','.join(map(str, default))})" if default else ""
    return f" (default {default})"


def _setting(field: str, info: FieldInfo) -> Setting:
    marker = _marker(info)
    members = _members(info.annotation)
    is_list = any(get_origin(m) is list for m in members)
    is_switch = info.annotation is bool or marker.const is not None
    secret = any(m is SecretStr for m in members)
    flags = () if marker.environment_only else marker.names or ("--" + field.replace("_", "-"),)
    text = info.description or field.replace("_", " ")
    if is_list:
        text += " (repeatable; comma-separated in the variable)"
    return Setting(
        field=field,
        flags=flags,
        env=ENV_PREFIX + field.upper(),
        key=field.replace("_", "-"),
        help=text + ("" if is_switch else _default_text(info)),
        metavar=marker.metavar,
        action="append" if is_list else "store_const" if is_switch else "store",
        const=True if marker.const is None else marker.const,
        echo=marker.echo and not secret,
        required=info.is_required(),
    )


@cache
def settings_of(model: type[ProgramSettings]) -> tuple[Setting, ...]:
    """Every setting of `model`, in the order of its fields."""
    return tuple(_setting(name, info) for name, info in model.model_fields.items())


def pick(model: type[ProgramSettings], *fields: str) -> tuple[Setting, ...]:
    """The settings of `model` named by `fields`, in that order."""
    by_field = {s.field: s for s in settings_of(model)}
    return tuple(by_field[field] for field in fields)


# --- the command line ---------------------------------------------------------------------


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error raises `UsageError` (one line) instead of printing the
    usage and exiting, so that each program owns its exit codes."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog.split()[0]}: error: {message}{self._did_you_mean(message)}")

    def _did_you_mean(self, message: str) -> str:
        """"; did you mean --port?" for an unrecognised flag close to one this program (or
        any of its sub-commands) knows: a typo should cost one glance, not a `--help`."""
        found = re.match(r"unrecognized arguments: (-[^\s=]+)", message)
        if found is None:
            return ""
        close = difflib.get_close_matches(found.group(1), sorted(_option_strings(self)), n=1)
        return f"; did you mean {close[0]}?" if close else ""


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every long flag of `parser` and of its sub-commands' parsers."""
    flags: set[str] = set()
    for action in parser._actions:
        flags.update(flag for flag in action.option_strings if flag.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _option_strings(sub)
    return flags


def add_flags(
    parser: argparse.ArgumentParser | Any, settings: Sequence[Setting], *, dest_prefix: str = ""
) -> None:
    """Add each setting's flag to `parser` (a parser or an argument group). A flag not given
    is absent from the namespace, never a default: that is how `resolve` tells the layers
    apart, and how a global flag given before a sub-command survives the sub-parser.
    `dest_prefix` files the values apart, for flags that write a setting somewhere (the
    CLI's `config set-context`) rather than apply it; their variables do not apply."""
    for setting in settings:
        if not setting.flags:
            continue
        help_text = setting.help if dest_prefix else f"{setting.help} [env {setting.env}]"
        dest = dest_prefix + setting.field
        if setting.action == "store_const":
            parser.add_argument(
                *setting.flags, dest=dest, action="store_const", const=setting.const,
                default=argparse.SUPPRESS, help=help_text,
            )  # fmt: skip
        else:
            parser.add_argument(
                *setting.flags, dest=dest, action=setting.action, default=argparse.SUPPRESS,
                metavar=setting.metavar, help=help_text,
            )  # fmt: skip


def environment_help(settings: Sequence[Setting]) -> str:
    """The `--help` section naming every variable of `settings`, its flag and its meaning."""
    rows = []
    for setting in settings:
        flag = setting.flags[-1] if setting.flags else "(no flag)"
        if setting.action == "store_const" and setting.const is False:
            flag += "  (=false)"
        rows.append((setting.env, flag, setting.help))
    env_width = max(len(env) for env, _, _ in rows) + 2
    flag_width = max(len(flag) for _, flag, _ in rows) + 2
    lines = [f"Environment variables ({PRECEDENCE}):"]
    lines += [f"  {env:<{env_width}}{flag:<{flag_width}}{text}" for env, flag, text in rows]
    return "\n".join(lines)


# --- the layers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Layers:
    """What one start of a program was told, layer by layer. `given` is the namespace of
    the flags given (by field); `file` holds the config file's values by key, and
    `file_name` says where they came from in error lines ("context prod", a path)."""

    given: Mapping[str, Any]
    environ: Mapping[str, str]
    file: Mapping[str, Any]
    file_name: str = ""


def resolve(settings: Sequence[Setting], layers: Layers) -> tuple[dict[str, Any], dict[str, str]]:
    """The value of each setting that any layer sets (flag > environment > file; the
    model's default otherwise), and where each came from: "flag", the variable's name, or
    "KEY of FILE"."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in settings:
        raw = layers.environ.get(setting.env)
        if setting.field in layers.given:
            values[setting.field], sources[setting.field] = layers.given[setting.field], "flag"
        elif raw:
            values[setting.field], sources[setting.field] = raw, setting.env
        elif setting.flags and layers.file.get(setting.key) not in (None, ""):
            values[setting.field] = layers.file[setting.key]
            sources[setting.field] = f"{setting.key} of {layers.file_name}"
    return values, sources


def problem(prog: str, setting: Setting, source: str | None, message: str) -> UsageError:
    """The one line of a bad value of `setting`, naming its flag and where the value came
    from when that was not the command line."""
    where = f"argument {setting.name}" if setting.flags else setting.env
    if source not in (None, "flag") and (setting.flags or source != setting.env):
        where += f" (from {source})"
    return UsageError(f"{prog}: error: {where}: {message}")


def _one_line(
    prog: str, error: Mapping[str, Any], settings: Sequence[Setting], sources: Mapping[str, str]
) -> UsageError:
    loc = [part for part in error.get("loc", ()) if isinstance(part, str)]
    message = " ".join(str(error.get("msg", "invalid value")).removeprefix("Value error, ").split())
    by_field = {s.field: s for s in settings}
    if not loc or loc[0] not in by_field:
        return UsageError(f"{prog}: error: {message}")
    setting = by_field[loc[0]]
    if error.get("type") == "missing":
        return UsageError(
            f"{prog}: error: argument {setting.name}: is required (or set {setting.env})"
        )
    value = error.get("input")
    if setting.echo and isinstance(value, str | int | float) and len(str(value)) < 200:
        if str(value) not in message:
            message = f"{message} (got {str(value)!r})"
    return problem(prog, setting, sources.get(setting.field), message)


def validate(
    model: type[M],
    values: Mapping[str, Any],
    sources: Mapping[str, str],
    *,
    prog: str,
) -> M:
    """`model` from `values`; its first problem as a one-line `UsageError`."""
    try:
        return model(**values)
    except ValidationError as exc:
        raise _one_line(prog, exc.errors()[0], settings_of(model), sources) from None


def read_file(path: Path, settings: Sequence[Setting], *, prog: str) -> dict[str, Any]:
    """The settings of a `--config` file: a YAML mapping of keys (flag names without the
    dashes) to values; an unknown key, an unreadable or unparseable file is one line."""

    import yaml  # only when a file is given: most starts have none

    def bad(message: str) -> UsageError:
        return UsageError(f"{prog}: error: argument --config: {message}")

    try:
        data = yaml.safe_load(path.expanduser().read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise bad(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise bad(f"{path} is not YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise bad(f"{path}: expected a mapping of settings")
    known = [s.key for s in settings if s.flags and s.field != "config"]
    for key in data:
        if key not in known:
            raise bad(f"{path}: unknown key {key!r} (known: {', '.join(known)})")
    return {str(k): v for k, v in data.items()}


def load(
    model: type[M],
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
    environ: Mapping[str, str],
    *,
    settings: Sequence[Setting] | None = None,
) -> tuple[M, dict[str, Any]]:
    """`model` from `argv` over `environ` over the `--config` file over the defaults, for a
    program whose every flag is a setting of `model` (`settings`, all of them unless
    given); also answers the rest of the parsed namespace (a sub-command's name)."""
    chosen = settings_of(model) if settings is None else settings
    prog = parser.prog
    namespace = vars(parser.parse_args(list(argv)))
    fields = {s.field for s in chosen}
    given = {k: v for k, v in namespace.items() if k in fields}
    rest = {k: v for k, v in namespace.items() if k not in fields}
    config = given.get("config") or environ.get(ENV_PREFIX + "CONFIG") or None
    file = read_file(Path(config), settings_of(model), prog=prog) if config else {}
    values, sources = resolve(chosen, Layers(given, environ, file, str(config)))
    return validate(model, values, sources, prog=prog), rest
