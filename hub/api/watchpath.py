"""An agent's watch open without FastAPI's dependency solving (`hub.api.fastpath`).

Every agent holds its import watch (and the export watch of its own cluster) open and
re-opens it when its timeout ends, and a lost replica's agents re-open theirs all at once
on the survivors (docs/reference.md#fleet-scale). FastAPI solves the watch routes'
dependency graph on each open (the context, the store, the bearer scheme, the
authentication and its access rule, the watch options, the list options of the export
route), which is a large share of what an open costs a replica besides its reads.

`fast_watch` reads what such an open needs from the request itself, and only for a request
entirely in order: a valid cluster name, a query of exactly `watch=true` and at most
`resourceVersion` (digits) and `timeoutSeconds` (digits, at least 1) once each — what the
agent sends (`member.hubclient`) — a token that is the path cluster's, the admin's or the
reader's, and a resourceVersion this replica knows is not ahead of the hub
(`hub.api.params.watch_options`). Anything else is None, and the route's own handler
answers it through the dependencies as before: every refusal (401, 403, 422, 504 Too large
resource version) keeps its one wording, and a fast path cannot answer differently.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from hub.api.auth import Principal, bearer_token, principal_of
from hub.api.deps import HubContext, context_of
from hub.api.params import MAX_REVISION, WatchOptions, valid_path_labels
from hub.store import Store

_CLUSTER = ("cluster",)
_QUERY = frozenset({"watch", "resourceVersion", "timeoutSeconds"})
# The most digits taken: `resourceVersion`'s max_length, and more than any timeout needs.
_MAX_DIGITS = 20


@dataclass(frozen=True)
class FastWatch:
    """What the route's handler would have been given, read without FastAPI."""

    ctx: HubContext
    store: Store
    principal: Principal
    cluster: str
    options: WatchOptions


def _digits(text: str) -> int | None:
    """`text` as a number when it is 1 to `_MAX_DIGITS` ASCII digits; None otherwise."""
    if not (0 < len(text) <= _MAX_DIGITS and text.isascii() and text.isdigit()):
        return None
    return int(text)


async def fast_watch(request: Request) -> FastWatch | None:
    """The watch open `request` asks for when it is entirely in order (module doc); None
    for anything else, before any side effect."""
    if not valid_path_labels(request.path_params, _CLUSTER):
        return None
    items = request.query_params.multi_items()
    names = {name for name, _ in items}
    if len(names) != len(items) or not names <= _QUERY:
        return None
    query = dict(items)
    if query.get("watch") != "true":
        return None
    revision: int | None = None
    if "resourceVersion" in query:
        revision = _digits(query["resourceVersion"])
        if revision is None or revision > MAX_REVISION:
            return None
    timeout: int | None = None
    if "timeoutSeconds" in query:
        timeout = _digits(query["timeoutSeconds"])
        if timeout is None or timeout < 1:
            return None
    ctx = context_of(request.app)
    store = ctx.store
    token = bearer_token(request)
    if store is None or token is None:
        return None
    # Ahead of what this replica has seen committed: `watch_options` reads the counter.
    if revision is not None and revision > store.feed.known_revision():
        return None
    principal = await principal_of(ctx, store, token)
    cluster = request.path_params["cluster"]
    if principal is None or (principal.role == "member" and principal.cluster != cluster):
        return None
    options = WatchOptions(watch=True, resource_version=revision, timeout_seconds=timeout)
    return FastWatch(ctx=ctx, store=store, principal=principal, cluster=cluster, options=options)
