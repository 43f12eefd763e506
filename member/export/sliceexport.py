"""SliceExportReconciler: one exported Service's EndpointSlices → the hub
(docs/reference.md#import-path).

The source half of endpoint export. `reconcile(key)` takes a Service key "namespace/name"
(the same key as its ServiceExport) and reads top to bottom, with an early return at each
decision:

1. Not exported — no ServiceExport, one being deleted, one not valid (docs/reference.md#conditions),
   or no hub record of it (yet) → withdraw every slice the hub holds of the Service from us
   (DELETE; 404 confirms as well as 200) and stop. The slices of an orphan that the
   mass-withdrawal guard holds on the hub stay with it (`member.export.withdrawalguard`).
2. Agent older than the hub's minimum → nothing more (docs/reference.md#failover: it stops
exporting).
3. PUT each slice whose resourceVersion the hub has not had from us; a slice whose
   resourceVersion did not change costs nothing, a changed one exactly one write. A 409
   (the hub does not export the Service yet, or any more) raises, so the queue's per-key
   backoff retries the key, not a loop of requests; a 4xx no retry can change is counted
   and logged, and the slice is not sent again until it changes. A slice the hub refuses
   (any other 4xx), or one that cannot be put on the wire at all, is reported where its
   owner looks (docs/reference.md#import-path): one Warning Event `EndpointSliceRejected` on the
   ServiceExport, naming the slice and the reason, once per refusal of a slice's resourceVersion
   (not once per retry). Each slice stands alone: one refused never holds up the others.
4. DELETE each slice the hub holds from us that the cluster no longer has.

"What the hub holds from us" is `SentSlices`: per Service key, slice name → the
sourceResourceVersion sent. It is the agent's memory, not a cache of a feed (the hub's
import feed carries every cluster's slices cut to the import's ports, not what this cluster
sent), so it is made true again by `repair()`: a list of the hub's
EndpointSliceExports of this cluster, at start, at each leadership term and after every hub
relist or outage (docs/reference.md#export-path's "repair both ways"); between repairs our own
writes' answers keep it current. The hub withdraws a Service's slices with its export
(docs/reference.md#rest-api), so when the hub's feed says the export went, `forget_service()` drops
that Service's memory: the slices of a later re-export are sent again.

Why the repair lists and then writes slice by slice rather than sending the hub's full-state
sync (`PUT …/endpointslices`): the sync's one body would hold every slice of the cluster
(past the hub's 1 MiB body limit at about a thousand slices), it would re-send every
unchanged slice, and a sync body built before a live change but landing after its PUT would
put the older slice back. The list costs one read; the writes are only the differences.

Why a queue of its own ("endpointslice"), not the export queue's. Both are export work
(docs/reference.md#import-path separates import from export queues; this is neither new kind), and
both are keyed by the Service, so the same informer events feed them. But they must not share a
key's fate: a slice waiting for its export (409, backing off) must not back off the
export reconcile that would end the wait, a slice the hub refuses must not spend the
ServiceExport's retry budget and get it dropped, and a rolling deployment's endpoint churn
must not queue ahead of a new ServiceExport's status. Two queues keep those apart and give
each its own depth and latency metrics. A slice normally waits for its export by an event,
not a 409: step 1 sends nothing until the hub's record of the export is in our view, and
that record's arrival on the hub feed queues the key here.

Repair never starves live changes (docs/reference.md#export-path), by the export side's mechanism:
`repair()` runs as a queue item (`REPAIR_KEY`, on a worker, so only the leader lists the hub) and
the keys it finds go to the queue's bulk lane, which every live change overtakes. Until the
first repair has primed the memory, informer list events are not queued (the repair queues
every key anyway), and a live key that comes first is deferred, not reconciled: against an
empty memory it would PUT slices the hub already has — at a failover, every slice of every
export the old leader touched while this replica stood by. The repair hands the deferred
keys back to be queued live, ahead of its bulk keys, so such a change waits for the list
alone: 3.4 to 3.9 s for 10,000 slices of 10 endpoints, 1.1 to 1.3 s end to end for a change made
while an agent of 1,000 exported Services restarted (a shared, loaded 2-core machine).

The hub feed's events for our own export writes need a lane too. Against a hub that lacks
this cluster's exports (a first start, a restored hub), the export queue's repair PUTs
thousands of them, and each arrival on the feed is slice work (the Service's slices can go
now). Queued live, that wave would sit in front of every fresh slice change. So a hub event
queues the key in the bulk lane, unless a live change in the cluster is waiting for exactly
that record: `note_live_change()` marks the key when a live Service, ServiceExport or slice
event queues it, and `export_arrived()` (the hub event) takes the mark. A reconcile that
ends in anything but "awaiting the export" drops the mark, so marks never outlive their use.

Which slices belong to which Service: `SlicesByService` indexes the slice informer's cache
by the `kubernetes.io/service-name` label (one informer, one watch over every slice with
that label not managed by mcsync: `member.kube.resources.EXPORTED_SLICES_SELECTOR`); a
slice managed by mcsync that reaches it anyway is ignored here too. This module decides
which Services are exported.

One concern per module, so each can be read (and tested) alone: the index is
`member.export.sliceindex`, the memory of what the hub holds is `member.export.sentslices`,
a slice's wire form is `member.export.slicewire`; the reconcile, its hub sync and the
controller's declaration (`slice_controller`) are here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from opentelemetry import trace
from pydantic import ValidationError

from member.controller import (
    ENDPOINT_SLICES,
    HUB_RECORDS,
    SERVICE_EXPORTS,
    SERVICES,
    Controller,
    Event,
    Watch,
)
from member.export.exportspec import validate
from member.export.sentslices import Sent, SentSlices
from member.export.serviceexport import ExportParts
from member.export.sliceindex import (
    SlicesByService,
    SliceSource,
    slice_name,
    slice_resource_version,
)
from member.export.slicewire import slice_export
from member.hubclient import HubConflict, HubRejected, HubUnavailable
from member.hubfeed import record_key
from member.informer import namespaced_key
from member.kube.events import EventRecorder
from member.reconcilers.instrumented import (
    OUTCOME_ERROR,
    OUTCOME_NOT_LEADING,
    NotLeading,
    declare_series,
    run_reconcile,
)
from member.workqueue import WorkQueue
from shared.constants import (
    ENDPOINTSLICE_MANAGER,
    LABEL_ENDPOINTSLICE_MANAGED_BY,
)
from shared.models import EndpointSliceExport

__all__ = [
    "REPAIR_KEY",
    "Repaired",
    "SentSlices",
    "SliceExportReconciler",
    "SlicesByService",
    "slice_export",
]

logger = logging.getLogger(__name__)

CONTROLLER = "endpointslice"
RECONCILE_SPAN = "reconcile EndpointSlices"
REPAIR_SPAN = "repair EndpointSlices"
REPAIR_KEY = "*repair*"
"""The queue item that runs `repair()`; no "namespace/name" key can look like it."""

# What a reconcile ended in: the span's `mcsync.outcome` and the reconciles counter's label.
OUTCOME_NOT_EXPORTED = "not_exported"  # the Service is not exported; nothing of it on the hub
OUTCOME_AWAITING_EXPORT = "awaiting_export"  # valid, but the hub's record has not come yet
OUTCOME_DEFERRED = "deferred"  # before the first repair: reconciled live once it is done
OUTCOME_WITHDRAWN = "withdrawn"  # not exported (any more): its slices withdrawn
OUTCOME_HELD = "held"  # an orphan export the mass-withdrawal guard holds: slices kept too
OUTCOME_UNSUPPORTED = "agent_unsupported"  # older than the hub's minAgentVersion
OUTCOME_SENT = "sent"  # one or more slices PUT or DELETEd
OUTCOME_UP_TO_DATE = "up_to_date"  # the hub had every slice at its resourceVersion
OUTCOMES = (
    OUTCOME_NOT_EXPORTED,
    OUTCOME_AWAITING_EXPORT,
    OUTCOME_DEFERRED,
    OUTCOME_WITHDRAWN,
    OUTCOME_HELD,
    OUTCOME_UNSUPPORTED,
    OUTCOME_SENT,
    OUTCOME_UP_TO_DATE,
    OUTCOME_ERROR,
    OUTCOME_NOT_LEADING,
)
# 4xx answers that no retry can change: the slice itself is what the hub refuses.
_FINAL_REJECTIONS = frozenset({400, 413, 422})
REASON_REJECTED = "EndpointSliceRejected"


class SliceHub(Protocol):
    """The hub client's slice calls (`member.hubclient.HubClient`)."""

    def put_endpointslice(self, export: EndpointSliceExport) -> EndpointSliceExport: ...

    def delete_endpointslice(self, namespace: str, name: str) -> EndpointSliceExport | None: ...

    def list_endpointslices(
        self, each: Callable[[EndpointSliceExport], Any] | None = None
    ) -> tuple[list[Any], str]: ...


class RecordView(Protocol):
    """The hub's export records of this cluster by key (`member.hubfeed.HubView`)."""

    def get(self, key: str) -> Any: ...


class Repaired(NamedTuple):
    """The keys a repair asks to queue."""

    live: set[str]  # came before the memory was primed: live changes, first
    bulk: set[str]  # every Service either side has slices of


# -- the reconciler -------------------------------------------------------------------------


class SliceExportReconciler:
    """Reconciles one Service key's EndpointSlices at a time; safe from several workers."""

    def __init__(
        self,
        parts: ExportParts,
        *,
        slices: SliceSource,
        hub_view: RecordView,
        hub: SliceHub,
        sent: SentSlices,
        events: EventRecorder | None = None,
    ) -> None:
        self._cluster_id = parts.cluster_id
        self._events = events
        # (key, slice name) -> the refusal last reported for it: one Event per refusal.
        self._reported: dict[tuple[str, str], tuple[str, str]] = {}
        self._reported_lock = threading.Lock()
        self._guard = parts.guard
        self._exports = parts.service_exports
        self._services = parts.services
        self._slices = slices
        self._hub_view = hub_view
        self._hub = hub
        self._sent = sent
        self._gate = parts.gate
        self._deny = parts.deny_namespaces
        self._metrics = metrics = parts.metrics
        self._may_write = parts.may_write
        tracer = parts.tracer
        self._tracer = tracer if tracer is not None else trace.get_tracer("mcsync.agent")
        self._live_lock = threading.Lock()
        self._live_waits: set[str] = set()  # keys whose live change awaits the hub's record
        declare_series(metrics, CONTROLLER, OUTCOMES)
        metrics.slices_exported.set_function(sent.on_hub)

    # -- entry points -----------------------------------------------------------------------

    def note_live_change(self, key: str) -> None:
        """A live change in the cluster queued `key`: if its export is not on the hub yet,
        the record's arrival should be live too (see the module doc)."""
        with self._live_lock:
            self._live_waits.add(key)

    def export_arrived(self, key: str) -> bool:
        """The hub feed brought `key`'s record: True when a live change waits for it (queue
        the key live), False when it is the echo of bulk work (queue it in the bulk lane)."""
        with self._live_lock:
            if key in self._live_waits:
                self._live_waits.discard(key)
                return True
            return False

    def reconcile(self, key: str) -> str:
        """Bring the hub's EndpointSliceExports of the Service `key` in line with its slices;
        answers the outcome (one of the `OUTCOME_*` names).

        Raises to have the key retried with backoff (hub unavailable, a 409 …).
        """

        def finished(outcome: str) -> None:
            if outcome not in (OUTCOME_AWAITING_EXPORT, OUTCOME_DEFERRED, OUTCOME_ERROR):
                with self._live_lock:
                    self._live_waits.discard(key)

        return run_reconcile(
            lambda: self._reconcile(key),
            tracer=self._tracer,
            metrics=self._metrics,
            controller=CONTROLLER,
            span_name=RECONCILE_SPAN,
            attributes={"mcsync.key": key, "mcsync.cluster": self._cluster_id},
            finished=finished,
        )

    def repair(self) -> Repaired:
        """List the hub's EndpointSliceExports of this cluster, make them the memory of what
        was sent, and answer the keys to queue: live, those deferred until now; bulk, every
        Service key either side has slices of.

        Raises (`HubUnavailable` …) to be retried with backoff; the memory is then unchanged.
        """
        with self._tracer.start_as_current_span(
            REPAIR_SPAN, attributes={"mcsync.cluster": self._cluster_id}
        ):
            services: dict[str, dict[str, Sent]] = {}
            self._sent.begin_repair()

            def each(item: EndpointSliceExport) -> None:
                key = f"{item.metadata.namespace}/{item.spec.service_name}"
                resource_version = item.spec.source_resource_version or ""
                services.setdefault(key, {})[item.metadata.name] = Sent(resource_version, True)

            try:
                _, revision = self._hub.list_endpointslices(each)
            except BaseException:
                self._sent.end_repair()
                raise
            count = sum(len(record) for record in services.values())
            deferred = self._sent.reset(services)
            keys = (set(services) | self._slices.keys()) - deferred
        logger.info(
            "slice repair: the hub holds %d slices of %d Services from this cluster (revision "
            "%s); %d Services queued, %d of them live",
            count,
            len(services),
            revision,
            len(keys) + len(deferred),
            len(deferred),
            extra={"cluster": self._cluster_id},
        )
        return Repaired(live=deferred, bulk=keys)

    # -- the decision -----------------------------------------------------------------------

    def _reconcile(self, key: str) -> str:
        if self._sent.defer_unless_primed(key):
            return OUTCOME_DEFERRED
        why_not = self._why_not_exported(key)
        awaiting = False
        if why_not is None and self._hub_view.get(key) is None:
            # The export's PUT has not reached the hub (or was refused): a slice now would be
            # a 409. The record's arrival on the hub feed queues this key again.
            why_not, awaiting = "the hub holds no export of it", True
        record = self._sent.acquire(key, create=why_not is None)
        try:
            # 1. Only an exported Service's slices go to the hub.
            if why_not is not None:
                if not record:
                    return OUTCOME_AWAITING_EXPORT if awaiting else OUTCOME_NOT_EXPORTED
                if self._held(key):
                    return OUTCOME_HELD
                for name in self._sent.names(record):
                    self._delete(key, record, name, why=why_not)
                return OUTCOME_WITHDRAWN
            assert record is not None

            # 2. An agent older than the hub's minimum stops exporting (docs/reference.md#failover).
            if not self._gate.supported:
                return OUTCOME_UNSUPPORTED

            # 3. Send each slice the hub does not have at its current resourceVersion.
            current = {
                slice_name(obj): obj
                for obj in self._slices.slices_of(key)
                if not _managed_by_mcsync(obj)
            }
            writes = 0
            refused: HubRejected | None = None
            for name, obj in sorted(current.items()):
                sent = record.get(name)
                if sent is not None and sent.resource_version == slice_resource_version(obj):
                    continue
                try:
                    self._put(key, record, name, obj)
                except HubConflict:
                    raise  # the hub does not export the Service: no slice of it can go
                except HubRejected as exc:
                    refused = refused or exc  # this slice alone: the others still go
                    continue
                writes += 1

            # 4. Withdraw the slices that went.
            for name in self._sent.names(record):
                if name not in current:
                    self._delete(key, record, name, why="it no longer exists in the cluster")
                    writes += 1
            if refused is not None:
                raise refused  # retried with the queue's backoff
            return OUTCOME_SENT if writes else OUTCOME_UP_TO_DATE
        finally:
            self._sent.release(key, record)

    def _held(self, key: str) -> bool:
        """True when `key` is an orphan export (on the hub, no ServiceExport) whose
        withdrawal the mass-withdrawal guard holds: its slices stay with it."""
        if self._guard is None or self._exports.get(key) is not None:
            return False
        return self._hub_view.get(key) is not None and not self._guard.permit(key)

    def _why_not_exported(self, key: str) -> str | None:
        """Why the Service `key` is not exported here; None when its ServiceExport is valid."""
        obj = self._exports.get(key)
        if obj is None:
            return "its ServiceExport no longer exists"
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return "its ServiceExport is being deleted"
        namespace, _, name = key.partition("/")
        validity = validate(
            namespace=namespace,
            name=name,
            service=self._services.get(key),
            deny_namespaces=self._deny,
            service_export=obj,
        )
        if not validity.valid:
            return f"its ServiceExport is not valid ({validity.reason})"
        return None

    # -- writes -----------------------------------------------------------------------------

    def _put(self, key: str, record: dict[str, Sent], name: str, obj: dict[str, Any]) -> None:
        resource_version = slice_resource_version(obj)
        previous = record.get(name)
        was_on_hub = previous is not None and previous.on_hub
        try:
            export = slice_export(
                cluster_id=self._cluster_id, obj=obj, observed=self._slices.observed_at(obj)
            )
        except ValidationError as exc:
            self._metrics.slice_export_errors.labels("invalid").inc()
            logger.warning(
                "%s: EndpointSlice %s cannot be exported, not sending it until it changes: %s",
                key,
                name,
                _first_error(exc),
                extra=self._fields(key),
            )
            self._report(key, name, resource_version, why=_first_error(exc), retried=False)
            self._sent.record(key, record, name, Sent(resource_version, was_on_hub))
            return
        self._check_leading()
        try:
            self._hub.put_endpointslice(export)
        except HubConflict as exc:
            self._metrics.slice_export_errors.labels("conflict").inc()
            logger.info(
                "%s: the hub does not export the Service (yet) for EndpointSlice %s; retrying "
                "with backoff: %s",
                key,
                name,
                exc.message,
                extra=self._fields(key),
            )
            raise
        except HubRejected as exc:
            self._metrics.slice_export_errors.labels("rejected").inc()
            final = exc.code in _FINAL_REJECTIONS
            why = f"the hub answered {exc.code} {exc.reason}: {exc.message}"
            self._report(key, name, resource_version, why=why, retried=not final)
            if not final:
                raise  # 401/403/404: credentials, registration or a limit the operator may fix
            logger.warning(
                "%s: the hub rejected EndpointSlice %s, not sending it until it changes: %s",
                key,
                name,
                exc.message,
                extra=self._fields(key),
            )
            self._sent.record(key, record, name, Sent(resource_version, was_on_hub))
            return
        except HubUnavailable:
            self._metrics.slice_export_errors.labels("unavailable").inc()
            raise
        self._sent.record(key, record, name, Sent(resource_version, True))
        self._forget_report(key, name)
        self._metrics.slice_writes.labels("put").inc()
        logger.info(
            "%s: EndpointSlice %s sent to the hub (resourceVersion %s, %d endpoints)",
            key,
            name,
            resource_version,
            len(export.spec.endpoints),
            extra=self._fields(key),
        )

    def _delete(self, key: str, record: dict[str, Sent], name: str, *, why: str) -> None:
        self._check_leading()
        namespace = key.partition("/")[0]
        try:
            last = self._hub.delete_endpointslice(namespace, name)
        except HubUnavailable:
            self._metrics.slice_export_errors.labels("unavailable").inc()
            raise
        except HubRejected:
            self._metrics.slice_export_errors.labels("rejected").inc()
            raise
        self._sent.drop(key, record, name)
        self._forget_report(key, name)
        if last is not None:
            self._metrics.slice_writes.labels("delete").inc()
        logger.info(
            "%s: EndpointSlice %s withdrawn from the hub because %s%s",
            key,
            name,
            why,
            "" if last is not None else " (it was already gone)",
            extra=self._fields(key),
        )

    def _report(
        self, key: str, name: str, resource_version: str, *, why: str, retried: bool
    ) -> None:
        """One Warning Event on `key`'s ServiceExport about its refused slice `name`, unless
        this refusal of this resourceVersion was reported already (a retry loop)."""
        with self._reported_lock:
            if self._reported.get((key, name)) == (resource_version, why):
                return
            self._reported[(key, name)] = (resource_version, why)
        export = self._exports.get(key)
        if self._events is None or export is None:
            return
        then = "retried with backoff" if retried else "not sent again until it changes"
        self._events.record(
            export,
            type="Warning",
            reason=REASON_REJECTED,
            message=f"EndpointSlice {name} was not exported: {why}; {then}",
        )

    def _forget_report(self, key: str, name: str) -> None:
        with self._reported_lock:
            self._reported.pop((key, name), None)

    # -- helpers ----------------------------------------------------------------------------

    def _fields(self, key: str) -> dict[str, str]:
        return {"key": key, "cluster": self._cluster_id}

    def _check_leading(self) -> None:
        if not self._may_write():
            raise NotLeading("this replica no longer holds the Lease")


# -- pure helpers ---------------------------------------------------------------------------


def _managed_by_mcsync(obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_ENDPOINTSLICE_MANAGED_BY) == ENDPOINTSLICE_MANAGER


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))


def slice_controller(
    reconciler: SliceExportReconciler,
    queue: WorkQueue,
    *,
    slices: SlicesByService,
    sent: SentSlices,
    in_scope: Callable[[str], bool],
) -> Controller:
    """The slice controller: for EndpointSlices (keyed by their Service), watching Services,
    ServiceExports and the hub's records too, since each changes what a Service's slices
    should be on the hub. Why list events wait for the first repair and why a hub record's
    event is live only when a live change waits for it: this module's docstring."""

    def queue_slices(key: str, bulk: bool) -> list[tuple[str, bool]]:
        if bulk and not sent.primed:
            return []  # the first slice repair queues every key
        if not bulk:
            reconciler.note_live_change(key)
        return [(key, bulk)]

    def by_namespaced_key(event: Event) -> list[tuple[str, bool]]:
        obj = event.obj
        return [] if obj is None else queue_slices(namespaced_key(obj), event.from_relist)

    def by_service_of_slice(event: Event) -> list[tuple[str, bool]]:
        return [pair for key in slices.observe(event.old, event.new)
                for pair in queue_slices(key, event.from_relist)]

    def by_hub_record(event: Event) -> list[tuple[str, bool]]:
        obj = event.obj
        if obj is None:
            return []
        key = record_key(obj)
        if not in_scope(key):
            return []
        # Live only when a live change in the cluster waits for this record; else it is
        # the echo of our own bulk work.
        live = not event.from_relist and reconciler.export_arrived(key)
        return [(key, not live)] if live or sent.primed else []

    def reconcile(key: str) -> None:
        try:
            if key != REPAIR_KEY:
                reconciler.reconcile(key)
                return
            repaired = reconciler.repair()
            for found in repaired.live:
                queue.add(found)
            for found in repaired.bulk:
                if in_scope(found):
                    queue.add(found, bulk=True)
        except NotLeading:
            logger.debug("%s: abandoned, this replica stopped leading", key)

    return Controller(
        name=CONTROLLER,
        queue=queue,
        reconcile=reconcile,
        for_=Watch(ENDPOINT_SLICES, by_service_of_slice),
        watches=(
            Watch(SERVICES, by_namespaced_key),
            Watch(SERVICE_EXPORTS, by_namespaced_key),
            Watch(HUB_RECORDS, by_hub_record),
        ),
    )
