"""Completion of cluster and service names: the bash script asks the hub named
on the command line for `-o name` refs, and offers nothing (quickly) when it cannot."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cli.completion import script
from tests.cli.conftest import REPO, RunningHub, clean_env, free_port
from tests.cli.test_cli_e2e import BASE, put_export

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")]


def complete(tmp_path: Path, words: list[str], env: dict[str, str]) -> list[str]:
    """COMPREPLY of the bash script for `words` (the last one being completed)."""
    wrapper = tmp_path / "mcsync"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m cli \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    quoted = " ".join(f"'{w}'" for w in ["mcsync", *words])
    probe = script("bash") + (f"COMP_WORDS=({quoted}); COMP_CWORD={len(words)}; _mcsync; "
                              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    done = subprocess.run(["bash", "-c", probe], text=True, capture_output=True, timeout=60,
                          cwd=REPO, env={**clean_env(env),
                                         "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


def test_names_complete_from_the_hub_the_command_line_names(hub: RunningHub,
                                                            tmp_path: Path) -> None:
    tokens = {}
    for name in ("cn-east", "cn-west"):
        answer = hub.call("POST", "/api/v1/clusters", token=hub.admin_token,
                          body={"metadata": {"name": name}})
        assert answer.status_code == 201, answer.text
        tokens[name] = answer.json()["token"]
    put_export(hub, tokens["cn-east"], "cn-east", "cn", "web", port=80, created=BASE)
    token_file = tmp_path / "reader"
    token_file.write_text(hub.reader_token)
    flags = ["--hub-url", hub.url, "--token-file", str(token_file)]
    assert complete(tmp_path, [*flags, "describe", "cluster", "cn-"], {}) == [
        "cn-east", "cn-west"]
    assert complete(tmp_path, ["exports", "--cluster", "cn-w"],
                    {"MCSYNC_HUB_URL": hub.url, "MCSYNC_TOKEN": hub.reader_token}) == ["cn-west"]
    assert complete(tmp_path, [*flags, "describe", "import", "cn/"], {}) == ["cn/web"]
    assert complete(tmp_path, [*flags, "get", "export", "cn-east/"], {}) == ["cn-east/cn/web"]
    assert "--namespace" in complete(tmp_path, [*flags, "describe", "import", "--"], {})


def test_a_hub_that_is_down_completes_nothing(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    assert complete(tmp_path, ["--hub-url", down, "describe", "cluster", ""], {}) == []
