"""The agent, wired from its settings: informers → two work queues → two reconcilers.

    Services ─┐                 ┌► WorkQueue "serviceexport" ─► workers ─► ExportReconciler
    ServiceExports ─┼─► handlers ─┤   (relist → bulk lane, live → live lane)         │
    hub records (feed) ─┤         └► WorkQueue "endpointslice" ─► workers ─► SliceExportReconciler
    EndpointSlices ─┘                                                    HubClient / kube writes

* Three kinds of informer feed one queue keyed "namespace/name": Services (a Service's key
  is its ServiceExport's key), ServiceExports (one informer per watched namespace, or one
  for all) and the hub's own records of this cluster (`member.hubfeed`), so the hub's
  change feed and "relist on 410, then repair" run on the same machinery as Kubernetes'.
  Events from a (re)list go to the queue's bulk lane, live events to the live lane: a
  startup repair of 10,000 keys never delays a fresh change (docs/reference.md#export-path).
* EndpointSlices (docs/reference.md#import-path) have a queue of their own, keyed by the same
  Service key: a Service, ServiceExport or hub record event queues the key in both, a slice event in
  the slice queue only. Why two queues, and how the slices' repair runs as a queue item, is
  `member.export.sliceexport`'s docstring. A hub record that goes (the hub withdrew
  its slices with it) makes the slice reconciler forget what it had sent of that Service.
* Import (docs/reference.md#import-path) is `member.imports.importer`: its own informers (the hub's
  import feed, the cluster's ServiceImports, managed Services and EndpointSlices, Namespaces), three
  queues and three reconcilers, started and stopped with leadership like the export workers;
  `--no-import` leaves it out.
* Each controller declares what it watches and how events map to its queue keys beside its
  reconcile (`member.controller`; `export_controller`, `slice_controller`), as
  controller-runtime's builder does; here the informers are built once per kind and every
  event goes to the controllers that watch that kind, after the notes the agent keeps
  (the withdrawal guard's, the hub view's settled writes, the importer's other Services).
* Workers start only once every informer has synced. Before that, a key the hub knows and
  the ServiceExport cache does not *yet* know would look like an orphan and be deleted.
* After every hub (re)list, and at the start of every leadership term, every key known on
  either side is queued in the bulk lane: the "repair both ways" of docs/reference.md#export-path.
* A repair that would withdraw most of the cluster's exports at once withdraws none of them
  (`member.export.withdrawalguard`, docs/reference.md#failover): the guard judges each
  repair and each new list of the hub's records or the ServiceExports, the heartbeat reports
  what it holds and brings back the admin's allowance. ServiceExports deleted while watched
  are ordinary unexports.
* With `--leader-elect`, informers, the hub feed and heartbeats run on every replica (a new
  leader starts warm) but only the leader runs workers. Losing the Lease stops writing at
  once: the reconciler checks `may_write()` before each write.
* `/metrics`, `/healthz` (alive) and `/readyz` (informers synced and hub reachable) are
  served on `--metrics-port` from the agent's own registry (one per Agent, so tests can
  run several agents in one process).
* Each informer caches only what the agent reads of its objects (`member.transform`,
  client-go's `SetTransform`): with 10,000 Services that is most of the agent's memory.
* Tracing: a provider handed in traces each reconcile and, through httpx's
  instrumentation, each hub request as its child; the hub continues the trace from the
  `traceparent` header.
* Stopping (SIGTERM): stop taking work, let each worker finish the key in hand, release
  the Lease, stop the informers, exit 0.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client as k8s
from opentelemetry import trace
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from member.clusteridentity import AboutApi, ClustersetProperty, resolve_cluster_id
from member.clusterproperties import FleetPropertiesView
from member.controller import (
    ENDPOINT_SLICES,
    HUB_RECORDS,
    SERVICE_EXPORTS,
    SERVICES,
    Event,
    dispatch,
)
from member.duration import DurationRecorder
from member.export.invalidexports import InvalidExportsReporter
from member.export.sentslices import SentSlices
from member.export.serviceexport import ExportParts, ExportReconciler, export_controller
from member.export.sliceexport import REPAIR_KEY, SliceExportReconciler, slice_controller
from member.export.sliceindex import SlicesByService
from member.export.withdrawalguard import WithdrawalGuard
from member.heartbeat import FIRST_BEAT_WAIT_SECONDS, HeartbeatLoop, VersionGate
from member.hubclient import HubClient, HubClientConfig, idle_connection_seconds
from member.hubfeed import HubExportListWatch, HubView, record_key
from member.imports.importer import Importer
from member.imports.propertiesfeed import PropertiesFeed
from member.informer import HUB_RECONNECT, Informer, namespaced_key
from member.kube.client import discover_serviceexport_version, load_api_client
from member.kube.events import EventRecorder
from member.kube.leader import LeaderElector
from member.kube.listwatch import (
    EndpointSliceListWatch,
    ServiceExportListWatch,
    ServiceListWatch,
)
from member.kube.resources import ServiceExportClient
from member.metrics import AgentMetrics
from member.namespaced import NamespacedLister, per_namespace
from member.propertiesreport import PropertiesReporter
from member.settings import AgentSettings
from member.transform import (
    transform_endpointslice,
    transform_hub_record,
    transform_service,
    transform_service_export,
)
from member.workqueue import WorkQueue, WorkQueueMetrics, run_workers
from shared.version import __version__

__all__ = ["Agent", "HealthServer", "NamespacedLister"]

logger = logging.getLogger(__name__)

QUEUE_NAME = "serviceexport"
SLICE_QUEUE_NAME = "endpointslice"
# How long a stopping agent waits for workers to finish the keys in hand.
_WORKER_JOIN_SECONDS = 30.0


class Agent:
    """One member agent: build with `Agent(settings, token=…)`, then `run(stop)`."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        token: str,
        api: k8s.ApiClient | None = None,
        registry: CollectorRegistry | None = None,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        """Build every part. Raises `KubeConfigError` when the cluster cannot be used.

        `tracer_provider`: trace reconciles and hub requests with it (`shared.tracing`
        builds one from `OTEL_*`); None: OpenTelemetry's global one (a no-op unless set).
        """
        self.metrics = AgentMetrics(registry=registry)
        # The metrics port first: a port another process holds is reported before anything
        # talks to the cluster (one line, `__main__`), and a cluster that cannot be used
        # then gives the port back.
        self.health = HealthServer(
            host=settings.metrics_host,
            port=settings.metrics_port,
            registry=self.metrics.registry,
            ready=self.readiness,
        )
        try:
            self._build(settings, token=token, api=api, tracer_provider=tracer_provider)
        except BaseException:
            self.health.close()
            raise

    def _build(
        self,
        settings: AgentSettings,
        *,
        token: str,
        api: k8s.ApiClient | None,
        tracer_provider: trace.TracerProvider | None,
    ) -> None:
        self.api = api if api is not None else load_api_client(kubeconfig=settings.kubeconfig)
        self.mcs_version = discover_serviceexport_version(self.api)
        # docs/reference.md#export-path (KEP-2149): --cluster-id and/or the About API's
        # ClusterProperty.
        self.about = AboutApi(self.api)
        self.cluster_id = resolve_cluster_id(self.about, given=settings.cluster_id)
        settings = settings.model_copy(update={"cluster_id": self.cluster_id})
        self.settings = settings
        self.clusterset = ClustersetProperty(self.about, hub_url=settings.hub_url,
                                             on_fatal=self._fatal_stop)
        self.fatal: str | None = None  # why the agent stopped itself (__main__ prints it)
        self._stop: threading.Event | None = None
        self.metrics.info.labels(self.cluster_id, __version__).set(1)
        self.hub = HubClient(
            HubClientConfig(
                base_url=settings.hub_url,
                cluster_id=self.cluster_id,
                token=token,
                # A rotated token reaches the agent through this file, without a restart.
                token_file=settings.token_file,
                verify=str(settings.hub_ca_file) if settings.hub_ca_file else True,
                keepalive_expiry=idle_connection_seconds(settings.heartbeat_interval),
            ),
            metrics=self.metrics.hub,
        )
        if tracer_provider is not None:
            self.hub.instrument(tracer_provider)
        queue_metrics = WorkQueueMetrics(registry=self.metrics.registry)
        self.queue = WorkQueue(name=QUEUE_NAME, metrics=queue_metrics)
        self.slice_queue = WorkQueue(name=SLICE_QUEUE_NAME, metrics=queue_metrics)

        namespaces = settings.watched_namespaces()
        self._scope = {ns for ns in namespaces if ns is not None}
        timeout = settings.watch_timeout
        self.service_informers = per_namespace(
            namespaces,
            name="services",
            list_watch=lambda ns: ServiceListWatch(self.api, namespace=ns),
            # The controllers are declared below (they read the listers built on these
            # informers); their handlers are looked up when the first event comes.
            handler=lambda *event: self._handlers[SERVICES](*event),
            watch_timeout_seconds=timeout,
            transform=transform_service,
        )
        self.export_informers = per_namespace(
            namespaces,
            name="serviceexports",
            list_watch=lambda ns: ServiceExportListWatch(
                self.api, version=self.mcs_version, namespace=ns
            ),
            handler=lambda *event: self._handlers[SERVICE_EXPORTS](*event),
            watch_timeout_seconds=timeout,
            transform=transform_service_export,
        )
        self.slice_informers = per_namespace(
            namespaces,
            name="endpointslices",
            list_watch=lambda ns: EndpointSliceListWatch(self.api, namespace=ns),
            handler=lambda *event: self._handlers[ENDPOINT_SLICES](*event),
            watch_timeout_seconds=timeout,
            transform=transform_endpointslice,
        )
        self.hub_informer = Informer(
            name="hub",
            list_watch=HubExportListWatch(self.hub),
            handler=lambda *event: self._handlers[HUB_RECORDS](*event),
            watch_timeout_seconds=timeout,
            key_func=record_key,
            on_list=self._repair,
            transform=transform_hub_record,
            reconnect=HUB_RECONNECT,
        )
        self.services = NamespacedLister(self.service_informers)
        self.service_exports = NamespacedLister(self.export_informers)
        self.hub_view = HubView(self.hub_informer)
        self.slices = SlicesByService(NamespacedLister(self.slice_informers))
        self.sent_slices = SentSlices()
        self.metrics.watch_informers(lambda: [(i.name, i.relists) for i in self._informers()])

        self.gate = VersionGate(metrics=self.metrics)
        self.gate.on_change = lambda: self._requeue_exports()
        self._leading = threading.Event()
        self.guard = WithdrawalGuard(
            cluster_id=self.hub.config.cluster_id,
            orphans=self._orphans,
            generation=lambda: tuple(i.lists for i in self._guarded_informers()),
            cannot_see=self._cannot_see,
            on_release=self._repair_if_leading,
            metrics=self.metrics,
            synced=lambda: all(i.has_synced() for i in self._guarded_informers()),
            leading=self._leading.is_set,
        )
        self.events = EventRecorder(api=self.api, host=settings.identity)
        # docs/reference.md#cluster-properties: this cluster's properties (its About API)
        # and the fleet's (the hub's feed), which cluster selection reads.
        self.fleet_properties = FleetPropertiesView(self.cluster_id)
        # Import (docs/reference.md#import-path): its own informers, queues and reconcilers
        # (`member.imports.importer`).
        self.importer: Importer | None = None
        if not settings.no_import:
            self.importer = Importer(
                api=self.api,
                hub=self.hub,
                namespaces=namespaces,
                deny_namespaces=settings.deny_namespace,
                watch_timeout=timeout,
                workers=settings.workers,
                metrics=self.metrics,
                queue_metrics=queue_metrics,
                events=self.events,
                may_write=self._leading.is_set,
                tracer=trace.get_tracer("mcsync.agent", tracer_provider=tracer_provider),
                other_services=self.services,
                properties=self.fleet_properties,
            )
        # docs/reference.md#cluster-properties: while importing, the fleet's properties
        # come from the hub's feed into `fleet_properties` (made before the importer).
        self.properties_feed: PropertiesFeed | None = None
        if self.importer is not None:
            self.properties_feed = PropertiesFeed(
                self.hub, self.fleet_properties, watch_timeout=timeout
            )
        self.properties = PropertiesReporter(
            api=self.api,
            about=self.about,
            hub=self.hub,
            cluster_id=self.cluster_id,
            view=self.fleet_properties,
            watch_timeout=timeout,
        )
        self.heartbeat = HeartbeatLoop(
            hub=self.hub,
            interval=settings.heartbeat_interval,
            gate=self.gate,
            metrics=self.metrics,
            on_recovered=self._repair_if_leading,
            import_counts=self.importer.counts if self.importer is not None else None,
            withdrawal_hold=self.guard.recheck,
            on_allowed=self.guard.allow,
            on_clusterset=self.clusterset.observe,
            invalid_exports=InvalidExportsReporter(
                cached_exports=self.service_exports.cached,
                synced=lambda: all(i.has_synced() for i in self.export_informers.values()),
            ),
        )
        # What both export reconcilers share, passed once (`ExportParts`).
        parts = ExportParts(
            cluster_id=self.cluster_id,
            service_exports=self.service_exports,
            services=self.services,
            gate=self.gate,
            deny_namespaces=frozenset(settings.deny_namespace),
            metrics=self.metrics,
            may_write=self._leading.is_set,
            tracer=trace.get_tracer("mcsync.agent", tracer_provider=tracer_provider),
            guard=self.guard,
        )
        self.reconciler = ExportReconciler(
            parts,
            hub_view=self.hub_view,
            hub=self.hub,
            writer=ServiceExportClient(self.api, version=self.mcs_version),
            events=self.events,
            durations=DurationRecorder(
                hub=self.hub,
                histogram=self.metrics.export_duration,
                cluster_id=self.cluster_id,
            ),
        )
        self.slice_reconciler = SliceExportReconciler(
            parts,
            slices=self.slices,
            hub_view=self.hub_view,
            hub=self.hub,
            sent=self.sent_slices,
            events=self.events,
        )
        # Each controller declares what it watches beside its reconcile (`member.controller`);
        # here every event of a source goes to the controllers that watch it.
        self.controllers = [
            export_controller(self.reconciler, self.queue, in_scope=self._in_scope),
            slice_controller(self.slice_reconciler, self.slice_queue, slices=self.slices,
                             sent=self.sent_slices, in_scope=self._in_scope),
        ]
        observers: dict[str, list[Callable[[Event], None]]] = {
            SERVICES: [self._on_other_service],
            SERVICE_EXPORTS: [self._note_export],
            HUB_RECORDS: [self._on_hub_record],
        }
        self._handlers = {
            source: dispatch(self.controllers, source, observers.get(source, ()))
            for source in (SERVICES, SERVICE_EXPORTS, ENDPOINT_SLICES, HUB_RECORDS)
        }
        self.elector: LeaderElector | None = None
        if settings.leader_elect:
            lease = settings.lease_duration
            self.elector = LeaderElector(
                api=self.api,
                namespace=settings.effective_lease_namespace(),
                name=settings.lease_name,
                identity=settings.identity,
                lease_duration=lease,
                renew_deadline=lease * 2 / 3,
                retry_period=max(lease / 7.5, 0.2),
                on_started_leading=self._start_leading,
                on_stopped_leading=self._stop_leading,
            )
        self._workers: list[threading.Thread] = []
        self._worker_stop = threading.Event()
        self._lock = threading.Lock()

    # -- running ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Run until `stop` is set, then shut down gracefully. Blocking."""
        self._stop = stop
        background = threading.Event()  # informers and heartbeat: stopped last
        self.health.start()
        logger.info(
            "agent starting: cluster %s, hub %s, ServiceExport %s, namespaces %s, metrics on :%d",
            self.cluster_id,
            self.settings.hub_url,
            self.mcs_version,
            ",".join(sorted(self._scope)) or "all",
            self.health.port,
        )
        self.heartbeat.start(background)
        self.properties.start(background)
        if self.importer is not None:
            self.importer.namespaces_report.start(background)
        threads = [informer.start(background) for informer in self._informers()]
        elector_stop = threading.Event()
        elector_thread: threading.Thread | None = None
        try:
            if not self._wait_for_sync(stop):
                return
            logger.info("informers synced")
            # The hub's verdict on this agent's version before the first export
            # (member.heartbeat, module doc); a hub down or hanging does not hold us.
            first_beat = self.heartbeat.first_beat.is_set
            if not _wait_until(stop, first_beat, FIRST_BEAT_WAIT_SECONDS) and stop.is_set():
                return
            if self.elector is not None:
                elector_thread = threading.Thread(
                    target=self.elector.run,
                    args=(elector_stop,),
                    name="leader-elector",
                    daemon=True,
                )
                elector_thread.start()
            else:
                self._start_leading()
            stop.wait()
        finally:
            logger.info("agent stopping: finishing the keys in hand")
            # Stop taking work but keep the right to write until the keys in hand are done:
            # we still hold the Lease (it is released below), so nobody else writes yet.
            self._worker_stop.set()
            self._join_workers()
            self._stop_leading()
            if self.elector is not None:
                elector_stop.set()
                self.elector.release()
                if elector_thread is not None:
                    elector_thread.join(timeout=10)
            background.set()
            self.queue.shutdown()
            self.slice_queue.shutdown()
            if self.importer is not None:
                self.importer.shutdown()
            for thread in threads:
                thread.join(timeout=5)
            self.health.stop()
            self.hub.close()
            logger.info("agent stopped")

    def _fatal_stop(self) -> None:
        """Stop the agent for good: its clusterset property names another clusterset."""
        self.fatal = self.clusterset.fatal
        if self._stop is not None:
            self._stop.set()

    def readiness(self) -> tuple[bool, str]:
        """(ready, why not): informers synced and the hub answering heartbeats."""
        unsynced = [i.name for i in self._informers() if not i.has_synced()]
        if unsynced:
            return False, f"informers not synced: {', '.join(unsynced)}"
        if not self.heartbeat.reachable:
            return False, f"hub not reachable: {self.heartbeat.problem}"
        return True, "ok"

    @property
    def leading(self) -> bool:
        return self._leading.is_set()

    # -- leadership -------------------------------------------------------------------------

    def _start_leading(self) -> None:
        with self._lock:
            if self._leading.is_set():
                return
            self._worker_stop = threading.Event()
            self._leading.set()
            self.metrics.leader.set(1)
            logger.info("leading: starting %d workers", self.settings.workers)
            # A new term repairs everything: keys may have been abandoned (NotLeading) or
            # changed while another replica led.
            self._repair()
            if self.importer is not None:
                self.importer.repair()
            self._workers = [
                *(self.importer.start_workers(self._worker_stop) if self.importer else []),
                *(
                    thread
                    for controller in self.controllers
                    for thread in run_workers(
                        controller.queue,
                        process=controller.reconcile,
                        workers=self.settings.workers,
                        stop=self._worker_stop,
                    )
                ),
            ]

    def _stop_leading(self) -> None:
        with self._lock:
            if not self._leading.is_set():
                return
            # Clear first: a reconcile in flight fails its next write check at once.
            self._leading.clear()
            self._worker_stop.set()
            # Another replica writes slices from now on: what we sent is no longer known.
            self.sent_slices.clear()
            self.metrics.leader.set(0)
            logger.info("no longer leading: workers stop writing")

    def _join_workers(self) -> None:
        for thread in self._workers:
            thread.join(timeout=_WORKER_JOIN_SECONDS)

    # -- what events note before the controllers map them to keys ---------------------------

    def _note_export(self, event: Event) -> None:
        obj = event.obj
        if obj is None:
            return
        key = namespaced_key(obj)
        if event.new is not None:
            self.guard.note_export(key)
        elif not event.from_relist:
            # Deleted while watched: an ordinary unexport, which the guard never holds.
            # One that vanished between two lists is a repair's to judge.
            self.guard.note_unexport(key)

    def _on_other_service(self, event: Event) -> None:
        """A Service may be in the way of an import's derived name."""
        if self.importer is not None:
            self.importer.on_other_service(event)

    def _on_hub_record(self, event: Event) -> None:
        obj = event.obj
        if obj is None:
            return
        key = record_key(obj)
        self.hub_view.settle(key)  # the feed may have caught up with one of our writes
        if event.type == "DELETED":
            # The hub withdrew the export's slices with it (docs/reference.md#rest-api).
            self.sent_slices.forget_service(key)

    def _repair(self) -> None:
        """Queue every key either side knows, in the bulk lane (docs/reference.md#export-path), once
        the mass-withdrawal guard has judged the repair (docs/reference.md#failover)."""
        self.guard.judge()
        keys = self.service_exports.keys() | {k for k in self.hub_view.keys() if self._in_scope(k)}
        for key in keys:
            self.queue.add(key, bulk=True)
        # The slices' repair lists the hub on a worker, then queues its keys in the bulk lane.
        self.slice_queue.add(REPAIR_KEY)
        logger.info("repair: %d keys queued", len(keys))

    def _requeue_exports(self) -> None:
        """The hub's minimum agent version changed what this agent may do: every
        ServiceExport is judged again (Ready says why it stopped, or it exports again)."""
        if self._leading.is_set():
            for key in self.service_exports.keys():
                self.queue.add(key, bulk=True)

    def _repair_if_leading(self) -> None:
        if self._leading.is_set():
            self._repair()

    def _orphans(self) -> tuple[set[str], int]:
        """(in-scope hub records with no ServiceExport, in-scope hub records): what a repair
        would withdraw, of how many (the mass-withdrawal guard's count)."""
        on_hub = {key for key in self.hub_view.present_keys() if self._in_scope(key)}
        return {key for key in on_hub if self.service_exports.get(key) is None}, len(on_hub)

    def _guarded_informers(self) -> list[Informer]:
        return [*self.export_informers.values(), self.hub_informer]

    def _cannot_see(self) -> str | None:
        """The names of the ServiceExport informers whose list or watch fails, or None."""
        failing = [i.name for i in self.export_informers.values() if i.failing]
        return ", ".join(failing) or None

    def _in_scope(self, key: str) -> bool:
        # Records of namespaces this agent does not watch are left alone: with a narrowed
        # --namespace they would otherwise all look like orphans and be withdrawn.
        return not self._scope or key.partition("/")[0] in self._scope

    # -- helpers ----------------------------------------------------------------------------

    def _informers(self) -> list[Informer]:
        return [
            *self.service_informers.values(),
            *self.export_informers.values(),
            *self.slice_informers.values(),
            self.hub_informer,
            *(self.importer.informers() if self.importer is not None else []),
            *([self.properties_feed.informer] if self.properties_feed is not None else []),
            *([self.properties.informer] if self.properties.informer is not None else []),
        ]

    def _wait_for_sync(self, stop: threading.Event) -> bool:
        return _wait_until(stop, lambda: all(i.has_synced() for i in self._informers()))


def _wait_until(
    stop: threading.Event, done: Callable[[], bool], timeout: float | None = None
) -> bool:
    """Poll `done` every 0.1 s until it holds (True), or `stop` is set or `timeout`
    seconds pass (False)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not stop.is_set():
        if done():
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        stop.wait(0.1)
    return False


class MetricsPortError(OSError):
    """The metrics endpoint cannot be bound. `flag` names the one to change: the host
    (`--metrics-host`) when the address is not one of this machine's or does not resolve,
    else the port (`--metrics-port`: taken, or privileged)."""

    def __init__(self, message: str, *, flag: str) -> None:
        super().__init__(message)
        self.flag = flag


class HealthServer:
    """`/metrics`, `/healthz` and `/readyz` on one port, in a background thread."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        registry: CollectorRegistry,
        ready: Callable[[], tuple[bool, str]],
    ) -> None:
        self._registry = registry
        self._ready = ready
        handler = self._handler_class()
        try:
            self._server = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
                raise MetricsPortError(
                    f"cannot listen on {host}:{port}: {exc.strerror}: {host!r} is not an "
                    "address of this machine; choose another --metrics-host "
                    "(MCSYNC_METRICS_HOST; 0.0.0.0 listens on every interface)",
                    flag="--metrics-host") from exc
            raise MetricsPortError(
                f"cannot listen on {host}:{port}: {exc.strerror}: stop what holds it, or choose "
                "another --metrics-port (MCSYNC_METRICS_PORT; 0 picks a free one)",
                flag="--metrics-port") from exc
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="health-server", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Give the port back without ever having served (the agent did not start)."""
        self._server.server_close()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        registry = self._registry
        ready = self._ready

        class Handler(BaseHTTPRequestHandler):
            head = False  # answering HEAD: the headers GET would send, no body

            def do_HEAD(self) -> None:
                self.head = True
                self.do_GET()

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    self._answer(200, b"ok\n")
                elif path == "/readyz":
                    ok, why = ready()
                    self._answer(200 if ok else 503, (why + "\n").encode())
                else:
                    self._answer(404, b"not found\n")

            def _answer(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not self.head:
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # probes every few seconds would drown the decision log

        return Handler

