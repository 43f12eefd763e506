"""Errors that say what to do next: where the hub URL and the token come from,
and "did you mean" for a mistyped command word."""

from __future__ import annotations

import pytest

from cli.args import Options, parse_args
from cli.client import HubError, Unreachable
from cli.hints import TOKEN_SOURCES, URL_SOURCES, next_step
from shared.settingscli import UsageError
from tests.cli.conftest import free_port, run_cli


@pytest.mark.parametrize(("error", "token", "expected"), [
    (Unreachable("cannot reach the hub at http://h:8080: refused"), "t",
     f" (the hub URL comes from {URL_SOURCES})"),
    (HubError("this endpoint needs an Authorization: Bearer <token> header", code=401), None,
     f"; no token was given: give a reader or admin token with {TOKEN_SOURCES}"),
    (HubError("the bearer token is not known to this hub", code=401), "t",
     f"; the token given is not this hub's: check {TOKEN_SOURCES}, and that "
     "http://h:8080 is the hub that issued it"),
    (HubError("a member token acts only under /api/v1/clusters/east/; this request is outside "
              "it", code=403), "t",
     f"; use a reader or admin token ({TOKEN_SOURCES}), not a cluster's"),
    (HubError("serviceimport demo/web not found", code=404), "t", ""),
    (HubError("only the admin may do this; the caller is the reader", code=403), "t",
     f"; give the admin token with {TOKEN_SOURCES}: a hub started without one wrote it to "
     "its admin token file (mcsync-admin-token beside its SQLite database, unless "
     "--admin-token-file or MCSYNC_ADMIN_TOKEN set it)"),
], ids=["unreachable", "no-token", "unknown-token", "member-token", "not-found", "reader"])
def test_next_step(error: HubError, token: str | None, expected: str) -> None:
    options = Options(command="clusters", hub_url="http://h:8080", token=token)
    assert next_step(error, options) == expected


@pytest.mark.parametrize(("url", "base", "page"), [
    ("http://h:8080/ui/", "http://h:8080", "/ui/"),
    ("http://h:8080/ui", "http://h:8080", "/ui"),
    ("https://h/mcsync/docs", "https://h/mcsync", "/mcsync/docs"),
    ("http://h:8080/api/v1/", "http://h:8080", "/api/v1/"),
])
def test_a_hub_url_copied_from_the_browser_names_the_base_url(
        url: str, base: str, page: str) -> None:
    options = Options(command="clusters", hub_url=url, token="t")
    said = next_step(HubError("no such path: /ui/api/v1/clusters", code=404), options)
    assert said == (f"; the hub URL names a page of the hub ({page}), not the hub: use its "
                    f"base URL, --hub-url {base}")


@pytest.mark.parametrize(("argv", "suggestion"), [
    (["clsters"], "unknown word 'clsters': did you mean 'clusters'?"),
    (["import"], "unknown word 'import': did you mean 'imports'?"),
    (["describe", "clustr", "east"], "unknown word 'clustr': did you mean 'cluster'?"),
    (["config", "use-contxt", "prod"], "unknown word 'use-contxt': did you mean 'use-context'?"),
])
def test_a_mistyped_word_gets_did_you_mean(argv: list[str], suggestion: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_args(argv, environ={})
    assert suggestion in str(raised.value)


def test_a_word_far_from_any_command_lists_the_choices() -> None:
    with pytest.raises(UsageError, match=r"invalid choice: 'xyzzy' \(choose from"):
        parse_args(["xyzzy"], environ={})


def test_an_unreachable_hub_names_where_its_url_comes_from() -> None:
    done = run_cli("clusters", env={"MCSYNC_HUB_URL": f"http://127.0.0.1:{free_port()}",
                                    "MCSYNC_TOKEN": "t"})
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.endswith(f"(the hub URL comes from {URL_SOURCES})")
