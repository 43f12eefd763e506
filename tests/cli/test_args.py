"""Argument parsing: flags, `MCSYNC_*` variables, precedence, refs, and usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.args import DEFAULT_HUB_URL, UsageError, parse_args


def test_defaults() -> None:
    options = parse_args(["clusters"], environ={})
    assert options.command == "clusters"
    assert options.hub_url == DEFAULT_HUB_URL
    assert options.output == "table" and not options.watch and options.token is None


def test_global_flags_before_or_after_the_command() -> None:
    before = parse_args(["-o", "json", "--hub-url", "http://hub:1/", "exports"], environ={})
    after = parse_args(["exports", "-o", "json", "--hub-url", "http://hub:1/"], environ={})
    assert before == after
    assert before.output == "json" and before.hub_url == "http://hub:1"


def test_export_filters() -> None:
    options = parse_args(
        ["exports", "-n", "demo", "--cluster", "east", "--conflict", "true", "--name", "web"],
        environ={},
    )
    assert (options.namespace, options.cluster, options.conflict, options.name) == (
        "demo", "east", True, "web",
    )
    assert parse_args(["exports", "--conflict", "FALSE"], environ={}).conflict is False


def test_every_flag_from_the_environment(tmp_path: Path) -> None:
    env = {
        "MCSYNC_HUB_URL": "https://hub.example:8443",
        "MCSYNC_TOKEN": "s3cret",
        "MCSYNC_OUTPUT": "wide",
        "MCSYNC_WATCH": "true",
        "MCSYNC_REQUEST_TIMEOUT": "2.5",
        "MCSYNC_PAGE_SIZE": "7",
        "MCSYNC_NAMESPACE": "demo",
        "MCSYNC_CLUSTER": "east",
        "MCSYNC_CONFLICT": "false",
        "MCSYNC_NAME": "web",
    }
    options = parse_args(["exports"], environ=env)
    assert options.hub_url == "https://hub.example:8443"
    assert options.token == "s3cret" and options.output == "wide" and options.watch
    assert options.request_timeout == 2.5 and options.page_size == 7
    assert (options.namespace, options.cluster, options.conflict, options.name) == (
        "demo", "east", False, "web",
    )
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    assert parse_args(["clusters"], environ={"MCSYNC_TOKEN_FILE": str(token_file)}).token == (
        "from-file"
    )


def test_flags_win_over_the_environment() -> None:
    env = {"MCSYNC_OUTPUT": "yaml", "MCSYNC_NAMESPACE": "demo", "MCSYNC_TOKEN": "env"}
    options = parse_args(["exports", "-o", "json", "-n", "shop", "--token", "flag"], environ=env)
    assert (options.output, options.namespace, options.token) == ("json", "shop", "flag")


def test_environment_applies_only_to_the_flags_a_command_has() -> None:
    # MCSYNC_NAME filters exports; it must not turn `clusters` into a one-cluster lookup.
    assert parse_args(["clusters"], environ={"MCSYNC_NAME": "web"}).name is None


@pytest.mark.parametrize(
    ("argv", "env", "needle"),
    [
        (["exports", "--bogus"], {}, "unrecognized arguments: --bogus"),
        (["-o", "xml", "exports"], {}, "argument -o/--output"),
        (["exports"], {"MCSYNC_OUTPUT": "xml"}, "(from MCSYNC_OUTPUT)"),
        (["exports", "--conflict", "maybe"], {}, "argument --conflict"),
        (["exports"], {"MCSYNC_CONFLICT": "maybe"}, "MCSYNC_CONFLICT"),
        (["exports"], {"MCSYNC_HUB_URL": "hub:8080"}, "--hub-url"),
        (["exports"], {"MCSYNC_REQUEST_TIMEOUT": "0"}, "--request-timeout"),
        (["get", "import", "demo/web", "--watch"], {}, "--watch works with the lists"),
        (["version", "-w"], {}, "--watch works with the lists"),
        (["clusters"], {"MCSYNC_TOKEN_FILE": "/nonexistent/token"}, "--token-file"),
        (["get", "export", "demo/web"], {}, "--cluster"),
        (["get", "export", "a/b/c/d"], {}, "CLUSTER/NAMESPACE/NAME"),
        (["get", "import", "web"], {}, "-n/--namespace"),
        (["get", "import", "demo/web", "-n", "shop"], {}, "'demo/web' names 'demo'"),
        (["get"], {}, "KIND"),
        (["exports", "-n", "Demo"], {}, "not a namespace"),
        # The agent's MCSYNC_NAMESPACE is a comma list; here it is no namespace at all.
        (["exports"], {"MCSYNC_NAMESPACE": "shop,payments"}, "(from MCSYNC_NAMESPACE)"),
        (["exports", "--cluster", "East"], {}, "not a cluster name"),
        (["exports", "--name", "9web"], {}, "not a Service name"),
        (["get", "export", "east/demo/Web"], {}, "not a Service name"),
        (["get", "import", "de_mo/web"], {}, "not a namespace"),
        ([], {}, "COMMAND"),
    ],
)
def test_usage_errors_are_one_line(argv: list[str], env: dict[str, str], needle: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_args(argv, environ=env)
    message = str(caught.value)
    assert needle in message
    assert "\n" not in message and message.startswith("mcsync")


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["get", "export", "east/demo/web"], {}),
        (["get", "export", "demo/web", "--cluster", "east"], {}),
        (["get", "export", "web", "--cluster", "east", "-n", "demo"], {}),
        (["get", "export", "web"], {"MCSYNC_CLUSTER": "east", "MCSYNC_NAMESPACE": "demo"}),
        # An explicit ref wins over the environment.
        (["get", "export", "east/demo/web"], {"MCSYNC_CLUSTER": "west", "MCSYNC_NAMESPACE": "x"}),
    ],
)
def test_export_refs(argv: list[str], env: dict[str, str]) -> None:
    options = parse_args(argv, environ=env)
    assert (options.kind, options.cluster, options.namespace, options.name) == (
        "export", "east", "demo", "web",
    )


def test_import_refs() -> None:
    for argv in (["get", "import", "demo/web"], ["get", "import", "web", "-n", "demo"]):
        options = parse_args(argv, environ={})
        assert (options.kind, options.namespace, options.name) == ("import", "demo", "web")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args(["--version"], environ={})
    assert caught.value.code == 0
    assert capsys.readouterr().out.startswith("mcsync ")
