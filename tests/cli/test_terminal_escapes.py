"""Text that members write reaches the operator's terminal escaped
(docs/reference.md#scope-and-limits): the real CLI against a real hub, with a member
reporting hostile invalid-export messages and annotations."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from cli.terminal import escape_controls
from tests.cli.conftest import RunningHub, run_cli
from tests.cli.test_cli_e2e import BASE, export_body

# OSC 52 (write the clipboard), clear screen + home, a fake green "OK", a carriage return
# that overwrites the line, a bidi override, a C1 CSI.
HOSTILE = (
    "x\x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J\x1b[H\x1b[32mOK\x1b[0m\roverwritten"
    "\u202egnp.exe\x9b31m\x00end"
)
# What a terminal would act on: everything but printable text, newline and tab.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def hostile(hub: RunningHub) -> str:
    """Cluster `mallory` reporting an invalid export and exporting demo/trick, both
    carrying HOSTILE text; its member token."""
    answer = hub.call("POST", "/api/v1/clusters", token=hub.admin_token,
                      body={"metadata": {"name": "mallory"}})
    assert answer.status_code == 201, answer.text
    token = str(answer.json()["token"])
    beat = hub.call(
        "POST", "/api/v1/clusters/mallory/heartbeat", token=token,
        body={"agentVersion": "0.1.0", "invalidExports": {"total": 1, "items": [
            {"namespace": "demo", "name": "evil", "reason": "NoService", "message": HOSTILE},
        ]}},
    )  # fmt: skip
    assert beat.status_code == 200, beat.text
    body = export_body("mallory", "demo", "trick", port=80, created=BASE)
    body["metadata"]["annotations"] = {"note": HOSTILE}
    put = hub.call("PUT", "/api/v1/clusters/mallory/serviceexports/demo/trick",
                   token=token, body=body)
    assert put.status_code in (200, 201), put.text
    return token


def cli(hub: RunningHub, *args: str) -> str:
    done = run_cli(*args, env={"MCSYNC_HUB_URL": hub.url, "MCSYNC_TOKEN": hub.admin_token})
    assert done.returncode == 0, done.stderr
    assert not RAW_CONTROL.search(done.stderr)
    return done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("exports", "--invalid"),
        ("exports", "--invalid", "-o", "wide"),
        ("exports", "--invalid", "-o", "jsonpath={.items[*].message}"),
        ("describe", "export", "demo/trick", "--cluster", "mallory"),
        ("get", "export", "demo/trick", "--cluster", "mallory", "-o", "wide"),
    ],
)
def test_tables_and_pages_escape_member_text(
    hub: RunningHub, hostile: str, args: tuple[str, ...]
) -> None:
    out = cli(hub, *args)
    assert not RAW_CONTROL.search(out), repr(out)
    if args[:2] == ("exports", "--invalid"):
        assert "\\x1b]52;c;" in out  # shown, escaped, not dropped silently


def test_json_and_yaml_keep_the_value_and_carry_no_raw_control(
    hub: RunningHub, hostile: str
) -> None:
    as_json = cli(hub, "exports", "--invalid", "-o", "json")
    assert not RAW_CONTROL.search(as_json)
    assert json.loads(as_json)["items"][0]["message"] == HOSTILE
    as_yaml = cli(hub, "exports", "--invalid", "-o", "yaml")
    assert not RAW_CONTROL.search(as_yaml)
    assert yaml.safe_load(as_yaml)["items"][0]["message"] == HOSTILE


def test_escape_controls_keeps_layout_and_shows_the_rest() -> None:
    assert escape_controls("a\tb\nc") == "a\tb\nc"
    assert escape_controls("\x1b[2J\r\x9b\u202e") == "\\x1b[2J\\x0d\\x9b\\u202e"
    assert escape_controls(escape_controls(HOSTILE)) == escape_controls(HOSTILE)
