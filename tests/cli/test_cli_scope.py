"""`mcsync clusters register --export-namespace/--import-namespace` and `mcsync clusters
set-scope` (docs/reference.md#scope-and-limits): the flags are checked before the hub is asked, and
against a real hub process the scope they set is what the hub then enforces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.args import UsageError, parse_args
from tests.cli.conftest import RunningHub, ok, run_cli
from tests.hub.test_api_support import export_body


def test_scope_flags_parse_repeat_and_dedupe() -> None:
    options = parse_args(
        [
            "clusters", "register", "east", "--token-file", "t",
            "--export-namespace", "team-*", "--export-namespace", "demo",
            "--export-namespace", "demo", "--import-namespace", "*",
        ],
        environ={},
    )  # fmt: skip
    assert options.export_namespaces == ("team-*", "demo")
    assert options.import_namespaces == ("*",)
    plain = parse_args(["clusters", "register", "east", "--token-file", "t"], environ={})
    assert plain.export_namespaces is None and plain.import_namespaces is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["clusters", "set-scope", "east", "--export-namespace", "Bad_NS"], "'Bad_NS'"),
        (["clusters", "set-scope", "east", "--import-namespace", "a?b"], "'a?b'"),
        (["clusters", "set-scope", "east"], "nothing to change"),
        (
            ["clusters", "set-scope", "east", "--all-export-namespaces", "--export-namespace", "a"],
            "--all-export-namespaces",
        ),
        (["clusters", "set-scope"], "NAME"),
    ],
)
def test_bad_scope_flags_are_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("?", r"\?").replace("*", r"\*")):
        parse_args(argv, environ={})


def test_register_and_set_scope_against_a_real_hub(hub: RunningHub, tmp_path: Path) -> None:
    env = {"MCSYNC_HUB_URL": hub.url, "MCSYNC_TOKEN": hub.admin_token}
    token_file = tmp_path / "east.token"
    registered = run_cli(
        "clusters", "register", "east", "--token-file", str(token_file),
        "--export-namespace", "team-*", "--import-namespace", "demo", "-o", "json",
        env=env,
    )  # fmt: skip
    shown = json.loads(ok(registered))
    assert shown["spec"] == {"exportNamespaces": ["team-*"], "importNamespaces": ["demo"]}
    member = token_file.read_text().strip()

    def put(namespace: str) -> int:
        body = export_body("east", namespace=namespace)
        answer = hub.call(
            "PUT",
            f"/api/v1/clusters/east/serviceexports/{namespace}/web",
            token=member,
            body=body,
        )
        return answer.status_code

    assert put("team-a") == 201
    assert put("demo") == 403
    page = ok(run_cli("describe", "cluster", "east", env=env))
    fields = dict(line.split(":", 1) for line in page.splitlines() if ":" in line)
    assert fields["Export scope"].strip() == "team-*"
    assert fields["Import scope"].strip() == "demo"

    changed = run_cli("clusters", "set-scope", "east", "--export-namespace", "demo", env=env)
    assert ok(changed) == "cluster/east scoped: exports from demo; imports demo\n"
    assert put("demo") == 201
    assert put("team-b") == 403

    every = run_cli(
        "clusters", "set-scope", "east", "--all-export-namespaces", "--all-import-namespaces",
        env=env,
    )  # fmt: skip
    assert ok(every) == (
        "cluster/east scoped: exports from every namespace; imports every namespace\n"
    )
    assert put("team-b") == 201

    unknown = run_cli("clusters", "set-scope", "nowhere", "--export-namespace", "a", env=env)
    assert unknown.returncode == 1 and "'nowhere' is not registered" in unknown.stderr
    reader = run_cli(
        "clusters", "set-scope", "east", "--export-namespace", "a",
        env={**env, "MCSYNC_TOKEN": hub.reader_token},
    )  # fmt: skip
    assert reader.returncode == 1
