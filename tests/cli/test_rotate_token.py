"""`mcsync clusters rotate-token` (docs/reference.md#credentials) against a real hub: the
new token goes to a new 0600 file, never to the terminal, and the old one keeps working
until the new one is used."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import RunningHub, run_cli
from tests.cli.test_cli_e2e import admin_cli


def test_rotate_token_writes_a_new_token_and_keeps_the_old_one_meanwhile(
    hub: RunningHub, tmp_path: Path
) -> None:
    first = tmp_path / "north.token"
    registered = admin_cli(hub, "clusters", "register", "north", "--token-file", str(first))
    assert registered.returncode == 0
    old = first.read_text().strip()

    exists = admin_cli(hub, "clusters", "rotate-token", "north", "--token-file", str(first))
    assert exists.returncode == 1 and "--overwrite" in exists.stderr
    assert first.read_text().strip() == old

    second = tmp_path / "north.token.new"
    result = admin_cli(hub, "clusters", "rotate-token", "north", "--token-file", str(second))
    assert result.returncode == 0, result.stderr
    new = second.read_text().strip()
    assert new != old and (second.stat().st_mode & 0o777) == 0o600
    assert new not in result.stdout + result.stderr
    assert f"cluster/north: new token in {second}" in result.stdout

    def beat(token: str) -> int:
        return hub.call("POST", "/api/v1/clusters/north/heartbeat", token=token,
                        body={"agentVersion": "0.1.0"}).status_code

    assert beat(old) == 200
    assert beat(new) == 200
    assert beat(old) == 401  # retired by the first use of the new one

    refused = run_cli("clusters", "rotate-token", "north", "--token-file",
                      str(tmp_path / "reader.token"),
                      env={"MCSYNC_HUB_URL": hub.url, "MCSYNC_TOKEN": hub.reader_token})
    assert refused.returncode == 1 and not (tmp_path / "reader.token").exists()
    missing = admin_cli(hub, "clusters", "rotate-token", "nowhere", "--token-file",
                        str(tmp_path / "x.token"))
    assert missing.returncode == 1 and "nowhere" in missing.stderr
