"""`member.settings`: flags over `MCSYNC_*` variables, repeatable lists, one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from member.settings import UsageError, parse_args

REPO = Path(__file__).resolve().parents[2]
BASE = ["--hub-url", "https://hub.example.com/", "--cluster-id", "east"]
pytestmark = pytest.mark.usefixtures("settings_env")


def test_defaults() -> None:
    settings = parse_args(BASE)
    assert settings.hub_url == "https://hub.example.com"
    assert settings.deny_namespace == ["kube-system", "kube-public"]
    assert settings.watched_namespaces() == [None]
    assert (settings.lease_duration, settings.heartbeat_interval) == (15.0, 30.0)
    assert settings.read_token() == "t0ken"
    assert "t0ken" not in repr(settings)


def test_environment_and_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCSYNC_NAMESPACE", "shop, payments")
    monkeypatch.setenv("MCSYNC_WORKERS", "8")
    monkeypatch.setenv("MCSYNC_LEADER_ELECT", "true")
    settings = parse_args([*BASE, "--workers", "3", "--deny-namespace", "secret"])
    assert settings.namespace == ["shop", "payments"]
    assert settings.workers == 3  # the flag wins over the variable
    assert settings.leader_elect is True
    assert settings.deny_namespace == ["secret"]


def test_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCSYNC_HUB_TOKEN")
    token = tmp_path / "token"
    token.write_text("abc\n")
    assert parse_args([*BASE, "--token-file", str(token)]).read_token() == "abc"
    token.write_text("")
    with pytest.raises(UsageError, match=r"--token-file: .* is empty"):
        parse_args([*BASE, "--token-file", str(token)]).read_token()
    monkeypatch.setenv("MCSYNC_HUB_TOKEN", "x")
    with pytest.raises(UsageError, match="not both"):
        parse_args([*BASE, "--token-file", str(token)])


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--cluster-id", "East"], {}, "--cluster-id: 'East' is not a DNS-1123 label"),
        (["--namespace", "Bad_NS"], {}, "--namespace: 'Bad_NS' is not a namespace name"),
        (["--lease-duration", "1"], {}, "--lease-duration:"),
        (["--log-format", "xml"], {}, "--log-format:"),
        (
            [],
            {"MCSYNC_HEARTBEAT_INTERVAL": "-1"},
            "argument --heartbeat-interval (from MCSYNC_HEARTBEAT_INTERVAL)",
        ),
        (["--no-such-flag"], {}, "unrecognized arguments: --no-such-flag"),
    ],
)
def test_errors_name_the_flag(
    argv: list[str], env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(UsageError) as info:
        parse_args([*BASE, *argv])
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_reading_the_flags_imports_no_kubernetes_or_http_client() -> None:
    """A refused flag ends the agent before it needs a client (docs/decisions.md#start-up-cost)."""
    code = "import sys, member.__main__; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    heavy = {"kubernetes", "httpx", "urllib3", "member.app", "opentelemetry.sdk"}
    assert not heavy & loaded, sorted(heavy & loaded)
