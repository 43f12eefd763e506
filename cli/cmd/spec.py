"""What a command module declares to the parser and to the dispatcher: `Spec`.

A command owns its words, its help, its flags and its run function (kubectl's one package
per command under `pkg/cmd`); `cli.args` builds the parser from the specs, in their order,
and `cli.dispatch` runs the one named. The settings a command reads (`CliSettings` fields:
its flags, and the only `MCSYNC_*` variables and context keys it heeds) are named here too,
so the parser's flags and the layers `parse_args` resolves cannot drift apart.

`Toolkit` is the little of `cli.args` a command's flags need (the settings' flags, the
global options), handed in rather than imported, so that `cli.args` can import the
command modules without a cycle.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from cli.commands import Context


class Toolkit(Protocol):
    def settings(self, parser: argparse.ArgumentParser, *fields: str,
                 dest_prefix: str = "") -> None:
        """Add the flags of these `CliSettings` fields."""

    def globals(self, parser: argparse.ArgumentParser, *,
                exclude: frozenset[str] = frozenset()) -> None:
        """Add the global options (those in `exclude` aside: the command declares them)."""


def no_flags(parser: argparse.ArgumentParser) -> None:
    """A command with no flags of its own beside its settings."""


@dataclass(frozen=True)
class Spec:
    """One command.

    `flags` adds the command's own arguments to its sub-parser (made by `cli.args` with
    `settings`' flags and the global options). A list `watches` (it takes `--watch`, and
    `MCSYNC_WATCH` applies to it); an `offline` command speaks to no hub, so neither a
    token nor the config file's context is read for it. A command whose words go deeper (`get KIND`,
    `config ACTION`) builds its sub-parser itself with `parser`, given the sub-parsers of
    `mcsync` and the toolkit.
    """

    name: str
    help: str
    run: Callable[[Context], int]
    flags: Callable[[argparse.ArgumentParser], None] = no_flags
    settings: tuple[str, ...] = ()
    exclude_globals: frozenset[str] = frozenset()
    parser: Callable[[Any, Toolkit], None] | None = None
    watches: bool = False
    offline: bool = False
