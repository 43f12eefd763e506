"""Token files the hub reads and files it writes (docs/reference.md#credentials): who may
read them, several tokens per role, reload on SIGHUP or change, files created 0600."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from hub.api.credentials import (
    CredentialsError,
    check_file_access,
    load_credentials,
    split_tokens,
)
from hub.settings import HubSettings
from tests.hub.test_cli import run_hub
from tests.member.agent_support import REPO_ROOT, _env, free_port, wait_for

OTHER_UID = 65534  # nobody

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def token_file(path: Path, *lines: str, mode: int = 0o600) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    path.chmod(mode)
    return path


def settings(tmp_path: Path, **values: object) -> HubSettings:
    return HubSettings(database_url=f"sqlite:///{tmp_path / 'hub.db'}", **values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("owner", "mode", "accepted"),
    [
        ("me", 0o600, True),
        ("me", 0o400, True),
        ("me", 0o640, False),
        ("me", 0o644, False),
        ("me", 0o604, False),
        ("other", 0o600, False),
        ("other", 0o644, False),
        # A Kubernetes Secret volume: root-owned, read by the pod's fsGroup.
        ("root", 0o440, True),
        ("root", 0o640, True),
        ("root", 0o660, False),
        ("root", 0o444, False),
    ],
)
def test_who_may_own_and_read_a_token_file(
    tmp_path: Path, owner: str, mode: int, accepted: bool
) -> None:
    path = token_file(tmp_path / "token", "x" * 40, mode=mode)
    uid = {"me": os.geteuid(), "other": OTHER_UID, "root": 0}[owner]
    if uid != os.geteuid():
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        os.chown(path, uid, -1)
    if owner == "me" and os.geteuid() == 0 and mode in (0o640,):
        accepted = True  # root is the hub's user here: the root rule applies
    if accepted:
        check_file_access(path, flag="--admin-token-file")
    else:
        with pytest.raises(CredentialsError, match=str(path)):
            check_file_access(path, flag="--admin-token-file")


def test_a_readable_file_is_refused_before_its_tokens_are_used(tmp_path: Path) -> None:
    shared = token_file(tmp_path / "reader", "r" * 40, mode=0o644)
    with pytest.raises(CredentialsError, match=r"--reader-token-file: .*reader.*mode 0644"):
        load_credentials(settings(tmp_path, admin_token=SecretStr("a" * 40),
                                  reader_token_file=shared))


def test_several_tokens_per_role_are_all_valid(tmp_path: Path) -> None:
    admin = token_file(tmp_path / "admin", "# rotated 2026-11", "a1" * 20, "", "a2" * 20)
    loaded = load_credentials(settings(tmp_path, admin_token_file=admin,
                                       reader_token=SecretStr("r1" * 20 + ", " + "r2" * 20)))
    assert [loaded.role_of(t) for t in ("a1" * 20, "a2" * 20, "r1" * 20, "r2" * 20, "x")] == [
        "admin", "admin", "reader", "reader", None,
    ]
    assert split_tokens("a,b\nc\n#d\n") == ("a", "b", "c")


def test_a_changed_file_is_reloaded_and_a_broken_one_keeps_the_tokens(tmp_path: Path) -> None:
    admin = token_file(tmp_path / "admin", "old" * 14)
    loaded = load_credentials(settings(tmp_path, admin_token_file=admin))
    token_file(admin, "old" * 14, "new" * 14)
    assert loaded.reload()
    assert loaded.role_of("new" * 14) == "admin" and loaded.role_of("old" * 14) == "admin"
    admin.chmod(0o644)  # an operator's mistake while editing: refused, tokens kept
    assert not loaded.reload()
    assert loaded.role_of("new" * 14) == "admin"
    token_file(admin, "new" * 14)
    assert loaded.reload()
    assert loaded.role_of("old" * 14) is None


# --- the real program ---------------------------------------------------------------------


@needs_root
def test_a_default_admin_token_file_of_another_user_stops_the_hub(tmp_path: Path) -> None:
    planted = token_file(tmp_path / "mcsync-admin-token", "p" * 43, mode=0o644)
    os.chown(planted, OTHER_UID, -1)
    result = run_hub(["--database-url", f"sqlite:///{tmp_path / 'hub.db'}",
                      "--port", str(free_port())], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(planted) in lines[0], result.stderr
    assert "p" * 43 not in result.stderr


def test_a_group_readable_token_file_stops_the_hub(tmp_path: Path) -> None:
    reader = token_file(tmp_path / "reader-token", "r" * 43, mode=0o604)
    result = run_hub(["--database-url", f"sqlite:///{tmp_path / 'hub.db'}",
                      "--reader-token-file", str(reader)], cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--reader-token-file" in lines[0] and str(reader) in lines[0]


@contextlib.contextmanager
def hub_process(directory: Path, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (directory / "hub.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "hub", "serve", "--port", str(port),
         "--database-url", f"sqlite:///{directory / 'hub.db'}", *args],
        cwd=REPO_ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError((directory / "hub.log").read_text())
        try:
            return httpx.get(url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(ready, what="the hub's /readyz")
        yield process, url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def role(url: str, token: str) -> int:
    return httpx.get(url + "/api/v1/clusters", headers={"Authorization": f"Bearer {token}"},
                     timeout=10).status_code


def test_files_the_hub_creates_are_its_owners_alone(tmp_path: Path) -> None:
    previous = os.umask(0o022)  # a usual shell's umask: the hub must not rely on the caller's
    try:
        with hub_process(tmp_path) as (_, url):
            check_created(tmp_path, url)
    finally:
        os.umask(previous)


def check_created(tmp_path: Path, url: str) -> None:
    generated = (tmp_path / "mcsync-admin-token").read_text().strip()
    assert role(url, generated) == 200
    created = sorted(p.name for p in tmp_path.iterdir() if p.name != "hub.log")
    assert {"hub.db", "mcsync-admin-token"} <= set(created)
    modes = {name: (tmp_path / name).stat().st_mode & 0o777 for name in created}
    assert modes == dict.fromkeys(created, 0o600), modes


def test_admin_and_reader_tokens_rotate_without_a_restart(tmp_path: Path) -> None:
    admin = token_file(tmp_path / "admin-token", "admin-old-" + "a" * 40)
    reader = token_file(tmp_path / "reader-token", "reader-old-" + "r" * 40)
    with hub_process(tmp_path, "--admin-token-file", str(admin),
                     "--reader-token-file", str(reader)) as (process, url):
        assert role(url, "admin-old-" + "a" * 40) == 200
        # Reader: add the new one, SIGHUP, both work; drop the old, SIGHUP, old refused.
        token_file(reader, "reader-old-" + "r" * 40, "reader-new-" + "r" * 40)
        process.send_signal(signal.SIGHUP)
        wait_for(lambda: role(url, "reader-new-" + "r" * 40) == 200, what="the new reader")
        assert role(url, "reader-old-" + "r" * 40) == 200
        token_file(reader, "reader-new-" + "r" * 40)
        process.send_signal(signal.SIGHUP)
        wait_for(lambda: role(url, "reader-old-" + "r" * 40) == 401, what="the old reader gone")
        # Admin: a file replaced as a Secret update replaces it (a new inode), no signal.
        replacement = token_file(tmp_path / "admin-token.new", "admin-new-" + "a" * 40)
        os.replace(replacement, admin)
        time.sleep(0.01)
        wait_for(lambda: role(url, "admin-new-" + "a" * 40) == 200, what="the new admin")
        assert role(url, "admin-old-" + "a" * 40) == 401
        assert process.poll() is None
