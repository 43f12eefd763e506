"""`mcsync config …` (contexts in the config file), `completion`, and the TLS flags."""

from __future__ import annotations

import http.server
import io
import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cli.__main__ import _verify, main
from cli.args import parse_args
from tests.cli.fakehub import FakeHub
from tests.cli.test_commands import Result


def run(*argv: str, config: Path, hub: FakeHub | None = None) -> Result:
    """`mcsync ARGV` with `config` as its config file (which need not exist yet)."""
    out, err = io.StringIO(), io.StringIO()
    environ = ({"MCSYNC_CONFIG": str(config)} if config.exists() or argv[0] == "config"
               else {"XDG_CONFIG_HOME": str(config.parent / "empty-home")})
    code = main(list(argv), environ=environ,
                transport=(hub or FakeHub()).transport(), out=out, err=err)
    return Result(code, out.getvalue(), err.getvalue())


def test_set_use_and_get_contexts(tmp_path: Path) -> None:
    config = tmp_path / "mcsync" / "config"
    (tmp_path / "prod.token").write_text("prod-secret\n")
    created = run("config", "set-context", "prod", "--hub-url", "https://prod.example:8443",
                  "--token-file", str(tmp_path / "prod.token"), config=config)
    assert (created.code, created.out) == (0, "Context 'prod' created.\n")
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    assert run("config", "set-context", "dev", "--hub-url", "http://127.0.0.1:8080",
               config=config).code == 0
    # the first context made became the current one
    assert run("config", "current-context", config=config).out == "prod\n"
    listing = run("config", "get-contexts", config=config).out.splitlines()
    assert listing[0].split() == ["CURRENT", "NAME", "HUB-URL", "TOKEN-FILE",
                                  "CERTIFICATE-AUTHORITY"]
    assert listing[1].split()[:3] == ["*", "prod", "https://prod.example:8443"]
    assert listing[2].split()[:2] == ["dev", "http://127.0.0.1:8080"]
    switched = run("config", "use-context", "dev", config=config)
    assert (switched.code, switched.out) == (0, "Switched to context 'dev'.\n")
    assert yaml.safe_load(config.read_text())["current-context"] == "dev"
    # the contexts are what every command then uses (and the token is never in the file)
    assert "prod-secret" not in config.read_text()
    options = parse_args(["clusters", "--context", "prod"], environ={"MCSYNC_CONFIG": str(config)})
    assert (options.hub_url, options.token) == ("https://prod.example:8443", "prod-secret")
    assert parse_args(["clusters"], environ={"MCSYNC_CONFIG": str(config)}).hub_url == (
        "http://127.0.0.1:8080"
    )


def test_unknown_context_and_bad_values(tmp_path: Path) -> None:
    config = tmp_path / "config"
    missing = run("config", "use-context", "nope", config=config)
    assert missing.code == 1 and missing.err == f"error: no context named 'nope' in {config}\n"
    assert not config.exists()  # nothing written for a refusal
    bad = run("config", "set-context", "x", "--hub-url", "ftp://x", config=config)
    assert bad.code == 2 and "--hub-url" in bad.err and bad.err.count("\n") == 1


def test_completion_scripts_name_every_command(tmp_path: Path) -> None:
    for shell in ("bash", "zsh", "fish"):
        result = run("completion", shell, config=tmp_path / "config")
        assert result.code == 0
        long = "-l " if shell == "fish" else "--"
        for word in ("clusters", "register", "deregister", "endpoints", f"{long}watch",
                     f"{long}output", f"{long}selector", "jsonpath="):
            assert word in result.out, (shell, word)
    bash = run("completion", "bash", config=tmp_path / "config").out
    if shutil.which("bash"):
        checked = subprocess.run(["bash", "-n"], input=bash, text=True, capture_output=True,
                                 check=False)
        assert checked.returncode == 0, checked.stderr
        # the script completes: the words offered after `mcsync clusters re`
        probe = bash + (
            'COMP_WORDS=(mcsync clusters re); COMP_CWORD=2; _mcsync; echo "${COMPREPLY[@]}"\n'
        )
        answer = subprocess.run(["bash", "-c", probe], text=True, capture_output=True,
                                check=False)
        assert answer.stdout.split() == ["register"], answer.stderr
    assert run("completion", "tcsh", config=tmp_path / "config").code == 2


def test_tls_flags(tmp_path: Path) -> None:
    assert _verify(parse_args(["clusters"], environ={})) is True
    insecure = parse_args(["clusters", "--insecure-skip-tls-verify"], environ={})
    assert _verify(insecure) is False
    bad_ca = tmp_path / "ca.pem"
    bad_ca.write_text("not a certificate\n")
    result = run("version", "--certificate-authority", str(bad_ca), config=tmp_path / "c")
    assert result.code == 2
    assert result.err.startswith("mcsync: error: argument --certificate-authority: cannot load")
    assert result.err.count("\n") == 1
    absent = run("version", "--certificate-authority", str(tmp_path / "nope.pem"),
                 config=tmp_path / "c")
    assert absent.code == 2 and "--certificate-authority" in absent.err


class _VersionHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"hubVersion": "1.2.3", "apiVersion": "mcsync.io/v1alpha1",
                           "minAgentVersion": "0.1.0"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def tls_hub(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server answering /api/v1/version with a self-signed certificate for
    127.0.0.1; yields its URL and the certificate (its own CA)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate")
    cert, key = tmp_path / "hub.pem", tmp_path / "hub.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=mcsync test hub", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _VersionHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_certificate_authority_and_insecure_against_a_tls_hub(
    tls_hub: tuple[str, Path], tmp_path: Path
) -> None:
    url, ca = tls_hub
    environ = {"MCSYNC_HUB_URL": url, "XDG_CONFIG_HOME": str(tmp_path)}

    def version(*flags: str) -> Result:
        out, err = io.StringIO(), io.StringIO()
        code = main(["version", *flags], environ=environ, out=out, err=err)
        return Result(code, out.getvalue(), err.getvalue())

    untrusted = version()
    assert untrusted.code == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusted.err
    trusted = version("--certificate-authority", str(ca))
    assert trusted.code == 0 and "Hub Version: 1.2.3" in trusted.out, trusted.err
    insecure = version("--insecure-skip-tls-verify")
    assert insecure.code == 0 and "Hub Version: 1.2.3" in insecure.out
    assert "the hub's certificate is not checked" in insecure.err
    # the CA may come from the environment too
    environ["MCSYNC_CERTIFICATE_AUTHORITY"] = str(ca)
    assert version().code == 0
