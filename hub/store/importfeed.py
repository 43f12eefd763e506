"""The import feed's read half: what a watch or a list of a cluster's imports reads (see
`docs/reference.md#import-path` and `docs/reference.md#change-feeds`).

The history rows are written, already cut to what importers see, by the write half
(`hub.store.importchanges`); this module replays them from a revision (`imports_since`,
paged by the replica's one shared reader `hub.store.fanout`, each change read and encoded
once) and lists the store as it is now (`list_imports`), applying the same rule of what
an importer sees (`hub.store.importview.importer_sees`), scoped to a cluster's
`spec.importNamespaces` and `mcsync.io/import-clusters` (`hub.store.importselection`).

Why the cut is here: reading needs the store context's read transactions and the fan-out,
writing needs the keys' locks and the revision counter; neither half imports the other,
as the apiserver keeps `watcher.go` apart from `etcd3/store.go`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, bindparam, exists, false, or_, select, tuple_
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import paging
from hub.store.context import StoreContext
from hub.store.fanout import BufferLimits, FeedFanout, Subscription
from hub.store.feed import check_history_read, read_retained
from hub.store.importselection import ImportWatchStart, import_watch_start
from hub.store.importview import Triple, import_text, importer_sees, served_ports, slice_text
from hub.store.results import Page
from hub.store.revisions import read_current_revision
from hub.store.sharedreader import SharedReader
from hub.store.tables import (
    changes,
    endpoint_slices,
    endpoint_withdrawals,
    import_exclusions,
    service_imports,
)
from shared import constants
from shared.models import EndpointSliceExport, ServiceImport, WatchEvent

IMPORT_KINDS: tuple[str, str] = (constants.KIND_IMPORT, constants.KIND_ENDPOINT_SLICE)
_LIST_KIND = "clusterimports"


# The escape character of the LIKE patterns made from `*` globs: a namespace is a DNS label
# (`[a-z0-9-]`), so neither it nor `%`/`_` can be in a pattern, but each is escaped all the
# same, so that what LIKE matches is what `shared.scope.glob_matches` matches.
_LIKE_ESCAPE = "/"


def like_pattern(glob: str) -> str:
    """`glob` (`*` = any run of characters, `shared.scope`) as a LIKE pattern escaped with
    `_LIKE_ESCAPE`."""
    escaped = "".join(_LIKE_ESCAPE + c if c in ("%", "_", _LIKE_ESCAPE) else c for c in glob)
    return escaped.replace("*", "%")


def prefix_range(glob: str) -> tuple[str, str] | None:
    """The names that start with `glob`'s literal prefix (before its first `*`) as a
    half-open range [low, high) in code-point order (both databases order these columns so,
    `hub.store.tables.key_string`), or None when `glob` starts with `*`. An index serves a
    range on both databases, whereas SQLite serves no LIKE by index (its LIKE ignores
    case; the column's collation does not)."""
    prefix = glob[: glob.index("*")]
    if not prefix:
        return None
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def namespace_filter(column: Any, patterns: Sequence[str]) -> Any:
    """`column` matches one of `patterns` (names, `*` globs: `shared.scope`), in SQL: names
    by IN, globs by LIKE (`like_pattern`) within their literal prefix's range
    (`prefix_range`), so that an index on `column` serves both on both databases."""
    exact = [p for p in patterns if "*" not in p]
    parts = [column.in_(exact)] if exact else []
    for glob in (p for p in patterns if "*" in p):
        like = column.like(like_pattern(glob), escape=_LIKE_ESCAPE)
        bounds = prefix_range(glob)
        parts.append(
            like if bounds is None else and_(column >= bounds[0], column < bounds[1], like)
        )
    return or_(*parts) if parts else false()


def _not_excluded(cluster: str, namespace: Any, name: Any) -> Any:
    """The key (`namespace`, `name` columns) does not leave `cluster` out."""
    return ~exists().where(
        import_exclusions.c.cluster_id == cluster,
        import_exclusions.c.namespace == namespace,
        import_exclusions.c.name == name,
    )


@dataclass(frozen=True)
class ImportRow:
    """One retained import-feed change as read; decoded only when `event()` is called.

    `line()` is the change as one newline-delimited JSON watch event, built from the
    stored text without decoding it, so that a fan-out encodes each change once and
    hands the same bytes to every watcher.
    """

    revision: int
    cluster_id: str  # the source cluster of a slice; "" for a ServiceImport
    type: str
    kind: str
    text: str
    namespace: str = ""

    @property
    def key(self) -> str | None:
        """The fan-out's routing key: the namespace, since a cluster's import scope is a
        set of namespaces (`hub.store.fanout` indexes watches by it)."""
        return self.namespace

    def event(self) -> WatchEvent:
        obj: ServiceImport | EndpointSliceExport
        if self.kind == constants.KIND_IMPORT:
            obj = ServiceImport.model_validate_json(self.text)
        else:
            obj = EndpointSliceExport.model_validate_json(self.text)
        return WatchEvent(type=self.type, object=obj)  # type: ignore[arg-type]

    def line(self) -> bytes:
        return b'{"type":"' + self.type.encode() + b'","object":' + self.text.encode() + b"}\n"


ImportItem = ServiceImport | EndpointSliceExport


@functools.lru_cache(maxsize=8)
def _imports_after(limit: int) -> Select[Any]:
    """The import feed's history read of `ImportFeed.imports_since`, built once per page
    size (the shared reader reads one page per change), the revision bound at execution."""
    return (
        select(
            changes.c.revision,
            changes.c.cluster_id,
            changes.c.type,
            changes.c.kind,
            changes.c.object,
            changes.c.namespace,
        )
        .where(changes.c.revision > bindparam("after"), changes.c.kind.in_(IMPORT_KINDS))
        .order_by(changes.c.revision)
        .limit(limit)
    )


@functools.lru_cache(maxsize=64)
def _scoped_imports_after(limit: int, globs: tuple[bool, ...]) -> Select[Any]:
    """`_imports_after` cut to an import scope (`ImportFeed.imports_since(scope=…)`): the
    rows whose namespace is one of the bound `names` (the scope's plain names and '') or
    matches one of its globs (bound `glob{i}`, within `low{i}`..`high{i}` when `globs[i]`
    says it has a literal prefix, `prefix_range`). Built once per page size and shape of
    scope, the names and patterns bound at execution; served by the index on (namespace,
    kind, revision) on both databases (migration 0012)."""
    column = changes.c.namespace
    terms: list[Any] = [column.in_(bindparam("names", expanding=True))]
    for index, prefixed in enumerate(globs):
        like = column.like(bindparam(f"glob{index}"), escape=_LIKE_ESCAPE)
        if prefixed:
            low: Any = bindparam(f"low{index}")
            high: Any = bindparam(f"high{index}")
            terms.append(and_(column >= low, column < high, like))
        else:
            terms.append(like)
    return _imports_after(limit).where(or_(*terms))


def _scope_read(limit: int, scope: Sequence[str] | None) -> tuple[Select[Any], dict[str, Any]]:
    """The history read of `imports_since` for `scope` and its bound values. A scope with a
    glob that is all `*` holds every namespace: it reads as the unscoped history."""
    if scope is None or any(set(p) == {"*"} for p in scope):
        return _imports_after(limit), {}
    # Rows of no namespace are kept: a scope cuts namespaces, and such a row is of none.
    parameters: dict[str, Any] = {"names": ["", *(p for p in scope if "*" not in p)]}
    shape: list[bool] = []
    for index, glob in enumerate(p for p in scope if "*" in p):
        parameters[f"glob{index}"] = like_pattern(glob)
        bounds = prefix_range(glob)
        if bounds is not None:
            parameters[f"low{index}"], parameters[f"high{index}"] = bounds
        shape.append(bounds is not None)
    return _scoped_imports_after(limit, tuple(shape)), parameters


class ImportFeed:
    """Reads of the import feed: the history after a revision, the paged list, and the
    replica's one shared reader that feeds every import watch (`hub.store.fanout`: each
    change read and encoded once, its bytes shared by every agent's watch)."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._reader = SharedReader(ctx, self.imports_since, name="import-feed")

    async def current_revision(self) -> int:
        async with self._ctx.read() as conn:
            return await read_current_revision(conn)

    async def watch_start(self, cluster: str, revision: int | None) -> ImportWatchStart:
        """What the import watch of `cluster` from `revision` (None: from now) starts from:
        its scope, its start revision and the keys it is left out of then, in one read
        transaction (`importselection.import_watch_start`)."""
        return await import_watch_start(self._ctx, cluster, revision)

    async def changes_since(self, *, revision: int, limit: int = 500) -> list[WatchEvent]:
        """`imports_since`, decoded: what a watch replays from the history."""
        return [row.event() for row in await self.imports_since(revision, limit)]

    @property
    def fanout(self) -> FeedFanout:
        return self._reader.get()

    def subscribe(
        self,
        *,
        scope: Sequence[str] | None = None,
        limits: BufferLimits | None = None,
        on_overflow: Callable[[], object] | None = None,
    ) -> Subscription:
        """Receive every import change after `joined_at` as shared wire lines (the
        contract of `Feed.subscribe`), fleet-wide, or of the namespaces `scope` allows
        (a cluster's `spec.importNamespaces`): only those are handed to it."""
        return self.fanout.subscribe(None, scope=scope, limits=limits, on_overflow=on_overflow)

    async def close(self) -> None:
        await self._reader.close()

    async def imports_since(
        self, revision: int, limit: int = 500, *, scope: Sequence[str] | None = None
    ) -> list[ImportRow]:
        """Every retained import-feed change after `revision`, oldest first, at most
        `limit` (ask again from the last one's revision for more). The same contract as
        the export history read (`Feed.rows_since`), so `hub.store.fanout` can page it.

        `scope`: a cluster's `spec.importNamespaces` (names and `*` globs,
        `docs/reference.md#scope-and-limits`): only the changes of the namespaces it
        holds, and of none (''), are read, the cut made in SQL (`_scoped_imports_after`),
        so that a scoped watch's replay costs the changes of its scope, not the fleet's
        (docs/reference.md#fleet-scale). None (the shared reader, an unscoped watch): every
        change. The page and its end mean the same either way: a page shorter than
        `limit` holds every change of the scope after `revision` that was committed when
        it was read.

        Gone when a change after `revision` has been pruned from the history, whatever
        its namespace.
        """
        check_history_read(revision, limit)
        query, bound = _scope_read(limit, scope)
        rows = await read_retained(
            self._ctx,
            query,
            revision=revision,
            relist="relist the imports and watch from the list's resourceVersion",
            parameters={"after": revision, **bound},
        )
        return [
            ImportRow(
                revision=int(r.revision),
                cluster_id=r.cluster_id,
                type=r.type,
                kind=r.kind,
                text=r.object,
                namespace=r.namespace,
            )
            for r in rows
        ]

    async def list_imports(
        self,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        namespaces: Sequence[str] | None = None,
        cluster: str | None = None,
    ) -> Page[ImportItem]:
        """Everything a cluster must import (the same for every cluster): each
        ServiceImport followed by the slices of its key, in (namespace, name, cluster,
        slice) order, each slice cut to what its source serves; slices a source serves
        none of the ports of are left out. A page at a time.

        `resource_version` is the revision read first: every change after it reaches a
        watch from it, and the rows read include every change up to it. ValueError on a
        malformed continue token or a limit below 1.

        `namespaces`: the importing cluster's `spec.importNamespaces` (names and `*`
        globs, `docs/reference.md#scope-and-limits`): only those namespaces' imports and
        slices are read (None: all).
        `cluster`: the importing cluster; the keys whose `mcsync.io/import-clusters` leaves
        it out are not read (`importselection`).
        """
        paging.check_limit(limit)
        after: tuple[str, ...] | None = None
        if continue_token is not None:
            after = paging.decode(_LIST_KIND, continue_token, width=4)
        imports_query = (
            select(service_imports)
            .where(service_imports.c.created_at.is_not(None))
            .order_by(service_imports.c.namespace, service_imports.c.name)
        )
        # Each slice with its key's import status, in one statement (one snapshot), so its
        # cut agrees with the lists it was cut by.
        slices_query = (
            select(endpoint_slices, service_imports.c.status)
            .select_from(
                endpoint_slices.join(
                    service_imports,
                    and_(
                        service_imports.c.namespace == endpoint_slices.c.namespace,
                        service_imports.c.name == endpoint_slices.c.service_name,
                    ),
                )
            )
            .order_by(
                endpoint_slices.c.namespace,
                endpoint_slices.c.service_name,
                endpoint_slices.c.cluster_id,
                endpoint_slices.c.name,
            )
        )
        if after is not None:
            ns, name, cluster, slice_name = after
            # A ServiceImport sorts as (ns, name, "", ""), before its own slices: whether
            # the last item was the import of (ns, name) or one of its slices, the next
            # import is a later key.
            imports_query = imports_query.where(
                tuple_(service_imports.c.namespace, service_imports.c.name) > tuple_(ns, name)
            )
            slices_query = slices_query.where(
                tuple_(
                    endpoint_slices.c.namespace,
                    endpoint_slices.c.service_name,
                    endpoint_slices.c.cluster_id,
                    endpoint_slices.c.name,
                )
                > tuple_(ns, name, cluster, slice_name)
            )
        if namespaces is not None:
            imports_query = imports_query.where(
                namespace_filter(service_imports.c.namespace, namespaces)
            )
            slices_query = slices_query.where(
                namespace_filter(endpoint_slices.c.namespace, namespaces)
            )
        if cluster is not None:
            imports_query = imports_query.where(
                _not_excluded(cluster, service_imports.c.namespace, service_imports.c.name)
            )
            slices_query = slices_query.where(
                _not_excluded(cluster, endpoint_slices.c.namespace, endpoint_slices.c.service_name)
            )
        if limit is not None:
            # Every slice the page can hold may be invisible, so slices are read in pages
            # until the merged page is full or they run out.
            imports_query = imports_query.limit(limit + 1)
        async with self._ctx.read() as conn:
            revision = await read_current_revision(conn)
            import_rows = (await conn.execute(imports_query)).mappings().all()
            withheld = {
                (c, ns, svc) for c, ns, svc in await conn.execute(select(endpoint_withdrawals))
            }
            merged = await self._merge(
                conn, import_rows, slices_query, limit=limit, withheld=withheld
            )
        page, token = paging.cut(merged, limit, _LIST_KIND, lambda m: m[0])
        return Page(
            items=[item for _, item in page],
            resource_version=str(revision),
            continue_token=token,
        )

    async def _merge(
        self,
        conn: AsyncConnection,
        import_rows: Sequence[RowMapping],
        slices_query: Any,
        *,
        limit: int | None,
        withheld: set[Triple],
    ) -> list[tuple[tuple[str, str, str, str], ImportItem]]:
        """The imports and the imported slices in list order, at least `limit + 1` of them
        when there are that many (all when `limit` is None); the slices of `withheld`
        exports are left out."""
        slices: list[tuple[tuple[str, str, str, str], ImportItem]] = []
        page = None if limit is None else limit + 1
        last: tuple[str, str, str, str] | None = None
        while True:
            query = slices_query
            if last is not None:
                query = query.where(
                    tuple_(
                        endpoint_slices.c.namespace,
                        endpoint_slices.c.service_name,
                        endpoint_slices.c.cluster_id,
                        endpoint_slices.c.name,
                    )
                    > tuple_(*last)
                )
            if page is not None:
                query = query.limit(page)
            rows = (await conn.execute(query)).mappings().all()
            for row in rows:
                sort_key = (row["namespace"], row["service_name"], row["cluster_id"], row["name"])
                last = sort_key
                served = served_ports(row["status"]).get(row["cluster_id"])
                imported, view = importer_sees(
                    json.loads(row["spec"]),
                    served,
                    withheld=(row["cluster_id"], row["namespace"], row["service_name"]) in withheld,
                )
                if not imported:
                    continue
                item = EndpointSliceExport.model_validate_json(
                    slice_text(
                        namespace=row["namespace"],
                        name=row["name"],
                        resource_version=int(row["resource_version"]),
                        created_at=row["created_at"],
                        spec=view,
                    )
                )
                slices.append((sort_key, item))
            # The first `page` imports and the first `page` imported slices hold the
            # first `page` items of the list; slices left out (not imported) are read past.
            if page is None or len(rows) < page or len(slices) >= page:
                break
        imports: list[tuple[tuple[str, str, str, str], ImportItem]] = [
            (
                (row["namespace"], row["name"], "", ""),
                ServiceImport.model_validate_json(
                    import_text(
                        namespace=row["namespace"],
                        name=row["name"],
                        resource_version=int(row["resource_version"]),
                        created_at=row["created_at"],
                        spec_text=row["spec"],
                        status_text=row["status"],
                    )
                ),
            )
            for row in import_rows
        ]
        return sorted([*imports, *slices], key=lambda pair: pair[0])
