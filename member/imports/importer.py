"""The import side of the agent, wired (docs/reference.md#import-path): informers → three queues →
reconcilers.

    hub import feed ─┐                    ┌► queue "serviceimport"  ─► ServiceImportReconciler
    ServiceImports ──┤                    │
    managed Services ┼─► handlers (key) ──┼► queue "derivedservice" ─► DerivedServiceReconciler
    managed slices ──┤                    │
    Namespaces ──────┘                    └► queue "mirroredslices" ─► MirroredSliceReconciler

Each object kind has its reconciler and its own work queue (`member.workqueue`), keyed
"namespace/name" of the imported Service, separate from the export queues: import work
never starves exports, nor they it, and a slice waiting for its derived Service does not
back off the Service's own reconcile. Each reconciler's module declares its controller
(`member.controller`, as the export side does): `serviceimport_controller`,
`derivedservice_controller`, `mirroredslices_controller`, with the event → key rules of
`member.imports.keys`; this module builds the informers once per kind, keeps the indexes
the mappers read (the observers run before any mapper) and hands every event of a kind to
the controllers that watch it. Which events queue which key where:

* a hub ServiceImport change → all three (its spec shapes all three objects);
* a hub EndpointSliceExport change → the slices only, once the key's derived Service is
  here; before that (a key not yet imported, as during a cold start) a live change goes to
  the live lane of all three, since its slices wait for their owner, which waits for the
  ServiceImport: queued in the slices' lane alone, it would wait behind every bulk key;
* a ServiceImport in the cluster → the ServiceImport (repair a user's edit) and, when it
  appeared, went, went foreign or changed its uid, the derived Service and slices (it is
  their owner: an update that leaves it that, as its status write, concerns them not);
* a managed derived Service → itself and the ServiceImport (`spec.ips` from its
  clusterIPs), and the slices when it appeared, went or changed its uid (their owner);
* a managed EndpointSlice → the slices, and the ServiceImport when it appeared (its
  `Ready` condition waits for the key's slices);
* a Namespace → every key the hub imports in it (a namespace created later receives its
  imports; one deleted takes them along), and the hub hears which namespaces are here
  (`member.imports.namespacesreport`);
* an object in the way of a key that changed or went → the key, in the queues of the
  objects it held up (a channel source, `HELD_BY_SERVICE` / `HELD_BY_SLICE`).

The ServiceImport informer watches every ServiceImport, not only ours: a same-named one
someone else owns must be seen, to be left alone, and its deletion seen, to take over. The
Service and EndpointSlice informers watch only `app.kubernetes.io/managed-by=mcsync`; the
other Services of the watched namespaces come from the export side's informer
(`other_services`, its events through `on_other_service()`). Being labelled is not being
ours (`member.imports.importowners`: the ownerReference uid chain decides), and an object in the
way of a key queues it again when it changes or goes (`InTheWay.cleared()`), so a blocked
key completes without a restart. All
three cache what `member.transform.transform_import_object` keeps: the objects without the
API server's bookkeeping, strings interned (half the memory of the objects as decoded).

Repair (docs/reference.md#import-path "on start and after a relist, delete managed import objects
the hub no longer has"): after every list of the hub's import feed, and at the start of every
leadership term, every key known on either side — the hub's, and those of every managed
object — is queued in the three queues' bulk lanes, so live changes overtake it.

Cluster selection (docs/reference.md#cluster-selection) is one `ImportSelections` the
ServiceImport and slice reconcilers share: a change of its outcome queues both, the end of
a failback wait queues the slices' reconcile at that moment (the queue's add-after), and a
change of cluster properties queues the selecting keys it concerns.

Only the leader writes: the workers run while leading, and every write checks `may_write`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client as k8s
from opentelemetry import trace

from member.clusterproperties import FleetProperties
from member.controller import (
    DERIVED_SERVICES,
    HELD_BY_SERVICE,
    HELD_BY_SLICE,
    HUB_IMPORTS,
    MIRRORED_SLICES,
    NAMESPACES,
    SERVICE_IMPORTS,
    Controller,
    Event,
    InformerHandler,
    dispatch,
)
from member.hubclient import HubClient
from member.imports.base import (
    ImportReconciler,
    ImportScope,
    ManagedIndex,
    NamespaceLister,
)
from member.imports.derivedservice import DerivedServiceReconciler, derivedservice_controller
from member.imports.importfeed import (
    HubImportListWatch,
    ImportView,
    SliceRef,
    import_item_key,
)
from member.imports.importmetrics import ImportMetrics
from member.imports.importowners import DerivedServices, InTheWay
from member.imports.importready import FamilyRefusals
from member.imports.importspec import OPTIONAL_IMPORT_FIELDS, is_managed
from member.imports.keys import ImportKeys
from member.imports.mirroredslices import (
    ChangedSlices,
    MirroredSliceReconciler,
    mirroredslices_controller,
)
from member.imports.namespacesreport import NamespacesReporter
from member.imports.selection import ImportSelections, SelectionMetrics, StaticProperties
from member.imports.serviceimport import (
    ForeignImports,
    ServiceImportReconciler,
    serviceimport_controller,
)
from member.informer import HUB_RECONNECT, Informer, namespaced_key
from member.kube.client import KubeConfigError, discover_mcs_version
from member.kube.events import EventRecorder
from member.kube.importobjects import (
    MANAGED_SELECTOR,
    SERVICEIMPORT_PLURAL,
    ImportObjectClient,
    namespaces_path,
    served_import_fields,
    serviceimports_path,
    services_path,
)
from member.kube.listwatch import KubeListWatch
from member.kube.resources import (
    ENDPOINTSLICE_API_VERSION,
    ENDPOINTSLICE_KIND,
    endpointslices_path,
)
from member.metrics import AgentMetrics
from member.namespaced import NamespacedLister, per_namespace
from member.ownwrites import OwnWrites, RememberingWriter
from member.transform import endpoint_count, transform_import_object
from member.workqueue import WorkQueue, WorkQueueMetrics, run_workers
from shared.constants import MCS_GROUP

__all__ = ["Importer"]

logger = logging.getLogger(__name__)


# The informer of each kind: its source name (`member.controller`) is also its name in
# the relists metric, apart from the export side's "services[*]".
_SOURCES = {
    "ServiceImport": SERVICE_IMPORTS,
    "Service": DERIVED_SERVICES,
    ENDPOINTSLICE_KIND: MIRRORED_SLICES,
}

def _indexing(
    observe: Callable[[dict[str, Any] | None, dict[str, Any] | None], object],
) -> Callable[[Event], None]:
    """An index's `observe(old, new)` as an observer of events (its answer unused)."""

    def note(event: Event) -> None:
        observe(event.old, event.new)

    return note


def _annotations_of_ours(obj: Any) -> Any:
    """A ServiceImport's annotations when mcsync manages it (a restarted agent resumes its
    cluster selection from them), else None."""
    if obj is None or not is_managed(obj):
        return None
    return (obj.get("metadata") or {}).get("annotations")


class _NamespaceLister:
    def __init__(self, informers: Iterable[Informer]) -> None:
        self._informers = list(informers)

    def get(self, key: str) -> dict[str, Any] | None:
        for informer in self._informers:
            found = informer.get(key)
            if found is not None:
                return found
        return None


class Importer:
    """Builds and runs the import side; the agent starts its workers while leading."""

    def __init__(
        self,
        *,
        api: k8s.ApiClient,
        hub: HubClient,
        namespaces: list[str | None],
        deny_namespaces: Iterable[str],
        watch_timeout: int,
        workers: int,
        metrics: AgentMetrics,
        queue_metrics: WorkQueueMetrics,
        events: EventRecorder,
        may_write: Callable[[], bool],
        tracer: trace.Tracer | None = None,
        other_services: NamespaceLister | None = None,
        properties: FleetProperties | None = None,
    ) -> None:
        """`other_services`: every Service of the watched namespaces not labelled managed by
        mcsync (the export side's cache), so that a foreign Service on a derived name is
        seen before a create runs into it; the agent hands its events to
        `on_other_service()`. `properties`: this cluster's and the exporters' cluster
        properties, which cluster selection reads (None: none known, so selectors select
        no cluster and each import's fallback decides)."""
        try:
            self.version = discover_mcs_version(api, SERVICEIMPORT_PLURAL, "ServiceImport")
        except KubeConfigError as exc:
            raise KubeConfigError(f"{exc}, or pass --no-import to export only") from None
        self._workers = workers
        self._scope = {ns for ns in namespaces if ns is not None}
        self.metrics = ImportMetrics(metrics)
        # This cluster imports its own exports too: its sync-latency series exists from
        # start at 0, as every series the agent knows of (others appear with their data).
        self.metrics.sync_latency.labels(hub.config.cluster_id)
        self.queues = {
            name: WorkQueue(name=name, metrics=queue_metrics)
            for name in ("serviceimport", "derivedservice", "mirroredslices")
        }
        self.hub_informer = Informer(
            name="hub-imports",
            list_watch=HubImportListWatch(hub),
            handler=lambda *event: self._handlers[HUB_IMPORTS](*event),
            watch_timeout_seconds=watch_timeout,
            key_func=import_item_key,
            on_list=self.repair,
            reconnect=HUB_RECONNECT,
        )
        self.view = ImportView(self.hub_informer)
        # Which source slices a queued key's mirrored-slice reconcile must look at.
        self.changed_slices = ChangedSlices()

        def informers(
            kind: str, path: Callable[[str | None], str], api_version: str, selector: str | None
        ) -> dict[str | None, Informer]:
            source = _SOURCES[kind]
            return per_namespace(
                namespaces,
                name=source,
                list_watch=lambda ns: KubeListWatch(
                    api,
                    path=path(ns),
                    api_version=api_version,
                    kind=kind,
                    label_selector=selector,
                ),
                # The controllers are declared below (their mappers read the caches built
                # on these informers); the handler is looked up when the first event comes.
                handler=lambda *event: self._handlers[source](*event),
                watch_timeout_seconds=watch_timeout,
                transform=transform_import_object,
            )

        self.import_informers = informers(
            "ServiceImport",
            lambda ns: serviceimports_path(self.version, ns),
            f"{MCS_GROUP}/{self.version}",
            None,
        )
        self.service_informers = informers("Service", services_path, "v1", MANAGED_SELECTOR)
        self.slice_informers = informers(
            ENDPOINTSLICE_KIND, endpointslices_path, ENDPOINTSLICE_API_VERSION, MANAGED_SELECTOR
        )
        self.namespace_informers = [
            Informer(
                name=f"namespaces[{ns or '*'}]",
                list_watch=KubeListWatch(
                    api,
                    path=namespaces_path(),
                    api_version="v1",
                    kind="Namespace",
                    field_selector=f"metadata.name={ns}" if ns else None,
                ),
                handler=lambda *event: self._handlers[NAMESPACES](*event),
                watch_timeout_seconds=watch_timeout,
            )
            for ns in namespaces
        ]
        cached_imports = NamespacedLister(self.import_informers)
        cached_slices = NamespacedLister(self.slice_informers)
        # The caches, corrected by our own writes until their events arrive.
        service_imports = OwnWrites(cached_imports)
        services = OwnWrites(NamespacedLister(self.service_informers))
        self._services = services
        slices = OwnWrites(cached_slices)
        self.slice_index = ManagedIndex(slices)
        self.service_index = ManagedIndex(services)
        scope = ImportScope(
            namespaces=_NamespaceLister(self.namespace_informers),
            watched=self._scope,
            denied=deny_namespaces,
        )

        # docs/reference.md#scope-and-limits: the hub hears which namespaces are here.
        self.namespaces_report = NamespacesReporter(
            hub=hub,
            cached=lambda: [o for i in self.namespace_informers for o in i.list_cached()],
            holds=scope.holds,
            synced=lambda: all(i.has_synced() for i in self.namespace_informers),
        )

        def imported() -> int:
            return sum(1 for o in cached_imports.cached() if is_managed(o))

        def endpoints() -> int:
            return sum(endpoint_count(o) for o in cached_slices.cached())

        self.metrics.count_with(imported=imported, endpoints=endpoints)
        # (managed ServiceImports, endpoints over managed slices): the heartbeat says them.
        self.counts: Callable[[], tuple[int, int]] = lambda: (imported(), endpoints())
        foreign = ForeignImports(on_change=self.metrics.unmanaged.set)
        # A derived Service refused (or accepted again) for its IP families: the
        # ServiceImport's Ready condition says so (`member.imports.importready`).
        refusals = FamilyRefusals(
            on_change=lambda key: self._queue(key, bulk=False, which=("serviceimport",))
        )
        self._service_imports = service_imports
        self.derived = DerivedServices(
            managed=services, service_imports=service_imports, others=other_services
        )
        self.in_the_way = InTheWay(events)

        def selection_event(key: str, type_: str, reason: str, message: str) -> None:
            obj = service_imports.get(key)
            if obj is not None and is_managed(obj):
                about = {**obj, "apiVersion": f"{MCS_GROUP}/{self.version}",
                         "kind": "ServiceImport"}
                events.record(about, type=type_, reason=reason, message=message)

        self.selections = ImportSelections(
            imports=self.view,
            properties=properties if properties is not None else StaticProperties(),
            metrics=SelectionMetrics(metrics),
            on_change=lambda key: self._queue(
                key, bulk=False, which=("serviceimport", "mirroredslices")
            ),
            wake=self._wake,
            events=selection_event,
            recorded=lambda key: _annotations_of_ours(service_imports.get(key)),
        )
        common: dict[str, Any] = {
            "imports": self.view,
            "service_imports": service_imports,
            "services": services,
            "scope": scope,
            "metrics": metrics,
            "import_metrics": self.metrics,
            "may_write": may_write,
            "tracer": tracer,
            "derived": self.derived,
            "in_the_way": self.in_the_way,
        }
        self.reconcilers: dict[str, ImportReconciler] = {
            "serviceimport": ServiceImportReconciler(
                writer=RememberingWriter(
                    ImportObjectClient(api, kind="ServiceImport", version=self.version),
                    service_imports,
                ),
                events=events,
                foreign=foreign,
                optional_fields=served_import_fields(api, self.version, OPTIONAL_IMPORT_FIELDS),
                refusals=refusals,
                slices=self.slice_index,
                selection=self.selections,
                **common,
            ),
            "derivedservice": DerivedServiceReconciler(
                writer=RememberingWriter(
                    ImportObjectClient(api, kind="Service"), services, self.service_index
                ),
                refusals=refusals,
                **common,
            ),
            "mirroredslices": MirroredSliceReconciler(
                writer=RememberingWriter(
                    ImportObjectClient(api, kind="EndpointSlice"), slices, self.slice_index
                ),
                slices=self.slice_index,
                changed=self.changed_slices,
                selection=self.selections,
                **common,
            ),
        }
        keys = ImportKeys(view=self.view, watched=self._watched, owner_here=self._owner_here)
        self.controllers: list[Controller] = [
            serviceimport_controller(
                self.reconcilers["serviceimport"], self.queues["serviceimport"], keys
            ),
            derivedservice_controller(
                self.reconcilers["derivedservice"], self.queues["derivedservice"], keys
            ),
            mirroredslices_controller(
                self.reconcilers["mirroredslices"], self.queues["mirroredslices"], keys,
                self.changed_slices,
            ),
        ]
        # What the mappers read is noted first: the hub's view and the managed objects'
        # indexes, and the keys an object in the way held up, released by its event.
        observers: dict[str, list[Callable[[Event], None]]] = {
            HUB_IMPORTS: [_indexing(self.view.observe)],
            DERIVED_SERVICES: [
                _indexing(self.service_index.observe),
                lambda e: self._release(HELD_BY_SERVICE, "Service", e),
            ],
            MIRRORED_SLICES: [
                _indexing(self.slice_index.observe),
                lambda e: self._release(HELD_BY_SLICE, ENDPOINTSLICE_KIND, e),
            ],
            NAMESPACES: [lambda _: self.namespaces_report.wake()],
        }
        self._handlers: dict[str, InformerHandler] = {
            source: dispatch(self.controllers, source, observers.get(source, ()))
            for source in (HUB_IMPORTS, SERVICE_IMPORTS, DERIVED_SERVICES, MIRRORED_SLICES,
                           NAMESPACES, HELD_BY_SERVICE, HELD_BY_SLICE)
        }

    # -- running ----------------------------------------------------------------------------

    def informers(self) -> list[Informer]:
        return [
            self.hub_informer,
            *self.import_informers.values(),
            *self.service_informers.values(),
            *self.slice_informers.values(),
            *self.namespace_informers,
        ]

    def start_workers(self, stop: threading.Event) -> list[threading.Thread]:
        """Workers of the three controllers, until `stop` (the end of a leadership term)."""
        threads: list[threading.Thread] = []
        for controller in self.controllers:
            threads += run_workers(
                controller.queue, process=controller.reconcile, workers=self._workers,
                stop=stop,
            )
        return threads

    def shutdown(self) -> None:
        for queue in self.queues.values():
            queue.shutdown()

    def repair(self) -> None:
        """Queue every key either side knows, in the bulk lanes (see the module doc)."""
        keys = self.view.keys() | self.slice_index.keys() | self.service_index.keys()
        keys |= {namespaced_key(o) for i in self.import_informers.values() for o in i.list_cached()}
        keys = {k for k in keys if self._watched(k)}
        for key in keys:
            self._queue(key, bulk=True)
        logger.info("import repair: %d keys queued", len(keys))

    # -- events → queues ----------------------------------------------------------------------

    def _queue(
        self,
        key: str,
        *,
        bulk: bool,
        which: Iterable[str] | None = None,
        source: SliceRef | None = None,
    ) -> None:
        """Queue `key` outside the informers' events (a selection's change, a refusal, the
        repair). `source`: the one source slice that changed (None: the whole key)."""
        if not self._watched(key):
            return
        for name in which if which is not None else self.queues:
            if name == "mirroredslices":
                self.changed_slices.mark(key, source)
            self.queues[name].add(key, bulk=bulk)

    def _wake(self, key: str, delay: float) -> None:
        """A failback wait of `key` ends in `delay` seconds: reconcile its slices then (the
        reconcile re-evaluates the selection and queues the ServiceImport if it moved)."""
        if self._watched(key):
            self.queues["mirroredslices"].add_after(key, delay)

    def _watched(self, key: str) -> bool:
        return not self._scope or key.partition("/")[0] in self._scope

    def on_hub_event(
        self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any] | None,
        from_relist: bool,
    ) -> None:
        """The hub import feed's handler: queue the keys a change of it touches."""
        self._handlers[HUB_IMPORTS](event_type, old, new, from_relist)

    def _owner_here(self, key: str) -> bool:
        """True when `key`'s derived Service is ours in the cache: its slices need nothing
        else to be reconciled (`MirroredSliceReconciler` step 2)."""
        return self.derived.ours(key, self._service_imports.get(key)) is not None

    def on_other_service(self, event: Event) -> None:
        """An event of a Service not managed by mcsync (the export side's informer): the
        keys it held up, if any, are reconciled again (`member.imports.importowners.InTheWay`)."""
        self._release(HELD_BY_SERVICE, "Service", event)

    def _release(self, channel: str, kind: str, event: Event) -> None:
        """An object of `kind` that held up keys changed or went: each key it held becomes
        an event of the `channel` source, whose watchers queue it again."""
        for key in sorted(self.in_the_way.cleared(kind, event.obj)):
            namespace, _, name = key.partition("/")
            named = {"metadata": {"namespace": namespace, "name": name}}
            self._handlers[channel](event.type, None, named, event.from_relist)
