"""What `pip install mcsync` gives an operator, and the one version source.

The CLI must install and run without the hub's and the agent's dependencies (a laptop
with the CLI has no business compiling asyncpg), every program's extras must carry what
that program imports, and the version must come from one place that the charts follow.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from shared.version import __version__

REPO = Path(__file__).resolve().parents[1]
# Imported by the hub or the agent, never by the CLI.
SERVER_PACKAGES = (
    "fastapi",
    "uvicorn",
    "sqlalchemy",
    "asyncpg",
    "aiosqlite",
    "alembic",
    "kubernetes",
    "opentelemetry",
    "prometheus_client",
    "orjson",
    "pydantic_settings",
)


def _requirements(extra: str | None) -> set[str]:
    names: set[str] = set()
    for text in metadata.requires("mcsync") or []:
        req = Requirement(text)
        if extra is None and req.marker is None:
            names.add(req.name.lower())
        elif extra is not None and req.marker is not None and req.marker.evaluate({"extra": extra}):
            names.add(req.name.lower())
    return names


def test_the_plain_install_is_the_cli_alone() -> None:
    core = _requirements(None)
    assert core == {"httpx", "packaging", "pydantic", "pyyaml"}


@pytest.mark.parametrize(
    ("extra", "needs"),
    [
        ("hub", {"fastapi", "uvicorn", "sqlalchemy", "asyncpg", "aiosqlite", "alembic"}),
        ("agent", {"kubernetes", "prometheus-client"}),
    ],
)
def test_each_program_has_an_extra_with_what_it_imports(extra: str, needs: set[str]) -> None:
    assert needs <= _requirements(extra)


def test_the_cli_runs_without_the_server_packages() -> None:
    """`mcsync --help` and a failing request, with every server package made unimportable
    (as on a machine where only `pip install mcsync` ran)."""
    script = textwrap.dedent(
        f"""
        import sys
        blocked = {SERVER_PACKAGES!r}
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in blocked:
                    raise ImportError(f"{{name}} is not installed (blocked by the test)")
                return None
        sys.meta_path.insert(0, Block())
        from cli.__main__ import main
        sys.argv = ["mcsync", *sys.argv[1:]]
        raise SystemExit(main())
        """
    )
    help_run = subprocess.run(
        [sys.executable, "-c", script, "--help"], capture_output=True, text=True, timeout=60
    )
    assert help_run.returncode == 0, help_run.stderr
    assert "clusters" in help_run.stdout
    # A real command against a hub that is not there: a clean one-line error, no ImportError.
    run = subprocess.run(
        [sys.executable, "-c", script, "--hub-url", "http://127.0.0.1:9", "--token", "t",
         "clusters"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert "ImportError" not in run.stderr and "Traceback" not in run.stderr


def test_one_version_source_the_package_and_the_charts_agree() -> None:
    assert metadata.version("mcsync") == __version__
    for chart in ("mcsync-hub", "mcsync-agent"):
        meta = yaml.safe_load((REPO / "helm" / chart / "Chart.yaml").read_text())
        assert meta["version"] == __version__, chart
        assert str(meta["appVersion"]) == __version__, chart


def test_the_license_ships_with_the_package() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0" in text
    dist = metadata.distribution("mcsync")
    assert dist.metadata["License-Expression"] == "Apache-2.0"


def test_the_lock_pins_every_dependency_of_both_programs() -> None:
    pinned = {
        line.split("==")[0].lower().replace("_", "-")
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    wanted = _requirements(None) | _requirements("hub") | _requirements("agent")
    assert {name.replace("_", "-") for name in wanted} <= pinned
