"""What to do next, appended to the one `error:` line of a failed request (issue 26).

The hub's message says what went wrong; an operator new to mcsync also needs to know
where the setting that caused it comes from. An unreachable hub names the ways the hub URL
is set; a 401 the ways the token is (and whether one was given at all); a member token
used for a fleet-wide read says which token to use instead.
"""

from __future__ import annotations

from cli.args import Options
from cli.client import HubError

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
    return ""
