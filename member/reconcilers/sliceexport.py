"""SliceExportReconciler: one exported Service's EndpointSlices → the hub (SPEC §2.8).

The source half of endpoint export. `reconcile(key)` takes a Service key "namespace/name"
(the same key as its ServiceExport) and reads top to bottom, with an early return at each
decision:

1. Not exported — no ServiceExport, one being deleted, one not valid (SPEC §2.2), or no
   hub record of it (yet) → withdraw every slice the hub holds of the Service from us
   (DELETE; 404 confirms as well as 200) and stop.
2. Agent older than the hub's minimum → nothing more (SPEC §5: it stops exporting).
3. PUT each slice whose resourceVersion the hub has not had from us; a slice whose
   resourceVersion did not change costs nothing, a changed one exactly one write. A 409
   (the hub does not export the Service yet, or any more) raises, so the queue's per-key
   backoff retries the key, not a loop of requests; a 4xx no retry can change is counted
   and logged, and the slice is not sent again until it changes.
4. DELETE each slice the hub holds from us that the cluster no longer has.

"What the hub holds from us" is `SentSlices`: per Service key, slice name → the
sourceResourceVersion sent. It is the agent's memory, not a cache of a feed (the hub's
import feed carries every cluster's slices cut to the import's ports, not what this cluster
sent), so it is made true again by `repair()`: a list of the hub's
EndpointSliceExports of this cluster, at start, at each leadership term and after every hub
relist or outage (SPEC §2.4's "repair both ways"); between repairs our own writes' answers
keep it current. The hub withdraws a Service's slices with its export (SPEC §4.2), so when
the hub's feed says the export went, `forget_service()` drops that Service's memory: the
slices of a later re-export are sent again.

Why the repair lists and then writes slice by slice rather than sending the hub's full-state
sync (`PUT …/endpointslices`): the sync's one body would hold every slice of the cluster
(past the hub's 1 MiB body limit at about a thousand slices), it would re-send every
unchanged slice, and a sync body built before a live change but landing after its PUT would
put the older slice back. The list costs one read; the writes are only the differences.

Why a queue of its own ("endpointslice"), not the export queue's. Both are export work
(SPEC §2.8 separates import from export queues; this is neither new kind), and both are
keyed by the Service, so the same informer events feed them. But they must not share a
key's fate: a slice waiting for its export (409, backing off) must not back off the
export reconcile that would end the wait, a slice the hub refuses must not spend the
ServiceExport's retry budget and get it dropped, and a rolling deployment's endpoint churn
must not queue ahead of a new ServiceExport's status. Two queues keep those apart and give
each its own depth and latency metrics. A slice normally waits for its export by an event,
not a 409: step 1 sends nothing until the hub's record of the export is in our view, and
that record's arrival on the hub feed queues the key here.

Repair never starves live changes (SPEC §2.4), by the export side's mechanism: `repair()`
runs as a queue item (`REPAIR_KEY`, on a worker, so only the leader lists the hub) and the
keys it finds go to the queue's bulk lane, which every live change overtakes. Until the
first repair has primed the memory, informer list events are not queued (the repair queues
every key anyway): no key is reconciled twice at start, or against an empty memory, which
would PUT slices the hub already has.

Which slices belong to which Service: `SlicesByService` indexes the slice informer's cache
by the `kubernetes.io/service-name` label (one informer, one watch over every slice with
that label not managed by mcsync: `member.kube.resources.EXPORTED_SLICES_SELECTOR`); a
slice managed by mcsync that reaches it anyway is ignored here too. This module decides
which Services are exported.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol

from opentelemetry import trace
from pydantic import ValidationError

from member.exportspec import validate
from member.heartbeat import VersionGate
from member.hubclient import HubConflict, HubRejected, HubUnavailable
from member.metrics import AgentMetrics
from member.reconcilers.export import Lister, NotLeading
from shared.constants import (
    ENDPOINTSLICE_MANAGER,
    LABEL_ENDPOINTSLICE_MANAGED_BY,
    LABEL_SERVICE_NAME,
)
from shared.models import EndpointSliceExport

__all__ = [
    "REPAIR_KEY",
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
OUTCOME_WITHDRAWN = "withdrawn"  # not exported (any more): its slices withdrawn
OUTCOME_UNSUPPORTED = "agent_unsupported"  # older than the hub's minAgentVersion
OUTCOME_SENT = "sent"  # one or more slices PUT or DELETEd
OUTCOME_UP_TO_DATE = "up_to_date"  # the hub had every slice at its resourceVersion
OUTCOME_ERROR = "error"  # raised: the key is retried with backoff
OUTCOME_NOT_LEADING = "not_leading"  # abandoned: this replica lost its Lease
OUTCOMES = (
    OUTCOME_NOT_EXPORTED,
    OUTCOME_WITHDRAWN,
    OUTCOME_UNSUPPORTED,
    OUTCOME_SENT,
    OUTCOME_UP_TO_DATE,
    OUTCOME_ERROR,
    OUTCOME_NOT_LEADING,
)
# 4xx answers that no retry can change: the slice itself is what the hub refuses.
_FINAL_REJECTIONS = frozenset({400, 413, 422})


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


class SliceSource(Protocol):
    """The cluster's EndpointSlices by Service key (`SlicesByService`)."""

    def slices_of(self, key: str) -> list[dict[str, Any]]: ...

    def keys(self) -> set[str]: ...


# -- the index: Service → its slices --------------------------------------------------------


def service_key(obj: dict[str, Any] | None) -> str | None:
    """ "namespace/<kubernetes.io/service-name>" of a slice; None when it names no Service."""
    if not obj:
        return None
    metadata = obj.get("metadata") or {}
    service = (metadata.get("labels") or {}).get(LABEL_SERVICE_NAME)
    namespace = metadata.get("namespace")
    if not service or not namespace:
        return None
    return f"{namespace}/{service}"


class SlicesByService:
    """The slice informer's cache indexed by Service: fed each informer event by `observe()`.

    Holds names only; `slices_of()` reads the objects from the informer's cache (`slices`,
    keyed "namespace/slice"), so a slice is cached once.
    """

    def __init__(self, slices: Lister) -> None:
        self._slices = slices
        self._lock = threading.Lock()
        self._names: dict[str, set[str]] = {}

    def observe(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> set[str]:
        """Index one informer event (ADDED: old None; DELETED: new None); answers the
        Service keys it concerns (two when a slice's Service label changed)."""
        before, after = service_key(old), service_key(new)
        touched: set[str] = set()
        with self._lock:
            if before is not None and (new is None or before != after):
                names = self._names.get(before)
                if names is not None:
                    names.discard(_name(old))
                    if not names:
                        del self._names[before]
                touched.add(before)
            if after is not None:
                self._names.setdefault(after, set()).add(_name(new))
                touched.add(after)
        return touched

    def slices_of(self, key: str) -> list[dict[str, Any]]:
        """The cached slices of the Service `key`, by name."""
        namespace = key.partition("/")[0]
        with self._lock:
            names = sorted(self._names.get(key, ()))
        found = (self._slices.get(f"{namespace}/{name}") for name in names)
        return [obj for obj in found if obj is not None]

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._names)


# -- the memory: what the hub holds from us -------------------------------------------------


class Sent(NamedTuple):
    """One slice as last sent: its source resourceVersion, and whether the hub took it."""

    resource_version: str
    on_hub: bool


class SentSlices:
    """Per Service key, slice name → `Sent`: what the hub holds of this cluster's slices.

    Each key's record is a dict that only the worker holding the key mutates (the queue
    gives a key to one worker at a time). `forget_service()`, `reset()` and `clear()` never
    mutate a record, they replace it: a worker still writing into the old one then loses
    its update, which costs one write more on the key's next reconcile, never one less.

    A repair's list and live reconciles run at once (that is the point: live work is not
    held up). `begin_repair()` therefore notes every key changed while the list is read,
    and `reset()` keeps those keys' current records instead of the list's older view: a
    slice PUT during the list is not sent a second time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._services: dict[str, dict[str, Sent]] = {}
        self._primed = False
        self._touched: set[str] | None = None  # keys changed since begin_repair()

    @property
    def primed(self) -> bool:
        """True once a repair has read the hub's set (and until `clear()`)."""
        return self._primed

    def peek(self, key: str) -> dict[str, Sent] | None:
        with self._lock:
            return self._services.get(key)

    def of(self, key: str) -> dict[str, Sent]:
        """The record of `key`, created empty if it has none."""
        with self._lock:
            return self._services.setdefault(key, {})

    def record(self, key: str, record: dict[str, Sent], name: str, sent: Sent) -> None:
        with self._lock:
            record[name] = sent
            self._touch(key)

    def drop(self, key: str, record: dict[str, Sent], name: str) -> None:
        with self._lock:
            record.pop(name, None)
            if not record and self._services.get(key) is record:
                del self._services[key]
            self._touch(key)

    def prune(self, key: str, record: dict[str, Sent]) -> None:
        """Drop `key`'s record if it is empty (a Service without slices costs nothing)."""
        with self._lock:
            if not record and self._services.get(key) is record:
                del self._services[key]

    def forget_service(self, key: str) -> None:
        """The hub withdrew `key`'s slices along with its export."""
        with self._lock:
            self._services.pop(key, None)
            self._touch(key)

    def begin_repair(self) -> None:
        """A list of the hub's set starts now: note the keys changed until `reset()`."""
        with self._lock:
            self._touched = set()

    def end_repair(self) -> None:
        """The list failed: stop noting keys (the memory stays as it was)."""
        with self._lock:
            self._touched = None

    def reset(self, services: dict[str, dict[str, Sent]]) -> None:
        """The hub's set, listed since `begin_repair()`, becomes the memory, except for the
        keys changed meanwhile, whose records are newer than the list."""
        with self._lock:
            for key in self._touched or ():
                current = self._services.get(key)
                if current is None:
                    services.pop(key, None)
                else:
                    services[key] = current
            self._services = services
            self._touched = None
            self._primed = True

    def clear(self) -> None:
        """Forget everything (leadership lost: another replica writes meanwhile)."""
        with self._lock:
            self._services = {}
            self._touched = None
            self._primed = False

    def _touch(self, key: str) -> None:
        if self._touched is not None:
            self._touched.add(key)

    def on_hub(self) -> int:
        """How many slices the hub holds from us (the exported-slices gauge)."""
        with self._lock:
            return sum(s.on_hub for record in self._services.values() for s in record.values())


# -- the reconciler -------------------------------------------------------------------------


class SliceExportReconciler:
    """Reconciles one Service key's EndpointSlices at a time; safe from several workers."""

    def __init__(
        self,
        *,
        cluster_id: str,
        service_exports: Lister,
        services: Lister,
        slices: SliceSource,
        hub_view: RecordView,
        hub: SliceHub,
        sent: SentSlices,
        gate: VersionGate,
        deny_namespaces: Iterable[str],
        metrics: AgentMetrics,
        may_write: Callable[[], bool] = lambda: True,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._cluster_id = cluster_id
        self._exports = service_exports
        self._services = services
        self._slices = slices
        self._hub_view = hub_view
        self._hub = hub
        self._sent = sent
        self._gate = gate
        self._deny = frozenset(deny_namespaces)
        self._metrics = metrics
        self._may_write = may_write
        self._tracer = tracer if tracer is not None else trace.get_tracer("mcsync.agent")
        # Every series of this controller exists from start at 0 (SPEC §6).
        for outcome in OUTCOMES:
            metrics.reconciles.labels(CONTROLLER, outcome)
        metrics.reconcile_errors.labels(CONTROLLER)
        metrics.reconcile_duration.labels(CONTROLLER)
        metrics.slices_exported.set_function(sent.on_hub)

    # -- entry points -----------------------------------------------------------------------

    def reconcile(self, key: str) -> None:
        """Bring the hub's EndpointSliceExports of the Service `key` in line with its slices.

        Raises to have the key retried with backoff (hub unavailable, a 409 …).
        """
        started = time.monotonic()
        outcome = OUTCOME_ERROR
        with self._tracer.start_as_current_span(
            RECONCILE_SPAN,
            attributes={"mcsync.key": key, "mcsync.cluster": self._cluster_id},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                outcome = self._reconcile(key)
            except NotLeading:
                outcome = OUTCOME_NOT_LEADING
                raise
            except Exception as exc:
                self._metrics.reconcile_errors.labels(CONTROLLER).inc()
                span.record_exception(exc)
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
                raise
            finally:
                span.set_attribute("mcsync.outcome", outcome)
                self._metrics.reconciles.labels(CONTROLLER, outcome).inc()
                self._metrics.reconcile_duration.labels(CONTROLLER).observe(
                    time.monotonic() - started
                )

    def repair(self) -> set[str]:
        """List the hub's EndpointSliceExports of this cluster, make them the memory of what
        was sent, and answer every Service key either side has slices of (to be queued).

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
            self._sent.reset(services)
            keys = set(services) | self._slices.keys()
        logger.info(
            "slice repair: the hub holds %d slices of %d Services from this cluster (revision "
            "%s); %d Services queued",
            count,
            len(services),
            revision,
            len(keys),
            extra={"cluster": self._cluster_id},
        )
        return keys

    # -- the decision -----------------------------------------------------------------------

    def _reconcile(self, key: str) -> str:
        # 1. Only an exported Service's slices go to the hub.
        why_not = self._why_not_exported(key)
        if why_not is not None:
            record = self._sent.peek(key)
            if not record:
                return OUTCOME_NOT_EXPORTED
            for name in sorted(record):
                self._delete(key, record, name, why=why_not)
            return OUTCOME_WITHDRAWN

        # 2. An agent older than the hub's minimum stops exporting (SPEC §5).
        if not self._gate.supported:
            return OUTCOME_UNSUPPORTED

        # 3. Send each slice the hub does not have at its current resourceVersion.
        record = self._sent.of(key)
        current = {
            _name(obj): obj for obj in self._slices.slices_of(key) if not _managed_by_mcsync(obj)
        }
        writes = 0
        try:
            for name, obj in sorted(current.items()):
                sent = record.get(name)
                if sent is not None and sent.resource_version == _resource_version(obj):
                    continue
                self._put(key, record, name, obj)
                writes += 1

            # 4. Withdraw the slices that went.
            for name in sorted(set(record) - set(current)):
                self._delete(key, record, name, why="it no longer exists in the cluster")
                writes += 1
        finally:
            self._sent.prune(key, record)  # a Service with no slices on the hub costs nothing
        return OUTCOME_SENT if writes else OUTCOME_UP_TO_DATE

    def _why_not_exported(self, key: str) -> str | None:
        """Why the Service `key`'s slices must not be on the hub; None when they must."""
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
        )
        if not validity.valid:
            return f"its ServiceExport is not valid ({validity.reason})"
        if self._hub_view.get(key) is None:
            # The export's PUT has not reached the hub (or was refused): a slice now would be
            # a 409. The record's arrival on the hub feed queues this key again.
            return "the hub holds no export of it"
        return None

    # -- writes -----------------------------------------------------------------------------

    def _put(self, key: str, record: dict[str, Sent], name: str, obj: dict[str, Any]) -> None:
        resource_version = _resource_version(obj)
        previous = record.get(name)
        was_on_hub = previous is not None and previous.on_hub
        try:
            export = slice_export(cluster_id=self._cluster_id, obj=obj)
        except ValidationError as exc:
            self._metrics.slice_export_errors.labels("invalid").inc()
            logger.warning(
                "%s: EndpointSlice %s cannot be exported, not sending it until it changes: %s",
                key,
                name,
                _first_error(exc),
                extra=self._fields(key),
            )
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
            if exc.code not in _FINAL_REJECTIONS:
                raise  # 401/403/404: credentials or registration the operator may fix
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

    # -- helpers ----------------------------------------------------------------------------

    def _fields(self, key: str) -> dict[str, str]:
        return {"key": key, "cluster": self._cluster_id}

    def _check_leading(self) -> None:
        if not self._may_write():
            raise NotLeading("this replica no longer holds the Lease")


# -- pure helpers ---------------------------------------------------------------------------

_PORT_FIELDS = ("name", "protocol", "port", "appProtocol")
_ENDPOINT_FIELDS = ("addresses", "hostname", "zone")
_CONDITION_FIELDS = ("ready", "serving", "terminating")


def slice_export(*, cluster_id: str, obj: dict[str, Any]) -> EndpointSliceExport:
    """The EndpointSliceExport of one EndpointSlice: what SPEC §2.8 sends, nothing local
    (`nodeName`, `targetRef`, hints). Raises `ValidationError` naming the field when the
    slice cannot be expressed on the wire."""
    metadata = obj.get("metadata") or {}
    spec: dict[str, Any] = {
        "serviceName": (metadata.get("labels") or {}).get(LABEL_SERVICE_NAME),
        "clusterId": cluster_id,
        "addressType": obj.get("addressType"),
        "ports": [_pick(port, _PORT_FIELDS) for port in obj.get("ports") or []],
        "endpoints": [_endpoint(endpoint) for endpoint in obj.get("endpoints") or []],
        "sourceResourceVersion": metadata.get("resourceVersion"),
    }
    return EndpointSliceExport.model_validate(
        {
            "metadata": {"name": metadata.get("name"), "namespace": metadata.get("namespace")},
            "spec": {k: v for k, v in spec.items() if v is not None},
        }
    )


def _pick(item: Any, fields: tuple[str, ...]) -> Any:
    if not isinstance(item, dict):
        return item  # let validation name it
    return {k: item[k] for k in fields if item.get(k) is not None}


def _endpoint(endpoint: Any) -> Any:
    kept = _pick(endpoint, _ENDPOINT_FIELDS)
    if isinstance(kept, dict) and isinstance(endpoint.get("conditions"), dict):
        kept["conditions"] = _pick(endpoint["conditions"], _CONDITION_FIELDS)
    return kept


def _name(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("name") or "")


def _resource_version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


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
