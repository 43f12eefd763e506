"""The agent's start-up errors are ONE line with nothing before it: a kubeconfig
it cannot parse, a metrics port another process holds (found before the cluster is
contacted), and what a refused heartbeat tells the operator to do."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from member.heartbeat import refusal_advice
from member.hubclient import HubRejected
from tests.member.test_agent_startup import run_agent

UNREACHABLE_CLUSTER = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: c, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: c}}]
current-context: c
"""


def test_a_kubeconfig_it_cannot_parse_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "kubeconfig").write_text("clusters: [unclosed\n  - x: {\n")
    result = run_agent(["--kubeconfig", "kubeconfig", "--metrics-port", "0"], cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("mcsync-agent: error: argument --kubeconfig: kubeconfig file "
                           "kubeconfig is not usable: ")


def test_a_taken_metrics_port_is_said_before_the_cluster_is_contacted(tmp_path: Path) -> None:
    (tmp_path / "kubeconfig").write_text(UNREACHABLE_CLUSTER)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_agent(["--kubeconfig", "kubeconfig", "--metrics-port", str(port)],
                           cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()  # no retry warnings, no discovery error
    assert line == (f"mcsync-agent: error: argument --metrics-port: cannot listen on "
                    f"0.0.0.0:{port}: Address already in use: stop what holds it, or choose "
                    "another --metrics-port (MCSYNC_METRICS_PORT; 0 picks a free one)")


def test_an_unreachable_cluster_is_one_line_without_retry_warnings(tmp_path: Path) -> None:
    (tmp_path / "kubeconfig").write_text(UNREACHABLE_CLUSTER)
    result = run_agent(["--kubeconfig", "kubeconfig", "--metrics-port", "0"], cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "is unreachable" in line


@pytest.mark.parametrize(("code", "advice"), [
    (401, "; the hub does not know this agent's token: if cluster east was deregistered or "
          "registered anew, register it again (`mcsync clusters register east --token-file "
          "FILE`, admin token) and give this agent the new token (--token-file or "
          "MCSYNC_HUB_TOKEN)"),
    (404, "; the hub has no cluster east: register it again"),
    (403, "; the token is not cluster east's: check --cluster-id and --token-file"),
    (422, ""),
])
def test_a_refused_heartbeat_says_what_to_do(code: int, advice: str) -> None:
    refused = HubRejected(code=code, reason="x", message="m", route="/heartbeat")
    said = refusal_advice(refused, "east")
    assert said.startswith(advice) if advice else said == ""


@pytest.mark.parametrize("host", ["192.0.2.77", "no-such-host.invalid"])
def test_a_metrics_host_it_cannot_listen_on_names_metrics_host(tmp_path: Path, host: str) -> None:
    """An address that is not this machine's (or does not resolve) is the host's fault,
    so the line names `--metrics-host`, not the port the operator did not touch."""
    (tmp_path / "kubeconfig").write_text(UNREACHABLE_CLUSTER)
    result = run_agent(["--kubeconfig", "kubeconfig", "--metrics-host", host,
                        "--metrics-port", "0"], cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(
        f"mcsync-agent: error: argument --metrics-host: cannot listen on {host}:0")
    assert "choose another --metrics-host (MCSYNC_METRICS_HOST" in line
    assert "--metrics-port" not in line


def test_a_mistyped_flag_gets_a_did_you_mean(tmp_path: Path) -> None:
    result = run_agent(["--metrics-hots", "127.0.0.1"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == ("mcsync-agent: error: unrecognized arguments: "
                                     "--metrics-hots 127.0.0.1; did you mean --metrics-host?")
