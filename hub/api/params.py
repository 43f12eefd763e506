"""Request parameters shared by several routers: path names and list/watch query options.

Path names are validated here with Kubernetes' own rules (cluster and namespace:
DNS-1123 labels; service name: DNS-1035 label), reusing the patterns of
`shared.models`, so a malformed name is a 422 naming the parameter before any handler
or store code runs. Query options keep Kubernetes' spelling on the wire
(`resourceVersion`, `timeoutSeconds`, `continue`).

A revision the client names (a watch's `resourceVersion`, a PATCH's precondition) is read
by one function, `parse_revision`: ASCII digits up to 2^63-1, anything else a 422 naming
the field. A watch from a revision the hub has not reached yet is refused as the Kubernetes
API refuses it (`NewTooLargeResourceVersionError`): 504 Timeout, "Too large resource
version: N, current: M", cause `ResourceVersionTooLarge`, Retry-After 1 s. Answering 200
instead would silently skip every change up to N. The check is made here, in the watch
options every watch route takes, so that every feed (exports, imports) makes it before
the stream opens; the store is the shared database, so no replica is "behind" another.
A revision at or below the newest one this replica knows to be committed (its change
notifier's, `Feed.known_revision`: it only grows) is not ahead of the hub, and is let
through without a read; only one above it reads the counter, whose value the refusal
names. Every agent's watches re-open when their timeout ends and all at once on the
survivors when a replica is lost (docs/reference.md#fleet-scale): a read per open that
always answered "not ahead" was a read transaction of CPU per re-open.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Path, Query

from hub.api.deps import StoreDep
from hub.api.status import ApiError
from hub.store.results import Page
from shared.models import DNS1035_LABEL_RE, DNS1123_LABEL_RE, ListMeta, StatusCause

LABEL_MAX = 63


def _label_path(pattern: re.Pattern[str], description: str) -> Any:
    return Path(
        min_length=1, max_length=LABEL_MAX, pattern=pattern.pattern, description=description
    )


ClusterPath = Annotated[str, _label_path(DNS1123_LABEL_RE, "member cluster name (DNS-1123 label)")]
NamespacePath = Annotated[
    str, _label_path(DNS1123_LABEL_RE, "namespace of the exported Service (DNS-1123 label)")
]
NamePath = Annotated[
    str, _label_path(DNS1035_LABEL_RE, "name of the exported Service (DNS-1035 label)")
]

# The rule of each path name, for code that checks them without FastAPI (`hub.api.fastpath`).
PATH_LABELS: Mapping[str, re.Pattern[str]] = {
    "cluster": DNS1123_LABEL_RE,
    "namespace": DNS1123_LABEL_RE,
    "name": DNS1035_LABEL_RE,
}


def valid_path_labels(path_params: Mapping[str, Any], names: Sequence[str]) -> bool:
    """Whether each of `names` in `path_params` passes its `PATH_LABELS` rule: what the
    `*Path` aliases above accept (a stricter `fullmatch`, never looser)."""
    for key in names:
        value = path_params.get(key)
        if not isinstance(value, str) or not 1 <= len(value) <= LABEL_MAX:
            return False
        if PATH_LABELS[key].fullmatch(value) is None:
            return False
    return True


MAX_LIST_LIMIT = 10_000
PageT = TypeVar("PageT")


@dataclass(frozen=True)
class ListOptions:
    """`limit` + `continue` paging and the `namespace`/`name`/`conflict` filters."""

    namespace: str | None
    name: str | None
    conflict: bool | None
    limit: int | None
    continue_token: str | None


NamespaceQuery = Annotated[
    str | None,
    Query(max_length=63, pattern=DNS1123_LABEL_RE.pattern, description="only this namespace"),
]
NameQuery = Annotated[
    str | None,
    Query(max_length=63, pattern=DNS1035_LABEL_RE.pattern, description="only this name"),
]
ClusterQuery = Annotated[
    str | None,
    Query(max_length=63, pattern=DNS1123_LABEL_RE.pattern, description="only this cluster"),
]
ConflictQuery = Annotated[
    bool | None, Query(description="true: only conflicting; false: only clean")
]
LimitQuery = Annotated[
    int | None, Query(ge=1, le=MAX_LIST_LIMIT, description="page size (default: all)")
]
ContinueQuery = Annotated[
    str | None,
    Query(alias="continue", max_length=4096, description="token from the previous page"),
]
# The console's search (docs/reference.md#console): words of the characters keys and cluster ids are
# made of.
SearchQuery = Annotated[
    str | None,
    Query(
        max_length=128,
        pattern=r"^[A-Za-z0-9 ./-]*$",
        description="words, each a case-insensitive substring of namespace/name or of an "
        "exporting cluster's id",
    ),
]


async def list_options(
    namespace: NamespaceQuery = None,
    name: NameQuery = None,
    conflict: ConflictQuery = None,
    limit: LimitQuery = None,
    continue_: ContinueQuery = None,
) -> ListOptions:
    return ListOptions(
        namespace=namespace, name=name, conflict=conflict, limit=limit, continue_token=continue_
    )


def list_meta(page: Page[Any]) -> ListMeta:
    """A list answer's metadata: the revision to watch from, the next page's token."""
    return ListMeta(resource_version=page.resource_version, continue_=page.continue_token)


async def read_page(listing: Awaitable[PageT]) -> PageT:
    """Await a store's list call; a `continue` token the store refuses is a 422 naming it."""
    try:
        return await listing
    except ValueError as exc:  # the store checks the opaque continue token
        raise ApiError.invalid("continue", str(exc)) from None


ListOptionsDep = Annotated[ListOptions, Depends(list_options)]


@dataclass(frozen=True)
class WatchOptions:
    watch: bool
    resource_version: int | None
    timeout_seconds: int | None


MAX_REVISION = 2**63 - 1  # revisions are BIGINT on PostgreSQL, a 64-bit INTEGER on SQLite
# Kubernetes' `resourceVersionTooHighRetrySeconds`: how soon a client may ask again.
TOO_LARGE_RETRY_SECONDS = 1


def parse_revision(field: str, text: str) -> int:
    """`text` as a revision; a 422 naming `field` unless it is one."""
    # ASCII digits only ("²".isdigit() is true, int("²") raises), and no more than the
    # databases' 64-bit integers hold: either slip was a 500 from the revision query.
    if not (text.isascii() and text.isdigit() and int(text) <= MAX_REVISION):
        raise ApiError.invalid(
            field,
            f"must be a non-negative integer revision (at most {MAX_REVISION}), got {text!r}",
        )
    return int(text)


def too_large_revision(requested: int, current: int) -> ApiError:
    """Kubernetes' answer to a watch from a revision it has not reached yet."""
    message = f"Too large resource version: {requested}, current: {current}"
    return ApiError(
        504,
        message,
        reason="Timeout",
        causes=[
            StatusCause(
                field="resourceVersion",
                message="Too large resource version",
                reason="ResourceVersionTooLarge",
            )
        ],
        headers={"Retry-After": str(TOO_LARGE_RETRY_SECONDS)},
        retry_after_seconds=TOO_LARGE_RETRY_SECONDS,
    )


async def watch_options(
    watch: Annotated[
        bool, Query(description="stream changes as newline-delimited JSON "
                                "(docs/reference.md#change-feeds)")
    ] = False,
    resource_version: Annotated[
        str | None,
        Query(
            alias="resourceVersion",
            max_length=20,
            description="watch: every change after this revision (default: from now)",
        ),
    ] = None,
    timeout_seconds: Annotated[
        int | None,
        Query(alias="timeoutSeconds", ge=1, description="watch: end the stream after this"),
    ] = None,
    *,
    store: StoreDep,
) -> WatchOptions:
    revision = None
    if resource_version not in (None, ""):
        assert resource_version is not None
        revision = parse_revision("resourceVersion", resource_version)
        # A revision this replica has seen committed is not ahead of the hub: only one
        # above it costs a read of the counter (another replica may have committed it).
        if watch and revision > store.feed.known_revision():
            current = await store.feed.current_revision()
            if revision > current:
                raise too_large_revision(revision, current)
    return WatchOptions(watch=watch, resource_version=revision, timeout_seconds=timeout_seconds)


WatchOptionsDep = Annotated[WatchOptions, Depends(watch_options)]
