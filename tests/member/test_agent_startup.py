"""`mcsync-agent` start-up errors name the flag that caused them (docs/reference.md#flags), and only
that.

A missing CA bundle used to be reported as `--metrics-port: cannot listen on 9090: No such
file or directory` (a catch-all `except OSError`): an operator then debugs the wrong thing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from member.app import HealthServer, MetricsPortError

REPO = Path(__file__).resolve().parents[2]


def run_agent(args: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCSYNC_")}
    env["PYTHONPATH"] = str(REPO)
    (cwd / "token").write_text("member-token\n")
    base = ["--hub-url", "http://127.0.0.1:9", "--cluster-id", "east", "--token-file", "token"]
    return subprocess.run(
        [sys.executable, "-m", "member", *base, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("ca", "problem"),
    [
        ("no-such.pem", "no-such.pem does not exist"),
        ("not-pem.pem", "is not a PEM CA bundle"),
        (".", "is not a file"),
    ],
)
def test_a_bad_ca_bundle_is_named_as_hub_ca_file(tmp_path: Path, ca: str, problem: str) -> None:
    (tmp_path / "not-pem.pem").write_text("this is not a certificate\n")
    result = run_agent(["--hub-ca-file", ca], cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("mcsync-agent: error: argument --hub-ca-file: "), line
    assert problem in line
    assert "--metrics-port" not in line


def test_a_taken_metrics_port_is_its_own_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsPortError, match=f"cannot listen on 127.0.0.1:{port}"):
            HealthServer(
                host="127.0.0.1",
                port=port,
                registry=CollectorRegistry(),
                ready=lambda: (True, "ok"),
            )
