"""Each command's module declares it once (`cli.cmd`): the parser, the dispatcher, the
settings each command reads, which commands watch and which speak to no hub all come
from those declarations, so they agree with the typed `Options.command`."""

from __future__ import annotations

from typing import get_args

from cli import args
from cli.args import CliSettings, parse_args
from cli.cmd import BY_NAME, COMMANDS
from cli.options import Command


def test_every_command_is_declared_once_and_typed() -> None:
    names = [spec.name for spec in COMMANDS]
    assert len(names) == len(set(names))
    assert set(names) == set(get_args(Command))


def test_a_commands_settings_are_settings_and_the_lists_watch() -> None:
    for spec in COMMANDS:
        assert set(spec.settings) <= set(CliSettings.model_fields), spec.name
    assert args.LIST_COMMANDS == ("clusters", "exports", "imports", "endpoints", "conflicts")
    assert all(BY_NAME[name].watches for name in args.LIST_COMMANDS)


def test_an_offline_command_reads_no_token() -> None:
    environ = {"MCSYNC_TOKEN_FILE": "/nonexistent/token", "HOME": "/nonexistent"}
    assert parse_args(["completion", "bash"], environ).token is None
    assert BY_NAME["completion"].offline and not BY_NAME["clusters"].offline
