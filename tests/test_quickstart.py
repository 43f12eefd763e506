"""docs/quickstart.md stays followable: every command of ours in it parses as written.

The quickstart was walked end to end when it was written; this keeps it honest when flags
change later. Each `mcsync`, `mcsync-hub` and `mcsync-agent` command in its shell blocks is
parsed by the program's own argument parser (nothing is run), with no `MCSYNC_*` variable
set except those the quickstart itself exports; files of the repository it names must exist.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from cli.args import parse_args as parse_cli
from hub.__main__ import parse as parse_hub
from member.settings import parse_args as parse_agent

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "docs" / "quickstart.md"
PROGRAM = re.compile(r"^\.venv/bin/(mcsync(?:-hub|-agent)?)\s")


def shell_commands(markdown: str) -> list[str]:
    """Commands of the ```sh blocks, continuation lines joined, split at `;` and `&&`."""
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", markdown, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            commands.extend(part.strip() for part in re.split(r";|&&", line) if part.strip())
    return commands


def ours(commands: list[str]) -> list[tuple[str, list[str]]]:
    found = []
    for command in commands:
        match = PROGRAM.match(command)
        if match:
            found.append((match.group(1), shlex.split(command)[1:]))
    return found


def exported_variables(commands: list[str]) -> dict[str, str]:
    pairs = (c.removeprefix("export ").split("=", 1) for c in commands if c.startswith("export "))
    return {name: value for name, value in pairs}


def test_every_command_of_ours_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    commands = shell_commands(QUICKSTART.read_text())
    environ = exported_variables(commands)
    assert environ.keys() == {"MCSYNC_HUB_URL", "MCSYNC_TOKEN_FILE"}
    # The token file is read at parse time; any readable file stands in for it.
    environ["MCSYNC_TOKEN_FILE"] = str(QUICKSTART)
    found = ours(commands)
    assert {program for program, _ in found} == {"mcsync", "mcsync-hub", "mcsync-agent"}
    for name in [n for n in os.environ if n.startswith("MCSYNC_")]:
        monkeypatch.delenv(name)
    for program, argv in found:
        if program == "mcsync":
            parse_cli(argv, environ)
        elif program == "mcsync-hub":
            parse_hub(argv)
        else:
            parse_agent(argv)


def test_files_it_names_exist_and_the_readme_links_it() -> None:
    text = QUICKSTART.read_text()
    for path in set(re.findall(r"(?:helm|docs)/[\w./-]+\.(?:yaml|md)", text)):
        assert (REPO / path).is_file(), path
    for link in re.findall(r"\]\(([\w./-]+\.md)\)", text):
        assert (QUICKSTART.parent / link).is_file(), link
    assert "docs/quickstart.md" in (REPO / "README.md").read_text()


@pytest.mark.parametrize(
    "path",
    [
        "mcsync-admin-token",
        "dev.token",
        "dev-2.token",
        "dev.kubeconfig",
        ".mcsync/dev.token",
        ".mcsync/admin-token",
        ".mcsync/dev-2.kubeconfig",
        ".mcsync/mcsync.db",
    ],
)
def test_credentials_the_quickstart_writes_are_never_committed(path: str) -> None:
    """`git add -A` after the quickstart must not pick up a token or a kubeconfig."""
    import subprocess

    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", path], cwd=REPO, timeout=30, check=False
    )
    assert result.returncode == 0, f"{path} is not ignored by .gitignore"


def test_its_sample_outputs_are_what_the_programs_print_today() -> None:
    """The samples a newcomer compares their screen with: the clusters table's columns,
    `/readyz`'s words, the schema revision the hub logs, the line saying where the hub
    listens, and one MCS API version throughout."""
    from cli import render
    from hub.store import migrate

    text = QUICKSTART.read_text()
    header = re.compile(r"^NAME\s+STATE\s+LAST-HEARTBEAT\b.*$", re.M)
    tables = header.findall(text)
    assert tables, "the quickstart shows `mcsync clusters`"
    for line in tables:
        assert tuple(line.split()) == render.CLUSTER_HEADERS, line
    for revision in re.findall(r"database schema at head .*revision=(\S+)", text):
        assert revision == migrate.head()
    assert '"message":"database reachable (writable), schema at head"' in text
    assert "mcsync hub listening on http://127.0.0.1:8080 (console " in text
    assert "multicluster.x-k8s.io/v1alpha1" not in text
