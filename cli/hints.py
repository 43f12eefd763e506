"""What to do next, appended to the one `error:` line of a failed request.

The hub's message says what went wrong; an operator new to mcsync also needs to know
where the setting that caused it comes from. An unreachable hub names the ways the hub URL
is set; a 401 the ways the token is (and whether one was given at all); a member token
used for a fleet-wide read says which token to use instead, and a reader token used for
an admin command where the admin token is; a hub URL copied from the browser (the
console's `/ui/`) says which base URL to give instead.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from cli.client import HubError
from cli.options import Options
from shared import constants

# The hub's own pages, which a person may paste as the hub URL.
HUB_PAGES = ("/ui", "/docs", "/redoc", "/api/v1", "/openapi.json")
URL_SOURCES = "--hub-url, MCSYNC_HUB_URL or the hub-url of the config file's context"
TOKEN_SOURCES = ("--token-file (or --token), MCSYNC_TOKEN_FILE (or MCSYNC_TOKEN) or the "
                 "token-file of the config file's context")


def next_step(exc: HubError, options: Options) -> str:
    """A sentence to append after the error's message, or "" when there is nothing to add."""
    if exc.code is None:
        return f" (the hub URL comes from {URL_SOURCES})"
    if exc.code == 401:
        if options.token is None:
            return f"; no token was given: give a reader or admin token with {TOKEN_SOURCES}"
        return (f"; the token given is not this hub's: check {TOKEN_SOURCES}, and that "
                f"{options.hub_url} is the hub that issued it")
    if exc.code == 403 and "member token" in exc.message:
        return f"; use a reader or admin token ({TOKEN_SOURCES}), not a cluster's"
    if exc.code == 403 and "only the admin" in exc.message:
        return (f"; give the admin token with {TOKEN_SOURCES}: a hub started without one "
                "wrote it to its admin token file "
                f"({constants.ADMIN_TOKEN_FILE_NAME} beside its SQLite database, unless "
                "--admin-token-file or MCSYNC_ADMIN_TOKEN set it)")
    if exc.code == 404 and (page := _page_of_hub(options.hub_url)) is not None:
        base, path = page
        return (f"; the hub URL names a page of the hub ({path}), not the hub: use its base "
                f"URL, --hub-url {base}")
    return ""


def _page_of_hub(url: str) -> tuple[str, str] | None:
    """(base URL, page path) when `url` ends in one of the hub's own pages (the console,
    the API docs, the API root) — what a person copies from the browser's address bar."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for page in HUB_PAGES:
        if path.endswith(page):
            base = urlunsplit((parts.scheme, parts.netloc, path[: -len(page)], "", ""))
            return base, parts.path
    return None
