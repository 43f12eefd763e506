"""Where the hub's admin token comes from (docs/reference.md#scope-and-limits, #flags), and what it
refuses or warns of."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import SecretStr

from hub.api.credentials import CredentialsError, load_credentials
from hub.settings import HubSettings


def settings(tmp_path: Path, **values: object) -> HubSettings:
    return HubSettings(database_url=f"sqlite:///{tmp_path / 'hub.db'}", **values)  # type: ignore[arg-type]


def test_an_explicit_token_file_that_does_not_exist_is_an_error_not_a_new_token(
    tmp_path: Path,
) -> None:
    mistyped = tmp_path / "admn-token"
    with pytest.raises(CredentialsError, match=r"--admin-token-file: .* does not exist"):
        load_credentials(settings(tmp_path, admin_token_file=mistyped))
    assert not mistyped.exists()


def test_only_the_default_location_is_generated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = load_credentials(settings(tmp_path))
    assert first.generated
    assert first.admin_token_file is not None
    assert (first.admin_token_file.stat().st_mode & 0o777) == 0o600
    again = load_credentials(settings(tmp_path))
    assert not again.generated
    assert again.admin.get_secret_value() == first.admin.get_secret_value()


@pytest.mark.parametrize(("token", "warned"), [("short-admin", True), ("x" * 32, False)])
def test_a_short_admin_token_is_accepted_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, token: str, warned: bool
) -> None:
    with caplog.at_level(logging.WARNING, logger="mcsync.hub.credentials"):
        loaded = load_credentials(settings(tmp_path, admin_token=SecretStr(token)))
    assert loaded.admin.get_secret_value() == token
    messages = [r.getMessage() for r in caplog.records]
    assert any("admin token is short" in m for m in messages) is warned
    assert all(token not in m for m in messages)  # the token itself is never logged
