"""One settings layer for all three programs (`shared.settingscli`): the same precedence,
help and errors in `mcsync-hub`, `mcsync-agent` and `mcsync`.

One table, one row per program, each naming a setting all three layers can set: the
hub's `--port`, the agent's `--metrics-port`, the CLI's `--hub-url` (its config file
sets only a context's hub URL, token file and CA). Each case runs the real program as a
subprocess, with an environment stripped of the caller's `MCSYNC_*` variables:

* precedence, flag > environment > config file > default: a different bad value in
  each layer, and the one line of the error says which value was used and where it came
  from. With all three layers set, that same line is the bad-value check of the process:
  one line on stderr, naming the flag, exit 2; the lower layers' lines come from the
  same parser, and are checked in-process on it;
* `--help` names every variable the program reads, as its settings model lists them,
  so a field added without reaching the help fails here.

The layers' good values are checked in-process through each program's own parser, which
is quicker and shows the value itself rather than an error about it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field, SecretStr, field_validator

from cli.args import CliSettings
from cli.args import parse_args as parse_cli
from hub.__main__ import parse as parse_hub
from hub.settings import HubSettings
from member.settings import AgentSettings
from member.settings import parse_args as parse_agent
from shared.settingscli import (
    Flag,
    OneLineParser,
    ProgramSettings,
    UsageError,
    add_flags,
    environment_help,
    load,
    settings_of,
)

REPO = Path(__file__).resolve().parents[2]
AGENT_REQUIRED = ["--hub-url", "https://hub.example", "--cluster-id", "east"]


def _hub_file(path: Path, value: str) -> list[str]:
    path.write_text(f"port: {value}\n")
    return ["--config", str(path)]


def _agent_file(path: Path, value: str) -> list[str]:
    path.write_text(f"metrics-port: {value}\n")
    return ["--config", str(path)]


def _cli_file(path: Path, value: str) -> list[str]:
    path.write_text(f"current-context: a\ncontexts:\n- name: a\n  hub-url: {value}\n")
    return ["--config", str(path)]


@dataclass(frozen=True)
class Program:
    name: str
    module: str
    model: type[ProgramSettings]
    argv: list[str]  # what the program needs before the setting under test
    env: dict[str, str]
    flag: str
    variable: str
    write_file: Callable[[Path, str], list[str]]  # → the flags that name the file
    source_in_file: str  # how the error names the file layer
    # in-process: argv, environ → the setting's value
    parse: Callable[[list[str], dict[str, str]], Any]
    good: tuple[str, str, str, Any]  # a flag's, a variable's, the file's value; the default


PROGRAMS = [
    Program(
        "mcsync-hub", "hub", HubSettings, ["serve"], {}, "--port", "MCSYNC_PORT",
        _hub_file, "port of ",
        lambda argv, env: parse_hub(argv, env)[1].port,
        ("8001", "8002", "8003", 8080),
    ),
    Program(
        "mcsync-agent", "member", AgentSettings, AGENT_REQUIRED, {"MCSYNC_HUB_TOKEN": "t"},
        "--metrics-port", "MCSYNC_METRICS_PORT", _agent_file, "metrics-port of ",
        lambda argv, env: parse_agent([*AGENT_REQUIRED, *argv], env).metrics_port,
        ("9001", "9002", "9003", 9090),
    ),
    Program(
        "mcsync", "cli", CliSettings, ["clusters"], {}, "--hub-url", "MCSYNC_HUB_URL",
        _cli_file, "hub-url of context a",
        lambda argv, env: parse_cli([*argv, "clusters"], env).hub_url,
        ("http://flag:1", "http://env:1", "http://file:1", "http://127.0.0.1:8080"),
    ),
]  # fmt: skip
IDS = [p.name for p in PROGRAMS]


def run(
    program: Program, args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCSYNC_")}
    clean.update({"PYTHONPATH": str(REPO), "HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd)})
    clean.update({**program.env, **env})
    return subprocess.run(
        [sys.executable, "-m", program.module, *program.argv, *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(result: subprocess.CompletedProcess[str], program: Program) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"{program.name}: error: argument {program.flag}"), line
    return line


@pytest.mark.parametrize("program", PROGRAMS, ids=IDS)
def test_a_flag_beats_the_environment(program: Program, tmp_path: Path) -> None:
    config = program.write_file(tmp_path / "config", "from-file")
    args = [*config, program.flag, "from-flag"]
    line = one_error_line(run(program, args, {program.variable: "from-env"}, tmp_path), program)
    assert f"argument {program.flag}: " in line  # no "(from …)": the command line
    assert "'from-flag'" in line and "from-env" not in line and "'from-file'" not in line


def parse_error_line(program: Program, args: list[str], env: dict[str, str], cwd: Path) -> str:
    """The one line `program`'s own parser refuses `args` with, in-process."""
    environ = {"HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd), **program.env, **env}
    with pytest.raises(UsageError) as caught:
        program.parse(args, environ)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(f"{program.name}: error: argument {program.flag}"), line
    return line


@pytest.mark.parametrize("program", PROGRAMS, ids=IDS)
def test_the_environment_beats_the_config_file(program: Program, tmp_path: Path) -> None:
    config = program.write_file(tmp_path / "config", "from-file")
    line = parse_error_line(program, config, {program.variable: "from-env"}, tmp_path)
    assert f"(from {program.variable})" in line
    assert "'from-env'" in line and "'from-file'" not in line


@pytest.mark.parametrize("program", PROGRAMS, ids=IDS)
def test_the_config_file_beats_the_default(program: Program, tmp_path: Path) -> None:
    config = program.write_file(tmp_path / "config", "from-file")
    line = parse_error_line(program, config, {}, tmp_path)
    assert f"(from {program.source_in_file}" in line and "'from-file'" in line


@pytest.mark.parametrize("program", PROGRAMS, ids=IDS)
def test_help_names_every_variable_of_the_settings_model(program: Program, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", program.module, "--help"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Environment variables (flag > environment variable > config file > default)" in (
        result.stdout
    )
    section = result.stdout.split("Environment variables", 1)[1]
    assert len(settings_of(program.model)) >= 3
    for setting in settings_of(program.model):
        row = next((line for line in section.splitlines() if f" {setting.env} " in line), "")
        assert row, f"{program.name} --help does not list {setting.env}"
        assert not setting.flags or setting.flags[-1] in row, row


@pytest.mark.parametrize("program", PROGRAMS, ids=IDS)
def test_the_layers_good_values_in_order(program: Program, tmp_path: Path) -> None:
    flag, variable, in_file, default = program.good
    config = program.write_file(tmp_path / "config", in_file)
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), **program.env}
    with_env = {**env, program.variable: variable}
    value = type(default)  # the text each layer holds, as the setting's type
    assert program.parse([*config, program.flag, flag], with_env) == value(flag)
    assert program.parse(config, with_env) == value(variable)
    assert program.parse(config, env) == value(in_file)
    assert program.parse([], env) == default


# --- the layer's own rules, on a small model --------------------------------------------


class Sample(ProgramSettings):
    port: int = Field(default=1, ge=1, description="a port")
    names: list[str] = Field(default_factory=list, description="names")
    secret: Annotated[SecretStr | None, Flag(environment_only=True)] = None
    quiet: Annotated[bool, Flag(("-q", "--quiet"))] = False

    @field_validator("names", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return value.split(",") if isinstance(value, str) else value


def sample(argv: list[str], environ: dict[str, str], file: str | None = None) -> Sample:
    parser = OneLineParser(prog="sample")
    add_flags(parser, settings_of(Sample))
    with tempfile.TemporaryDirectory() as directory:
        if file is not None:
            path = Path(directory) / "sample.yaml"
            path.write_text(file)
            argv = [*argv, "--config", str(path)]
        return load(Sample, parser, argv, environ)[0]


def test_the_flags_and_variables_come_from_the_fields() -> None:
    by_field = {s.field: s for s in settings_of(Sample)}
    assert by_field["port"].flags == ("--port",) and by_field["port"].env == "MCSYNC_PORT"
    assert by_field["quiet"].flags == ("-q", "--quiet") and by_field["quiet"].action == (
        "store_const"
    )
    assert by_field["names"].action == "append"
    assert by_field["secret"].flags == () and not by_field["secret"].echo
    help_text = environment_help(settings_of(Sample))
    assert "MCSYNC_SECRET" in help_text and "(no flag)" in help_text


def test_an_empty_variable_is_unset_and_lists_take_commas() -> None:
    assert sample([], {"MCSYNC_PORT": ""}, "port: 7\n").port == 7
    assert sample([], {"MCSYNC_NAMES": "a,b"}).names == ["a", "b"]
    assert sample(["--names", "c", "--names", "d"], {"MCSYNC_NAMES": "a"}).names == ["c", "d"]
    assert sample([], {}, "names: [e, f]\n").names == ["e", "f"]
    assert sample(["-q"], {}).quiet is True
    assert sample([], {"MCSYNC_QUIET": "true"}).quiet is True


def test_a_secret_is_read_only_from_the_environment_and_never_echoed() -> None:
    assert sample([], {"MCSYNC_SECRET": "s3"}).secret == SecretStr("s3")
    with pytest.raises(UsageError, match="unknown key 'secret'"):
        sample([], {}, "secret: s3\n")
    with pytest.raises(UsageError, match="unrecognized arguments: --secret"):
        sample(["--secret", "s3"], {})


@pytest.mark.parametrize(
    ("argv", "environ", "file", "line"),
    [
        (["--port", "0"], {}, None, "sample: error: argument --port: Input should be greater"),
        ([], {"MCSYNC_PORT": "x"}, None, "sample: error: argument --port (from MCSYNC_PORT): "),
        ([], {}, "port: 0\n", "sample: error: argument --port (from port of "),
        ([], {}, "colour: red\n", "sample: error: argument --config: "),
        ([], {}, "port: [\n", "is not YAML"),
        (["--port"], {}, None, "sample: error: argument --port: expected one argument"),
    ],
)
def test_every_mistake_is_one_line_naming_the_flag(
    argv: list[str], environ: dict[str, str], file: str | None, line: str
) -> None:
    with pytest.raises(UsageError) as caught:
        sample(argv, environ, file)
    assert line in str(caught.value) and "\n" not in str(caught.value)
