"""ServiceImport routes (docs/reference.md#conflicts, #rest-api): the per-service view the store
derives on writes, and what a cluster must import (`/clusters/{cluster}/imports`,
docs/reference.md#import-path).

Read-only: a ServiceImport is never written through the API; it changes only as a side
effect of export writes, inside their transactions. The import list is the same for every
cluster (imports are fleet-wide): every ServiceImport, each followed by the
EndpointSliceExports of its key, cut to the ports their source clusters serve.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from hub.api.auth import MemberOrReaderAccess, Principal, ReaderAccess
from hub.api.deps import ContextDep, HubContext, StoreDep
from hub.api.fastpath import fast_path_route
from hub.api.importscope import ScopedImportFeedSource
from hub.api.importselection import SelectedImportFeedSource, SelectionState
from hub.api.jsonbody import StrictJsonRequest
from hub.api.params import (
    ClusterPath,
    ConflictQuery,
    ContinueQuery,
    LimitQuery,
    NamePath,
    NamespacePath,
    NamespaceQuery,
    SearchQuery,
    WatchOptions,
    WatchOptionsDep,
    list_meta,
    read_page,
)
from hub.api.status import documented
from hub.api.watch import WATCH_RESPONSE, ImportFeedSource, WatchSource, open_watch
from hub.api.watchpath import fast_watch
from hub.api.wire import wire
from hub.store import Store
from shared.constants import API_PREFIX
from shared.importreach import where_imported
from shared.models import (
    ClusterImportList,
    Importer,
    ImporterList,
    ServiceImport,
    ServiceImportList,
    to_wire,
)
from shared.selectionview import importer_selections
from shared.timefmt import utcnow

router = APIRouter(prefix=API_PREFIX, tags=["serviceimports"])


@router.get(
    "/serviceimports",
    response_model=ServiceImportList,
    summary="Every derived ServiceImport, with per-cluster status and conflicts",
    responses=documented(401, 403, 422, 503),
)
async def list_imports(
    _access: ReaderAccess,
    store: StoreDep,
    namespace: NamespaceQuery = None,
    conflict: ConflictQuery = None,
    limit: LimitQuery = None,
    continue_: ContinueQuery = None,
    q: SearchQuery = None,
) -> Response:
    """`q` searches in the database, a page at a time (`ImportStore.list`'s `search`)."""
    page = await read_page(
        store.imports.list(
            namespace=namespace,
            conflict=conflict,
            limit=limit,
            continue_token=continue_,
            search=q,
        )
    )
    answer = ServiceImportList(
        metadata=list_meta(page),
        items=page.items,
    )
    return JSONResponse(to_wire(answer))


@router.get(
    "/serviceimports/{namespace}/{name}",
    response_model=ServiceImport,
    summary="One derived ServiceImport",
    responses=documented(401, 403, 404, 422, 503),
)
async def get_import(
    namespace: NamespacePath, name: NamePath, _access: ReaderAccess, store: StoreDep
) -> Response:
    return JSONResponse(to_wire(await store.imports.get(namespace, name)))


@router.get(
    "/serviceimports/{namespace}/{name}/importers",
    response_model=ImporterList,
    summary="Whether each registered cluster imports this Service, and why",
    responses=documented(401, 403, 404, 422, 503),
)
async def list_importers(
    namespace: NamespacePath, name: NamePath, _access: ReaderAccess, store: StoreDep
) -> Response:
    """The rows of `mcsync describe import` (`shared.importreach`), for the console and the
    CLI: they ask the hub rather than restating the scope globs and the reasons, and only
    the hub holds the namespaces each agent reported (`hub.store.clusternamespaces`)."""
    item = await store.imports.get(namespace, name)
    clusters = await store.clusters.list()
    present = await store.cluster_namespaces.present(namespace)
    rows = where_imported(item, clusters, now=utcnow(), namespace_present=present)
    slices = (
        (await store.endpointslices.list(namespace=namespace, service_name=name)).items
        if item.spec.cluster_selectors
        else []
    )
    chosen = importer_selections(item, clusters, slices, [c for c, i, _ in rows if i != "no"])
    importers = []
    for cluster, imports, why in rows:
        one = Importer(cluster=cluster, imports=imports, why=why)
        if (selection := chosen.get(cluster)) is not None:
            one.tiers = [list(tier) for tier in selection.tiers]
            one.active_tier = None if selection.active is None else selection.active + 1
            one.active_clusters = list(selection.active_clusters)
        importers.append(one)
    return JSONResponse(to_wire(ImporterList(items=importers)))


async def _watch_cluster_imports(
    cluster: str, access: Principal, watch: WatchOptions, store: Store, ctx: HubContext
) -> Response:
    """The import watch of `cluster` (`list_cluster_imports` with `watch=true`)."""
    # One read for what the watch starts from: its scope (docs/reference.md#scope-and-limits:
    # None, every namespace), the current revision (its start when none was given) and,
    # docs/reference.md#cluster-selection, the keys whose import-clusters leaves this
    # cluster out at its start revision.
    begin = await store.import_feed.watch_start(cluster, watch.resource_version)
    fleet = ImportFeedSource(store.import_feed)
    scoped: WatchSource = (
        fleet if begin.scope is None else ScopedImportFeedSource(fleet, tuple(begin.scope))
    )
    source = SelectedImportFeedSource(
        scoped, SelectionState(cluster=cluster, excluded=begin.excluded, judged=begin.revision)
    )
    return await open_watch(
        source=source, ctx=ctx, options=watch, principal=access, current=begin.revision
    )


async def list_cluster_imports_fast(request: StrictJsonRequest) -> Response | None:
    """An agent's import watch open, entirely in order, without FastAPI's dependency
    solving (`hub.api.watchpath`); None for anything else, which `list_cluster_imports`
    answers."""
    fast = await fast_watch(request)
    if fast is None:
        return None
    return await _watch_cluster_imports(
        fast.cluster, fast.principal, fast.options, fast.store, fast.ctx
    )


async def list_cluster_imports(
    cluster: ClusterPath,
    access: MemberOrReaderAccess,
    watch: WatchOptionsDep,
    store: StoreDep,
    ctx: ContextDep,
    limit: LimitQuery = None,
    continue_: ContinueQuery = None,
) -> Response:
    """Each slice carries only the ports its source cluster serves in the import; a slice
    whose source serves none of them is left out. `metadata.resourceVersion` is the
    revision to watch from (the first page's, when paging). With `watch=true`: every
    ServiceImport and EndpointSliceExport change of the fleet after `resourceVersion`, in
    revision order, pushed as it commits on any replica (`hub.api.watch`); an object's
    `kind` says which it is. A cluster with `spec.importNamespaces` sees only those
    namespaces (docs/reference.md#scope-and-limits)."""
    if watch.watch:
        return await _watch_cluster_imports(cluster, access, watch, store, ctx)
    # docs/reference.md#scope-and-limits: None, every namespace
    scope = await store.clusters.import_scope(cluster)
    page = await read_page(
        store.import_feed.list_imports(
            limit=limit, continue_token=continue_, namespaces=scope, cluster=cluster
        )
    )
    answer = ClusterImportList(
        metadata=list_meta(page),
        items=page.items,
    )
    return wire(answer)


# Registered without the decorator only to give it its own route class: an agent's watch
# open in order is answered by `list_cluster_imports_fast`, anything else by
# `list_cluster_imports` (`hub.api.fastpath`).
router.add_api_route(
    "/clusters/{cluster}/imports",
    list_cluster_imports,
    methods=["GET"],
    response_model=ClusterImportList,
    summary="Everything a cluster must import (every ServiceImport and EndpointSliceExport), "
    "or watch it (watch=true)",
    responses={200: WATCH_RESPONSE, **documented(401, 403, 410, 422, 429, 503, 504)},
    route_class_override=fast_path_route(list_cluster_imports_fast),
)
