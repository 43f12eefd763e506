"""The Dockerfile, checked statically (no container engine runs here).

The properties tested are the ones the charts and operators rely on: the runtime stage is
a slim Python image with no build tools, runs as the same numeric non-root uid the charts
declare (so `runAsNonRoot` can verify it), and carries both entry points the charts call.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml

from tests.helm.conftest import AGENT_CHART, HUB_CHART, REPO

COMPILERS = ("gcc", "g++", "cc", "c++", "clang", "make", "build-essential", "python3-dev")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages of a Dockerfile: continuation lines joined, comments dropped, and ARGs
    declared before the first FROM substituted into FROM lines (as the builder does)."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, arg = line.partition(" ")
        keyword = keyword.upper()
        arg = arg.strip()
        if keyword == "ARG" and not stages:
            name, _, default = arg.partition("=")
            global_args[name] = default
        elif keyword == "FROM":
            base = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: global_args[m[1] or m[2]], arg)
            parts = base.split()
            alias = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base=parts[0], name=alias))
        else:
            assert stages, f"instruction before FROM: {line}"
            stages[-1].instructions.append((keyword, arg))
    return stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile((REPO / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def chart_uid(chart: Path) -> int:
    values = yaml.safe_load((chart / "values.yaml").read_text())
    uid = values["securityContext"]["runAsUser"]
    assert uid == values["podSecurityContext"]["runAsUser"]
    return int(uid)


def test_parser_reads_stages_and_continuations() -> None:
    parsed = parse_dockerfile(
        "ARG IMG=python:3.11-slim\nFROM ${IMG} AS b\n# c\nRUN a \\\n  && b\nFROM $IMG\nUSER 5\n"
    )
    assert [(s.base, s.name) for s in parsed] == [
        ("python:3.11-slim", "b"),
        ("python:3.11-slim", None),
    ]
    assert parsed[0].all("RUN") == ["a  && b"]
    assert parsed[1].all("USER") == ["5"]


def test_multi_stage_on_python_311_slim(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    builder, final = stages[0], stages[-1]
    assert builder.name
    assert final.base == "python:3.11-slim"
    # Same base in both: the venv's python symlink points at the same interpreter.
    assert builder.base == final.base
    copies = final.all("COPY")
    assert copies, "the final stage copies nothing from the builder"
    assert all(c.startswith(f"--from={builder.name} ") for c in copies), copies


def test_final_stage_runs_as_the_charts_numeric_non_root_user(stages: list[Stage]) -> None:
    users = stages[-1].all("USER")
    assert users, "no USER in the final stage: it would run as root"
    user = users[-1]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0, f"USER {user} must be a numeric non-root uid"
    assert not gid or (gid.isdigit() and int(gid) > 0)
    assert int(uid) == chart_uid(HUB_CHART) == chart_uid(AGENT_CHART)


def test_no_build_tools_in_the_final_stage(stages: list[Stage]) -> None:
    for run in stages[-1].all("RUN"):
        words = set(re.split(r"[\s;&|()]+", run))
        assert not words & set(COMPILERS), run
        assert not re.search(r"\b(apt-get|apt|apk|yum|dnf)\b.*\binstall\b", run), run
        assert "pip install" not in run and "pip wheel" not in run, run


def test_both_entry_points_are_installed_and_on_path(
    stages: list[Stage], pyproject: dict[str, object]
) -> None:
    project = pyproject["project"]
    assert isinstance(project, dict)
    scripts = project["scripts"]
    assert scripts["mcsync-hub"] == "shared.entrypoints:hub"
    assert scripts["mcsync-agent"] == "shared.entrypoints:agent"
    builder, final = stages[0], stages[-1]
    builder_runs = " ".join(builder.all("RUN"))
    venv = re.search(r"python -m venv (\S+)", builder_runs)
    assert venv, "the builder makes no virtualenv"
    prefix = venv[1]
    # The wheel with both programs' extras, every dependency pinned by constraints.txt.
    install = re.search(rf"{re.escape(prefix)}/bin/pip install (.*?\.whl\S*)", builder_runs)
    assert install, "the builder does not install the wheel"
    assert "[hub,agent]" in install[1], "the image needs both programs' extras"
    assert "--constraint constraints.txt" in install[0], "the image must build from the lock"
    for program in ("mcsync-hub", "mcsync-agent"):
        assert f"test -x {prefix}/bin/{program}" in builder_runs, program
    assert any(c.split()[1:3] == [prefix, prefix] for c in final.all("COPY"))
    env = " ".join(final.all("ENV"))
    assert f"PATH={prefix}/bin:" in env
    cmd = final.all("CMD")[-1]
    assert yaml.safe_load(cmd)[0] == "mcsync-hub", "the default command is the hub"


def test_builder_copies_every_shipped_package(
    stages: list[Stage], pyproject: dict[str, object]
) -> None:
    tool = pyproject["tool"]
    assert isinstance(tool, dict)
    packages = {p.rstrip("*") for p in tool["setuptools"]["packages"]["find"]["include"]}
    copied: set[str] = set()
    for copy in stages[0].all("COPY"):
        copied.update(Path(src).name for src in shlex.split(copy)[:-1])
    assert packages <= copied, f"not copied into the builder: {packages - copied}"
    assert {"pyproject.toml", "README.md", "LICENSE", "constraints.txt"} <= copied


def test_charts_call_the_image_entry_points(pyproject: dict[str, object]) -> None:
    project = pyproject["project"]
    assert isinstance(project, dict)
    for chart, program in ((HUB_CHART, "mcsync-hub"), (AGENT_CHART, "mcsync-agent")):
        assert program in project["scripts"]
        deployment = (chart / "templates" / "deployment.yaml").read_text()
        assert f'command: ["{program}"]' in deployment


def _ignored(patterns: list[str], path: str) -> bool:
    """Whether .dockerignore drops `path` (last matching pattern wins; ! re-includes)."""
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch(p, pattern) or fnmatch(p, pattern.removeprefix("**/")) for p in prefixes):
            result = not negate
    return result


def test_dockerignore_keeps_the_context_small_but_complete(stages: list[Stage]) -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    patterns = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    for path in (
        ".venv/bin/python",
        ".git/HEAD",
        "tests/helm/test_dockerfile.py",
        "hub/__pycache__/app.cpython-311.pyc",
        ".mypy_cache/3.11/x.json",
        ".pytest_cache/v/x",
        ".ruff_cache/x",
        "mcsync.db",
    ):
        assert _ignored(patterns, path), f"{path} would be sent to the build"
    for copy in stages[0].all("COPY"):
        for src in shlex.split(copy)[:-1]:
            assert not _ignored(patterns, src), f"{src} is COPY'd but ignored"
            assert not _ignored(patterns, f"{src}/__init__.py"), src
