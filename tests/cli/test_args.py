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


# --- precedence: flag > environment > config file's context > default -------------------


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_token_file_flag_beats_the_token_variable(tmp_path: Path) -> None:
    """`MCSYNC_TOKEN=x mcsync --token-file F clusters` must use F."""
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    for argv in (["--token-file", str(token_file), "clusters"],
                 ["clusters", "--token-file", str(token_file)]):
        assert parse_args(argv, environ={"MCSYNC_TOKEN": "x"}).token == "from-file"
    # and the other way round: --token beats MCSYNC_TOKEN_FILE
    assert parse_args(["clusters", "--token", "flag"],
                      environ={"MCSYNC_TOKEN_FILE": str(token_file)}).token == "flag"


def test_token_and_token_file_in_one_layer_is_ambiguous(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("t\n")
    with pytest.raises(UsageError, match="--token or --token-file, not both"):
        parse_args(["clusters", "--token", "a", "--token-file", str(token_file)], environ={})
    with pytest.raises(UsageError, match="MCSYNC_TOKEN and MCSYNC_TOKEN_FILE"):
        parse_args(["clusters"], environ={"MCSYNC_TOKEN": "a",
                                          "MCSYNC_TOKEN_FILE": str(token_file)})


def test_context_is_the_third_layer(tmp_path: Path) -> None:
    (tmp_path / "prod.token").write_text("prod-token\n")
    (tmp_path / "dev.token").write_text("dev-token\n")
    config = write_config(tmp_path / "config", """
current-context: prod
contexts:
- name: prod
  hub-url: https://prod.example:8443
  token-file: prod.token
  certificate-authority: ca.pem
- name: dev
  hub-url: http://127.0.0.1:9999
  token-file: dev.token
""")
    env = {"MCSYNC_CONFIG": str(config)}
    options = parse_args(["clusters"], environ=env)
    # relative paths in the file are relative to the file
    assert (options.hub_url, options.token) == ("https://prod.example:8443", "prod-token")
    assert options.certificate_authority == str(tmp_path / "ca.pem")
    options = parse_args(["clusters", "--context", "dev"], environ=env)
    assert (options.hub_url, options.token) == ("http://127.0.0.1:9999", "dev-token")
    assert parse_args(["clusters"], environ={**env, "MCSYNC_CONTEXT": "dev"}).token == (
        "dev-token"
    )
    # the environment beats the context, the flag beats both
    options = parse_args(["clusters"], environ={**env, "MCSYNC_HUB_URL": "http://env:1",
                                                "MCSYNC_TOKEN": "env-token"})
    assert (options.hub_url, options.token) == ("http://env:1", "env-token")
    options = parse_args(["clusters", "--hub-url", "http://flag:1"],
                         environ={**env, "MCSYNC_HUB_URL": "http://env:1"})
    assert options.hub_url == "http://flag:1"
    # --config names the file as well as MCSYNC_CONFIG does
    assert parse_args(["--config", str(config), "clusters"], environ={}).token == "prod-token"


@pytest.mark.parametrize(
    ("text", "argv", "needle"),
    [
        ("contexts:\n- name: a\n  hub-url: hub:1\n", ["clusters", "--context", "a"],
         "(from hub-url of context a)"),
        ("contexts: []\n", ["clusters", "--context", "nope"], "no context named 'nope'"),
        ("contexts:\n- name: a\n  colour: red\n", ["clusters"], "unknown key 'colour'"),
        ("current-context: [\n", ["clusters"], "is not YAML"),
        ("current-context: a\ncontexts:\n- name: a\n  token-file: missing\n", ["clusters"],
         "(from token-file of context a): cannot read"),
    ],
)
def test_bad_config_is_a_one_line_usage_error(
    tmp_path: Path, text: str, argv: list[str], needle: str
) -> None:
    config = write_config(tmp_path / "config", text)
    with pytest.raises(UsageError) as caught:
        parse_args(argv, environ={"MCSYNC_CONFIG": str(config)})
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_an_explicit_config_path_must_exist(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        parse_args(["clusters"], environ={"MCSYNC_CONFIG": str(tmp_path / "nope")})
    # the default location may be absent: no config at all
    assert parse_args(["clusters"], environ={"XDG_CONFIG_HOME": str(tmp_path)}).token is None


# --- --watch on every list ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["clusters", "exports", "imports", "endpoints", "conflicts"])
def test_every_list_watches(command: str) -> None:
    assert parse_args([command, "--watch"], environ={}).watch
    assert parse_args([command], environ={"MCSYNC_WATCH": "true"}).watch


def test_watch_variable_leaves_commands_that_cannot_watch_alone() -> None:
    """MCSYNC_WATCH=true set for a session must not break `get` or `version`."""
    env = {"MCSYNC_WATCH": "true"}
    assert not parse_args(["get", "import", "demo/web"], environ=env).watch
    assert not parse_args(["version"], environ=env).watch


# --- output forms, selectors, verbosity ------------------------------------------------


def test_output_forms() -> None:
    assert parse_args(["exports", "-o", "name"], environ={}).output == "name"
    options = parse_args(["exports", "-o", "jsonpath={.items[*].metadata.name}"], environ={})
    assert (options.output, options.jsonpath) == ("jsonpath", "{.items[*].metadata.name}")
    assert parse_args(["clusters", "--no-headers", "-v"], environ={}).no_headers
    assert parse_args(["clusters"], environ={"MCSYNC_VERBOSE": "1"}).verbose


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["exports", "-o", "jsonpath={.items[?(@.x)]}"], "argument -o/--output: jsonpath"),
        (["exports", "-o", "jsonpath={range .items[*]}"], "{range} without {end}"),
        (["version", "-o", "name"], "`version` has no object to name"),
        (["clusters", "-l", "env in prod"], "argument -l/--selector"),
        (["clusters", "-l", "Bad Key=x"], "argument -l/--selector"),
    ],
)
def test_bad_output_or_selector(argv: list[str], needle: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_args(argv, environ={})
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_selector_for_clusters() -> None:
    options = parse_args(["clusters", "-l", "env=prod,region in (eu,us),!legacy"], environ={})
    assert options.selector is not None
    assert options.selector.matches({"env": "prod", "region": "eu"})
    assert not options.selector.matches({"env": "prod", "region": "ap"})
    assert not options.selector.matches({"env": "prod", "region": "eu", "legacy": "1"})


# --- clusters register / deregister, endpoints -----------------------------------------


def test_register_takes_its_token_file_and_labels(tmp_path: Path) -> None:
    admin = tmp_path / "admin"
    admin.write_text("admin-token\n")
    options = parse_args(
        ["--token-file", str(admin), "clusters", "register", "east", "--label", "env=prod",
         "--label", "example.com/region=eu", "--token-file", str(tmp_path / "east.token")],
        environ={},
    )
    assert options.command == "clusters register" and options.name == "east"
    assert options.labels == (("env", "prod"), ("example.com/region", "eu"))
    # the --token-file after `register` is where the member token goes; the one before
    # `clusters` is the admin's credential
    assert options.member_token_file == str(tmp_path / "east.token")
    assert options.token == "admin-token" and not options.overwrite
    options = parse_args(["clusters", "deregister", "east", "--yes"], environ={})
    assert (options.command, options.name, options.yes) == ("clusters deregister", "east", True)
    # `clusters NAME` still shows one cluster
    assert parse_args(["clusters", "east"], environ={}).name == "east"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["clusters", "register", "east"], "--token-file"),
        (["clusters", "register", "East", "--token-file", "f"], "not a cluster name"),
        (["clusters", "register", "east", "--token-file", "f", "--label", "novalue"],
         "argument --label: expected key=value"),
        (["clusters", "register", "east", "--token-file", "f", "--label", "a=" + "x" * 64],
         "longer than 63"),
        (["clusters", "deregister"], "NAME"),
    ],
)
def test_register_usage_errors(argv: list[str], needle: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_args(argv, environ={})
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_endpoints_refs() -> None:
    for argv in (["endpoints", "demo/web"], ["endpoints", "web", "-n", "demo"]):
        options = parse_args(argv, environ={})
        assert (options.command, options.namespace, options.name) == ("endpoints", "demo", "web")
    options = parse_args(["endpoints", "web", "--cluster", "east"], environ={})
    assert (options.namespace, options.name, options.cluster) == (None, "web", "east")
    with pytest.raises(UsageError, match="-n/--namespace says 'shop'"):
        parse_args(["endpoints", "demo/web", "-n", "shop"], environ={})
    with pytest.raises(UsageError, match="not a Service name"):
        parse_args(["endpoints", "demo/Web"], environ={})


def test_get_plurals_list_and_describe_is_get() -> None:
    """kubectl's habits: `get <plural>` lists, `describe <kind> <ref>` shows detail."""
    assert parse_args(["get", "exports", "-n", "demo"], environ={}) == parse_args(
        ["exports", "-n", "demo"], environ={})
    assert parse_args(["-o", "json", "get", "serviceimports"], environ={}).command == "imports"
    options = parse_args(["get", "endpointslices", "demo/web", "-w"], environ={})
    assert (options.command, options.namespace, options.name, options.watch) == (
        "endpoints", "demo", "web", True)
    assert parse_args(["describe", "export", "east/demo/web"], environ={}) == parse_args(
        ["get", "export", "east/demo/web"], environ={})
    options = parse_args(["describe", "cluster", "east"], environ={})
    assert (options.command, options.kind, options.name) == ("get", "cluster", "east")
    with pytest.raises(UsageError, match="not a cluster name"):
        parse_args(["get", "cluster", "East"], environ={})
