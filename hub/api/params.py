"""Request parameters shared by several routers: path names and list/watch query options.

Path names are validated here with Kubernetes' own rules (cluster and namespace:
DNS-1123 labels; service name: DNS-1035 label), reusing the patterns of
`shared.models`, so a malformed name is a 422 naming the parameter before any handler
or store code runs. Query options keep Kubernetes' spelling on the wire
(`resourceVersion`, `timeoutSeconds`, `continue`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Query

from hub.api.errors import ApiError
from shared.models import DNS1035_LABEL_RE, DNS1123_LABEL_RE

ClusterPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=63,
        pattern=DNS1123_LABEL_RE.pattern,
        description="member cluster name (DNS-1123 label)",
    ),
]
NamespacePath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=63,
        pattern=DNS1123_LABEL_RE.pattern,
        description="namespace of the exported Service (DNS-1123 label)",
    ),
]
NamePath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=63,
        pattern=DNS1035_LABEL_RE.pattern,
        description="name of the exported Service (DNS-1035 label)",
    ),
]

MAX_LIST_LIMIT = 10_000


@dataclass(frozen=True)
class ListOptions:
    """`limit` + `continue` paging and the `namespace`/`name`/`conflict` filters."""

    namespace: str | None
    name: str | None
    conflict: bool | None
    limit: int | None
    continue_token: str | None


async def list_options(
    namespace: Annotated[
        str | None,
        Query(max_length=63, pattern=DNS1123_LABEL_RE.pattern, description="only this namespace"),
    ] = None,
    name: Annotated[
        str | None,
        Query(max_length=63, pattern=DNS1035_LABEL_RE.pattern, description="only this name"),
    ] = None,
    conflict: Annotated[
        bool | None, Query(description="true: only conflicting; false: only clean")
    ] = None,
    limit: Annotated[
        int | None, Query(ge=1, le=MAX_LIST_LIMIT, description="page size (default: all)")
    ] = None,
    continue_: Annotated[
        str | None,
        Query(alias="continue", max_length=4096, description="token from the previous page"),
    ] = None,
) -> ListOptions:
    return ListOptions(
        namespace=namespace, name=name, conflict=conflict, limit=limit, continue_token=continue_
    )


ListOptionsDep = Annotated[ListOptions, Depends(list_options)]


@dataclass(frozen=True)
class WatchOptions:
    watch: bool
    resource_version: int | None
    timeout_seconds: int | None


MAX_REVISION = 2**63 - 1  # revisions are BIGINT on PostgreSQL, a 64-bit INTEGER on SQLite


async def watch_options(
    watch: Annotated[
        bool, Query(description="stream changes as newline-delimited JSON (SPEC §4.3)")
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
) -> WatchOptions:
    revision = None
    if resource_version not in (None, ""):
        assert resource_version is not None
        # ASCII digits only ("²".isdigit() is true, int("²") raises), and no more than the
        # databases' 64-bit integers hold: either slip was a 500 from the revision query.
        if not (
            resource_version.isascii()
            and resource_version.isdigit()
            and int(resource_version) <= MAX_REVISION
        ):
            raise ApiError.invalid(
                "resourceVersion",
                f"must be a non-negative integer revision (at most {MAX_REVISION}), "
                f"got {resource_version!r}",
            )
        revision = int(resource_version)
    return WatchOptions(watch=watch, resource_version=revision, timeout_seconds=timeout_seconds)


WatchOptionsDep = Annotated[WatchOptions, Depends(watch_options)]
