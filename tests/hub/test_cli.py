"""`python -m hub` refuses bad configuration at start (docs/reference.md#flags): exit 2, one line
naming it.

The process cases run the real program as a subprocess in an empty working directory,
with a clean `MCSYNC_*` environment, and check that stderr is exactly one line naming the
flag or variable, that no secret is echoed, and that nothing was created on the way out:
a bad flag, a bad variable, a bad database URL of each command, a bad token file (refused
after the flags were read) and an unknown flag. The other bad values take the same path
through `main` (`parse` raises `UsageError`, printed as it is, exit 2) and are checked
in-process on `parse`, which is what tells them apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.settingscli import UsageError

REPO = Path(__file__).resolve().parents[2]


def run_hub(
    args: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCSYNC_")}
    clean["PYTHONPATH"] = str(REPO)
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "hub", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


# Refused while the flags are read: the message is all that differs.
PARSE_ERRORS = [
    (["serve", "--port", "0"], {}, "--port", "greater than or equal to 1"),
    (["--cluster-ttl", "-1"], {}, "--cluster-ttl", "greater than 0"),
    # docs/reference.md#failover: three of the agent's shortest heartbeat interval (1 s) at
    # least.
    (["--cluster-ttl", "2.5"], {}, "--cluster-ttl", "at least 3 seconds"),
    (["--stale-panic-fraction", "0"], {}, "--stale-panic-fraction", "in (0, 1]"),
    (["--stale-panic-fraction", "1.5"], {}, "--stale-panic-fraction", "in (0, 1]"),
    (["--log-format", "xml"], {}, "--log-format", "'json' or 'text'"),
    (["--max-body-bytes", "lots"], {}, "--max-body-bytes", "integer"),
    (["--min-agent-version", "banana"], {}, "--min-agent-version", "not a version"),
    (["--clusterset-name", "Prod_Set"], {}, "--clusterset-name", "RFC 1123 DNS subdomain"),
    ([], {"MCSYNC_CLUSTERSET_NAME": "a" * 128}, "MCSYNC_CLUSTERSET_NAME", "at most 127"),
    (["--database-url", "postgresql://u@h1,h2/db?target_session_attrs=primry"], {},
     "--database-url", "target_session_attrs 'primry' is not one of"),
    (["--database-timeout-seconds", "0"], {}, "--database-timeout-seconds", "greater than 0"),
    ([], {"MCSYNC_DATABASE_TIMEOUT_SECONDS": "soon"}, "MCSYNC_DATABASE_TIMEOUT_SECONDS",
     "number"),
    ([], {"MCSYNC_PORT": "http"}, "MCSYNC_PORT", "integer"),
    ([], {"MCSYNC_CLUSTER_TTL": "0"}, "MCSYNC_CLUSTER_TTL", "greater than 0"),
    ([], {"MCSYNC_LOG_FORMAT": "yaml"}, "MCSYNC_LOG_FORMAT", "'json' or 'text'"),
    ([], {"MCSYNC_MIGRATE": "perhaps"}, "MCSYNC_MIGRATE", "boolean"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "env", "named", "problem"), PARSE_ERRORS)
def test_bad_value_is_one_line_naming_it(
    args: list[str], env: dict[str, str], named: str, problem: str
) -> None:
    from hub.__main__ import parse

    with pytest.raises(UsageError) as caught:
        parse(args, environ=env)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith("mcsync-hub: error: argument ")
    assert named in line
    assert problem in line


@pytest.mark.parametrize(
    ("args", "env", "named", "problem"),
    [
        (["--port", "abc"], {}, "--port", "integer"),
        ([], {"MCSYNC_STALE_PANIC_FRACTION": "-0.2"}, "MCSYNC_STALE_PANIC_FRACTION", "in (0, 1]"),
        (["--database-url", "mysql://u@db/x"], {}, "--database-url", "unsupported"),
        (["migrate", "--database-url", "ftp://x"], {}, "--database-url", "unsupported"),
        (["--database-url", "postgresql://u:hunter2@h1:x,h2/db"], {}, "--database-url",
         "the port 'x' of host 1"),
        (["--no-such-flag"], {}, "--no-such-flag", "unrecognized"),
        (["--reader-token-file", "missing-file"], {}, "--reader-token-file", "does not exist"),
        # A mistyped explicit path is an error; only the default location is ever created.
        (["--admin-token-file", "mistyped-token"], {}, "--admin-token-file", "does not exist"),
        (["--admin-token-file", "/nonexistent"], {}, "--admin-token-file", "does not exist"),
    ],
)
def test_bad_value_stops_at_start_with_one_line(
    tmp_path: Path, args: list[str], env: dict[str, str], named: str, problem: str
) -> None:
    result = run_hub(args, cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert named in lines[0]
    assert problem in lines[0]
    assert "Traceback" not in result.stderr
    assert "hunter2" not in result.stderr
    # A refused start leaves nothing behind: no database, no generated token file.
    assert list(tmp_path.iterdir()) == []


def test_unreachable_database_is_one_line_without_the_password(tmp_path: Path) -> None:
    """Exit 3, not the bad-usage 2: nothing is wrong with the flags, and a retry may work."""
    url = "postgresql://mcsync:hunter2secret@127.0.0.1:1/mcsync"
    for args in (["--database-url", url], ["migrate", "--database-url", url]):
        result = run_hub(args, cwd=tmp_path)
        assert result.returncode == 3, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert "--database-url" in lines[0]
        assert "hunter2secret" not in result.stderr
        assert list(tmp_path.iterdir()) == []


def test_conflicting_token_sources_are_refused_without_echoing_the_token(tmp_path: Path) -> None:
    result = run_hub(
        ["--admin-token-file", "admin-token"],
        cwd=tmp_path,
        env={"MCSYNC_ADMIN_TOKEN": "very-secret-admin-token"},
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "MCSYNC_ADMIN_TOKEN" in result.stderr
    assert "very-secret-admin-token" not in result.stderr


def test_migrate_applies_the_schema_and_exits_0(tmp_path: Path) -> None:
    result = run_hub(
        ["migrate", "--database-url", f"sqlite:///{tmp_path / 'hub.db'}"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "hub.db").exists()
    assert not (tmp_path / "mcsync-admin-token").exists()  # migrate needs no token

    from hub.store import migrate

    assert migrate.current(f"sqlite:///{tmp_path / 'hub.db'}") == migrate.head()


def test_help_lists_every_flag_with_its_variable(tmp_path: Path) -> None:
    result = run_hub(["serve", "--help"], cwd=tmp_path)
    assert result.returncode == 0
    for flag, variable in (
        ("--port", "MCSYNC_PORT"),
        ("--database-url", "MCSYNC_DATABASE_URL"),
        ("--no-migrate", "MCSYNC_MIGRATE"),
        ("--cluster-ttl", "MCSYNC_CLUSTER_TTL"),
        ("--stale-panic-fraction", "MCSYNC_STALE_PANIC_FRACTION"),
        ("--admin-token-file", "MCSYNC_ADMIN_TOKEN_FILE"),
    ):
        assert flag in result.stdout
        assert variable in result.stdout


def test_the_hub_listens_on_loopback_unless_told_otherwise() -> None:
    """README's first command starts a hub with a fresh admin token: on a workstation it
    must not be reachable from the network by default. The image and the chart, where the
    container is the boundary, ask for every interface explicitly."""
    from hub.__main__ import parse

    assert parse([], environ={})[1].host == "127.0.0.1"
    dockerfile = (REPO / "Dockerfile").read_text()
    assert 'CMD ["mcsync-hub", "serve", "--host", "0.0.0.0"]' in dockerfile
    deployment = (REPO / "helm" / "mcsync-hub" / "templates" / "deployment.yaml").read_text()
    assert "- --host=0.0.0.0" in deployment


def test_help_shows_the_serve_flags_every_variable_and_the_exit_codes(tmp_path: Path) -> None:
    from hub.settings import HubSettings
    from shared.settingscli import settings_of

    result = run_hub(["--help"], cwd=tmp_path)
    assert result.returncode == 0
    for setting in settings_of(HubSettings):
        assert setting.env in result.stdout, setting.env
        assert all(flag in result.stdout for flag in setting.flags), setting.flags
    for variable in ("MCSYNC_ADMIN_TOKEN", "MCSYNC_READER_TOKEN", "MCSYNC_MIGRATE"):
        assert variable in result.stdout
    assert "  3  the database did not answer" in result.stdout


def test_reading_the_flags_imports_no_server_app_or_store() -> None:
    """Most starts the suite makes, and a mistyped flag's, end while the flags are read:
    `hub.__main__` imports the server, the app and the store only once they were accepted
    (docs/decisions.md#start-up-cost)."""
    code = "import sys, hub.__main__; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    heavy = {"uvicorn", "fastapi", "starlette", "alembic", "asyncpg", "aiosqlite",
             "sqlalchemy.ext.asyncio", "hub.store", "hub.app", "hub.serve"}  # fmt: skip
    assert not heavy & loaded, sorted(heavy & loaded)
