"""`/docs`: Swagger UI served from the package itself, never from a CDN.

FastAPI's default page loads Swagger UI's script and stylesheet from jsDelivr, so in an
air-gapped cluster — common for a hub that sits beside production control planes — the page
is blank. The assets come instead from the `swagger-ui-bundle-v2` package (Swagger UI 5,
which renders the OpenAPI 3.1 document FastAPI writes) and are served under
`/docs/assets/`. Only the files the page needs are served, by name, so the route is no file
server: anything else is a 404.

The page gets the console's security headers (`hub.console.routes`): it runs with the
browser's credentials for this hub, so no other site may frame it and it may load nothing
from elsewhere. Its one inline script (Swagger UI's start-up, written by FastAPI) is
allowed by its sha256, computed from the page itself, rather than by `'unsafe-inline'`;
Swagger UI sets style attributes and draws icons from `data:` URLs, which the policy lets
through for styles and images only.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Final

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

from hub.api.status import ApiError
from hub.console.routes import SECURITY_HEADERS

ASSETS_PREFIX = "/docs/assets"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}
_ASSET_DIR = Path(swagger_ui_path)
# Assets are named by their Swagger UI version (the package's directory), so a browser may
# keep them for a long time: a new version is a new URL.
_CACHE: Final = {
    "Cache-Control": "public, max-age=86400",
    "X-Content-Type-Options": "nosniff",
}

router = APIRouter(include_in_schema=False)


_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


def content_security_policy(page: bytes) -> str:
    """The console's policy, adjusted to Swagger UI: the page's inline scripts by hash,
    inline styles and `data:` images."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script).digest()).decode() + "'"
        for script in _INLINE_SCRIPT.findall(page)
    )
    return "; ".join(
        (
            "default-src 'self'",
            f"script-src 'self' {hashes}".rstrip(),
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "font-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


def docs_page(*, openapi_url: str, title: str) -> HTMLResponse:
    page = get_swagger_ui_html(
        openapi_url=openapi_url,
        title=f"{title} - API docs",
        swagger_js_url=f"{ASSETS_PREFIX}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PREFIX}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PREFIX}/favicon-32x32.png",
    )
    page.headers.update(
        {
            **SECURITY_HEADERS,
            "Content-Security-Policy": content_security_policy(bytes(page.body)),
        }
    )
    return page


@router.get("/docs")
async def docs() -> HTMLResponse:
    return docs_page(openapi_url="/openapi.json", title="mcsync hub")


@router.get(ASSETS_PREFIX + "/{name}")
async def asset(name: str) -> FileResponse:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise ApiError(404, f"no docs asset {name!r}")
    return FileResponse(_ASSET_DIR / name, media_type=media_type, headers=_CACHE)
