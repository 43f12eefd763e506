"""`mcsync-hub` (also `python -m hub`): run the hub, or apply its migrations
(docs/reference.md#flags).

    mcsync-hub [serve] [--host H] [--port P] [--database-url URL] [--no-migrate] …
    mcsync-hub migrate [--database-url URL]

Every flag has an `MCSYNC_*` environment variable and a key of the `--config` file (the
tokens themselves are environment or file only: a flag would show them in `ps`); a flag
beats its variable, which beats the file. The flags, that precedence and `--help`'s list of
variables come from `HubSettings` through `shared.settingscli`, as the agent's and the
CLI's do. argparse only collects strings; all validation happens once, in `HubSettings`,
so a flag and its variable can never disagree about what is valid.

Anything wrong at start ends the program with ONE line on stderr naming the flag (and the
variable or file it came from) and the problem, never a traceback, and an exit code that
tells a mistake from an outage: 2 for a bad value, an unusable token file (one that
others could read or replace included) or an
unsupported database URL (fix the configuration), 3 for a database that does not answer
(a restart may succeed: an orchestrator should retry, a script should not report a typo)
or whose server refuses the hub's database or role (the line says what to create), 4 for
a port another process holds.

The flags are parsed and validated, and `--help`, a bad value or a "did you mean" printed,
before anything of the server, the app or the store is imported (`hub.serve` runs them):
a process that only refuses its flags stays cheap (docs/decisions.md#start-up-cost).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

from hub.api.credentials import CredentialsError, check_token_sources
from hub.logs import configure_logging
from hub.settings import HubSettings, sqlite_file
from hub.sqliteclaim import missing_directory
from hub.startup import EXIT_CODES, EXIT_CONFIG, StartupError
from shared import settingscli
from shared.version import __version__

PROG = "mcsync-hub"
# `migrate` takes these of the serve flags; everything else is serve's alone.
MIGRATE_SETTINGS = settingscli.pick(
    HubSettings, "config", "database_url", "log_format", "log_level"
)


def build_parser() -> argparse.ArgumentParser:
    """`serve` (the default) and `migrate`, their flags made from `HubSettings`. The top
    level's help lists every variable with its serve flag, and the exit codes."""
    every = settingscli.settings_of(HubSettings)
    epilog = f"{settingscli.environment_help(every)}\n\n{EXIT_CODES}"
    parser = settingscli.OneLineParser(
        prog=PROG,
        description="The mcsync hub: REST API over a database. `serve` is the default "
        "command; `mcsync-hub serve --help` explains each flag.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{serve,migrate}")
    for name, settings, text in (
        ("serve", every, "run the hub (the default)"),
        ("migrate", MIGRATE_SETTINGS, "apply the database migrations and exit"),
    ):
        sub = commands.add_parser(
            name,
            help=text,
            description=text,
            epilog=f"{settingscli.environment_help(settings)}\n\n{EXIT_CODES}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        settingscli.add_flags(sub, settings)
    return parser


def parse(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> tuple[str, HubSettings]:
    """The sub-command and its settings (flag > environment > `--config` file > default);
    `UsageError`, one line naming the flag, when any is bad."""
    args = list(argv)
    if not args or args[0] not in ("serve", "migrate", "-h", "--help", "--version"):
        args.insert(0, "serve")  # `serve` is the default subcommand
    command = "migrate" if args[0] == "migrate" else "serve"
    settings, _ = settingscli.load(
        HubSettings,
        build_parser(),
        args,
        os.environ if environ is None else environ,
        settings=MIGRATE_SETTINGS if command == "migrate" else None,
    )
    return command, settings


def check_before_serving(settings: HubSettings) -> None:
    """What `serve` refuses before the server, the app or the store is imported: a SQLite
    database whose directory does not exist, an unusable token file (StartupError)."""
    database = sqlite_file(settings.database_url)
    if database is not None and (missing := missing_directory(database)) is not None:
        raise StartupError(missing)
    try:
        check_token_sources(settings)
    except CredentialsError as exc:
        raise StartupError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    try:
        command, settings = parse(sys.argv[1:] if argv is None else argv)
    except settingscli.UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_CONFIG
    # Everything the hub creates (the SQLite database, its WAL and SHM files, the generated
    # admin token file) is its owner's alone: mode 0600 (docs/reference.md#credentials).
    os.umask(0o077)
    try:
        configure_logging(log_format=settings.log_format, level=settings.log_level)
        if command == "migrate":
            from hub.serve import run_migrate

            return run_migrate(settings)
        check_before_serving(settings)
        from hub.serve import run_serve

        return run_serve(settings)
    except StartupError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
