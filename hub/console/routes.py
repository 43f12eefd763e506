"""`/ui/`: the console's page and its assets, served from the package with strict headers.

Only the files shipped in `static/` are served, by exact name (the set is read once at
import), so the route is no file server: any other name is a 404 Status, and no path
can climb out of the directory. Besides them, `words.json` answers the words for people
of the ServiceImport properties (`shared.properties.words_document`): the console asks
the hub for them instead of restating Python in JavaScript. Every answer carries the
console's security headers:

* `Content-Security-Policy` allowing this origin only (`default-src 'self'`), no inline
  script or style (no `'unsafe-inline'`: the page's script and style are files), no
  framing (`frame-ancestors 'none'`, with `X-Frame-Options: DENY` for older browsers), no
  plugins, no `<base>` rewriting; the page talks to the hub's own API only
  (`connect-src 'self'`). An air-gapped install therefore loads nothing from elsewhere,
  and a browser refuses to if a change ever tried.
* `Referrer-Policy: no-referrer` and `X-Content-Type-Options: nosniff`.

The files are not named by version, so they are sent with `Cache-Control: no-cache`: a
browser revalidates (ETag / Last-Modified from `FileResponse`) and a hub upgrade is seen
on the next load, never a mix of old and new modules.

`/ui` without the slash redirects to `/ui/` with a relative Location: the page's assets
are relative to it, and the app turns off Starlette's own slash redirect (which built
its Location from the Host header).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fastapi import APIRouter
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse

from hub.api.status import ApiError
from shared import properties

PREFIX: Final = "/ui"
STATIC_DIR: Final = Path(__file__).with_name("static")
MEDIA_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "font-src 'none'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def shipped_files(directory: Path = STATIC_DIR) -> dict[str, Path]:
    """The servable files of `directory` by name: top-level files of a known type."""
    return {
        path.name: path
        for path in sorted(directory.iterdir())
        if path.is_file() and path.suffix in MEDIA_TYPES
    }


FILES: Final = shipped_files()
INDEX: Final = "index.html"
# Not a file: the words of `shared.properties`, answered by the hub (`console_words`).
WORDS: Final = "words.json"

router = APIRouter(include_in_schema=False)


def _file(name: str) -> FileResponse:
    path = FILES.get(name)
    if path is None:
        raise ApiError(404, f"the console has no file {name!r}")
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=SECURITY_HEADERS)


@router.get(PREFIX)
async def console_redirect() -> RedirectResponse:
    return RedirectResponse("ui/", status_code=308, headers=SECURITY_HEADERS)


@router.get(PREFIX + "/")
async def console_page() -> FileResponse:
    return _file(INDEX)


@router.get(PREFIX + "/" + WORDS)
async def console_words() -> JSONResponse:
    """The words for people of every ServiceImport property and conflict reason, read off
    the one table (`shared.properties`), so the console never restates them in JS."""
    return JSONResponse(properties.words_document(), headers=SECURITY_HEADERS)


@router.get(PREFIX + "/{name}")
async def console_asset(name: str) -> FileResponse:
    return _file(name)
