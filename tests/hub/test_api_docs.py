"""`/docs` works in an air-gapped cluster: every asset the page loads comes from the hub."""

from __future__ import annotations

import re

from packaging.version import Version

from tests.hub.test_api_support import running_hub


async def test_the_docs_page_loads_nothing_from_outside(database_url: str) -> None:
    async with running_hub(database_url) as hub:
        page = await hub.client.get("/docs")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
        urls += re.findall(r"""url:\s*['"]([^'"]+)['"]""", page.text)
        assert urls, page.text
        # Every script, stylesheet, icon and the spec itself: paths on this hub, no host.
        assert all(url.startswith("/") and not url.startswith("//") for url in urls), urls
        assert "/openapi.json" in urls
        for url in urls:
            if url.startswith("/docs/assets/"):
                asset = await hub.client.get(url)
                assert asset.status_code == 200, url
                assert asset.content, url
                assert asset.headers["content-type"].split(";")[0] in {
                    "text/javascript", "text/css", "image/png"
                }, url


async def test_only_the_pages_assets_are_served(database_url: str) -> None:
    async with running_hub(database_url) as hub:
        for name in ("index.html", "..%2Fswagger_ui_bundle%2F__init__.py", "swagger-ui.js.map"):
            answer = await hub.client.get(f"/docs/assets/{name}")
            assert answer.status_code == 404, name
            assert answer.json()["kind"] == "Status"


async def test_the_bundled_swagger_ui_renders_openapi_31(database_url: str) -> None:
    """FastAPI writes OpenAPI 3.1, which Swagger UI renders from version 5 on."""
    from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

    bundled = Version(re.sub(r"^.*swagger-ui-", "", str(swagger_ui_path)))
    assert bundled >= Version("5.0")
    async with running_hub(database_url) as hub:
        spec = (await hub.client.get("/openapi.json")).json()
        assert spec["openapi"].startswith("3.1")


async def test_the_docs_page_carries_the_consoles_security_headers(database_url: str) -> None:
    """The page runs with the browser's access to this hub: no framing, nothing loaded or
    run from elsewhere, its one inline script allowed by hash."""
    async with running_hub(database_url) as hub:
        page = await hub.client.get("/docs")
        policy = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy
        assert "'sha256-" in policy and "script-src 'self' 'unsafe-inline'" not in policy
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
        asset = await hub.client.get("/docs/assets/swagger-ui-bundle.js")
        assert asset.headers["x-content-type-options"] == "nosniff"
