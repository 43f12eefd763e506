"""The console's files as the hub serves them (docs/reference.md#console): from the package, by
exact name, each with the strict headers; nothing in them loads from another origin or inlines
script or style. Browser behaviour is tested in tests/browser.

The console's routes never touch the store (the page reads the API like any client), so
the app is served here without its lifespan and without a database."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from hub.app import create_app
from hub.console.routes import CONTENT_SECURITY_POLICY, FILES, STATIC_DIR
from tests.hub.test_api_support import Hub, settings_for


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    settings = settings_for("sqlite:///unused.db")
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://hub") as client:
        yield Hub(app=app, client=client, settings=settings)


@pytest.mark.parametrize(
    ("path", "status", "content_type"),
    [
        ("/ui/", 200, "text/html; charset=utf-8"),
        ("/ui/app.js", 200, "text/javascript; charset=utf-8"),
        ("/ui/feed.js", 200, "text/javascript; charset=utf-8"),
        ("/ui/console.css", 200, "text/css; charset=utf-8"),
        ("/ui/favicon.svg", 200, "image/svg+xml"),
        ("/ui/index.html", 200, "text/html; charset=utf-8"),
        ("/ui/nothing.js", 404, "application/json"),
        ("/ui/..%2Fapp.py", 404, "application/json"),
        ("/ui/__init__.py", 404, "application/json"),
    ],
)
async def test_files_are_served_by_name_only(
    hub: Hub, path: str, status: int, content_type: str
) -> None:
    answer = await hub.client.get(path)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == content_type
    if status == 404:
        assert answer.json()["kind"] == "Status"


@pytest.mark.parametrize("path", ["/ui", "/ui/", "/ui/app.js"])
async def test_every_answer_carries_the_security_headers(hub: Hub, path: str) -> None:
    answer = await hub.client.get(path)
    csp = answer.headers["content-security-policy"]
    assert csp == CONTENT_SECURITY_POLICY
    directives = dict(part.split(" ", 1) for part in csp.split("; "))
    assert directives["default-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"


async def test_ui_without_slash_redirects_to_the_page(hub: Hub) -> None:
    answer = await hub.client.get("/ui")
    assert answer.status_code == 308
    assert answer.headers["location"] == "ui/"  # relative: never built from the Host header


def test_the_page_loads_nothing_from_another_origin_and_inlines_nothing() -> None:
    assert {"index.html", "app.js", "console.css"} <= set(FILES)
    for name, path in FILES.items():
        # An XML namespace is a name, not a request.
        text = re.sub(r'xmlns="[^"]*"', "", path.read_text())
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), name
        if name.endswith(".html"):
            assert not re.search(r"<script(?![^>]*\bsrc=)", text), "inline script"
            assert "<style" not in text and " style=" not in text, "inline style"
            assert not re.search(r"\son[a-z]+=", text), "inline event handler"


def test_every_module_the_page_imports_is_shipped() -> None:
    for path in STATIC_DIR.glob("*.js"):
        for imported in re.findall(r'from "\./([^"]+)"', path.read_text()):
            assert imported in FILES, f"{path.name} imports {imported}, which is not shipped"


def test_the_package_data_ships_every_console_file() -> None:
    """An editable install serves the files from the tree; a wheel has only what
    pyproject.toml's package-data names, so every shipped file must match a pattern."""
    config = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["hub"]
    hub_dir = STATIC_DIR.parents[1]
    for path in FILES.values():
        relative = path.relative_to(hub_dir).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative
