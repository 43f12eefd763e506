"""ExportReconciler: one ServiceExport key → the hub's record and the ServiceExport's status.

`reconcile(key)` reads top to bottom like fleet-networking's ServiceExport controller, with
an early return at each decision:

1. No ServiceExport → a hub record of this key is an orphan: withdraw it
   (docs/reference.md#export-path), unless the mass-withdrawal guard holds it
   (`member.export.withdrawalguard`, docs/reference.md#failover).
2. ServiceExport being deleted → withdraw on the hub (200 and 404 both confirm) → remove our
   finalizer. The finalizer goes only after the hub confirmed, so the record cannot outlive
   the object unnoticed.
3. Not valid (docs/reference.md#conditions) → withdraw if the hub has it, `Valid=False/<reason>`,
   `Ready=False/Pending` (nothing will be exported until the user fixes the sentence in
   `Valid`; `Failed` is kept for "the hub said no"), the stale `Conflict` removed, and the
   stopwatch annotations dropped so a later valid export starts a fresh one.
4. Agent older than the hub's minimum → no PUT; `Ready=False/Failed` says why.
5. Derive the exported spec; one the contract cannot express → `Ready=False/Failed`.
6. Finalizer, and `exportedSince` stamped when the exported spec changed (one metadata
   patch with a resourceVersion precondition; 409 → raise, the queue retries).
7. PUT when the hub has no record or its record differs in the exported spec. The answer
   carries the verdict; a 4xx becomes `Ready=False/Failed` with the hub's message.
8. Report back: copy the hub's `Conflict`, `Valid=True`, `Ready=True/Exported` (or Pending
   before a verdict); write status only when it changed; an Event only when the verdict did
   (queued: the recorder sends it from its own thread, the reconcile does not wait).
9. Count the export duration once per Service resourceVersion (`member.duration`), as of
   the moment the verdict was reported back (step 8), not after the dedupe PATCH.

Inputs are three caches (ServiceExports, Services, the hub's records of this cluster via
`HubView`) — no reconcile reads the Kubernetes API — plus the hub client for writes. Every
write first checks `may_write()`: a replica that lost its Lease stops writing at once,
mid-reconcile (`NotLeading`), rather than finishing a decision a new leader is also making.

Each reconcile is one span (`reconcile ServiceExport`, attributes `mcsync.key`,
`mcsync.cluster`, `mcsync.outcome`); the hub client's requests inside it carry its trace
context to the hub. Each decision is one log line with the key and cluster as fields (and
the trace id, added by the log handler). The outcome also labels the reconciles counter:
a small fixed set (`OUTCOME_*`), never a name.

"Changes the exported spec": see `member.export.exportspec` (everything but the Service's
resourceVersion/generation and the stopwatch itself). The digest of the spec the stamp was
made for sits beside it (`mcsync.io/exported-spec-hash`), so a restart, a resync or a
same-spec update keeps the stopwatch running, and a real change re-stamps it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from opentelemetry import trace

from member.controller import HUB_RECORDS, SERVICE_EXPORTS, SERVICES, Controller, Event, Watch
from member.duration import DurationRecorder
from member.export.exportspec import (
    InvalidExport,
    Validity,
    derive_export,
    export_fingerprint,
    same_exported_spec,
    validate,
)
from member.export.withdrawalguard import WithdrawalGuard
from member.heartbeat import VersionGate
from member.hubclient import HubClient, HubConflict, HubRejected, HubUnavailable
from member.hubfeed import HubView, record_key
from member.informer import namespaced_key
from member.kube.events import EventRecorder
from member.kube.resources import NotFoundError, ServiceExportClient
from member.metrics import AgentMetrics
from member.reconcilers.instrumented import (
    OUTCOME_ERROR,
    OUTCOME_NOT_LEADING,
    NotLeading,
    declare_series,
    run_reconcile,
)
from member.status import (
    condition_from_hub,
    find_condition,
    make_condition,
    merge_conditions,
    status_changed,
)
from member.workqueue import WorkQueue
from shared import conditions as c
from shared.constants import (
    ANNOTATION_EXPORTED_SINCE,
    ANNOTATION_EXPORTED_SPEC_HASH,
    FINALIZER_SERVICEEXPORT_CLEANUP,
)
from shared.models import InternalServiceExport
from shared.timefmt import format_millis, parse_rfc3339, utcnow

__all__ = ["ExportReconciler", "Lister", "NotLeading"]

logger = logging.getLogger(__name__)

CONTROLLER = "serviceexport"
RECONCILE_SPAN = "reconcile ServiceExport"

# What a reconcile ended in: the span's `mcsync.outcome` and the reconciles counter's label.
OUTCOME_ABSENT = "absent"  # no ServiceExport and nothing on the hub
OUTCOME_WITHDRAWN = "withdrawn"  # no ServiceExport; the hub's record was an orphan
# an orphan the mass-withdrawal guard keeps on the hub (docs/reference.md#failover)
OUTCOME_HELD = "held"
OUTCOME_FINALIZED = "finalized"  # ServiceExport being deleted: withdrawn, finalizer removed
OUTCOME_INVALID = "invalid"  # Valid=False (no Service, wrong type, denied namespace)
OUTCOME_UNSUPPORTED = "agent_unsupported"  # older than the hub's minAgentVersion
OUTCOME_NOT_EXPORTABLE = "not_exportable"  # a Service the contract cannot express
OUTCOME_REJECTED = "rejected"  # the hub refused the export for good (4xx)
OUTCOME_EXPORTED = "exported"  # PUT to the hub; the verdict reported back
OUTCOME_UP_TO_DATE = "up_to_date"  # the hub already had this spec; status checked
OUTCOMES = (
    OUTCOME_ABSENT,
    OUTCOME_WITHDRAWN,
    OUTCOME_HELD,
    OUTCOME_FINALIZED,
    OUTCOME_INVALID,
    OUTCOME_UNSUPPORTED,
    OUTCOME_NOT_EXPORTABLE,
    OUTCOME_REJECTED,
    OUTCOME_EXPORTED,
    OUTCOME_UP_TO_DATE,
    OUTCOME_ERROR,
    OUTCOME_NOT_LEADING,
)
# 4xx answers that no retry can change: the request itself is what the hub refuses.
_FINAL_REJECTIONS = frozenset({400, 413, 422})


class Lister(Protocol):
    """A read-only cache of objects by "namespace/name" (an informer, or several)."""

    def get(self, key: str) -> dict[str, Any] | None: ...


def _always() -> bool:
    return True


@dataclass(frozen=True)
class ExportParts:
    """What both export-side reconcilers read and decide with, built once by the agent and
    handed to each, so that adding a shared part is one field, not an edit of every
    constructor call. What differs between them (their hub client, hub view, writers) stays
    a keyword of its own constructor."""

    cluster_id: str
    service_exports: Lister
    services: Lister
    gate: VersionGate
    deny_namespaces: frozenset[str]
    metrics: AgentMetrics
    # False once this replica lost the Lease: every write checks it first.
    may_write: Callable[[], bool] = _always
    tracer: trace.Tracer | None = None
    guard: WithdrawalGuard | None = None


class ExportReconciler:
    """Reconciles one ServiceExport key at a time; safe to call from several workers."""

    def __init__(
        self,
        parts: ExportParts,
        *,
        hub_view: HubView,
        hub: HubClient,
        writer: ServiceExportClient,
        events: EventRecorder,
        durations: DurationRecorder,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._cluster_id = parts.cluster_id
        self._guard = parts.guard
        self._exports = parts.service_exports
        self._services = parts.services
        self._hub_view = hub_view
        self._hub = hub
        self._writer = writer
        self._events = events
        self._durations = durations
        self._gate = parts.gate
        self._deny = parts.deny_namespaces
        self._metrics = parts.metrics
        self._may_write = parts.may_write
        self._clock = clock
        tracer = parts.tracer
        self._tracer = tracer if tracer is not None else trace.get_tracer("mcsync.agent")
        declare_series(parts.metrics, CONTROLLER, OUTCOMES)

    # -- entry point ------------------------------------------------------------------------

    def reconcile(self, key: str) -> None:
        """Bring the hub's record and the ServiceExport's status of `key` in line.

        Raises to have the key retried with backoff (hub unavailable, a stale write …).
        """
        run_reconcile(
            lambda: self._reconcile(key),
            tracer=self._tracer,
            metrics=self._metrics,
            controller=CONTROLLER,
            span_name=RECONCILE_SPAN,
            attributes={"mcsync.key": key, "mcsync.cluster": self._cluster_id},
        )

    def _reconcile(self, key: str) -> str:
        """One pass over `key`; answers its outcome (one of the `OUTCOME_*` names)."""
        namespace, _, name = key.partition("/")
        obj = self._exports.get(key)
        record = self._hub_view.get(key)

        # 1. No ServiceExport: anything the hub holds for the key is an orphan
        # (docs/reference.md#export-path).
        if obj is None:
            if record is None:
                if self._guard is not None:
                    self._guard.withdrawn(key)
                return OUTCOME_ABSENT
            if self._guard is not None and not self._guard.permit(key):
                return OUTCOME_HELD
            self._withdraw(key, why="its ServiceExport no longer exists (orphan)")
            if self._guard is not None:
                self._guard.withdrawn(key)
            return OUTCOME_WITHDRAWN

        # 2. Being deleted: withdraw, and only once the hub confirmed, let the object go.
        metadata = obj.get("metadata") or {}
        if metadata.get("deletionTimestamp"):
            self._finalize(key, obj, record)
            return OUTCOME_FINALIZED

        # 3. Validate (docs/reference.md#conditions).
        service = self._services.get(key)
        validity = validate(
            namespace=namespace,
            name=name,
            service=service,
            deny_namespaces=self._deny,
            service_export=obj,
        )
        if not validity.valid:
            self._invalid(key, obj, record, validity)
            return OUTCOME_INVALID
        assert service is not None

        # 4. An agent older than the hub's minimum stops exporting (docs/reference.md#failover).
        if not self._gate.supported:
            self._write_status(
                key, obj, validity=validity, ready=(c.FALSE, c.REASON_FAILED, self._gate.reason)
            )
            return OUTCOME_UNSUPPORTED

        # 5. Derive the exported spec, keeping the stopwatch if the spec did not change —
        # also when our annotations were wiped (`kubectl replace` of the ServiceExport):
        # then the hub's record of the same exported spec still knows when it started.
        annotated = _stamp_for(obj)
        previous_since = annotated or _stamp_of_record(record)
        try:
            export = derive_export(
                cluster_id=self._cluster_id,
                service=service,
                service_export=obj,
                exported_since=previous_since[0] if previous_since else self._now_millis(),
            )
        except InvalidExport as exc:
            logger.info("%s: not exportable: %s", key, exc, extra=self._fields(key))
            self._write_status(
                key, obj, validity=validity, ready=(c.FALSE, c.REASON_FAILED, str(exc))
            )
            return OUTCOME_NOT_EXPORTABLE
        fingerprint = export_fingerprint(export.spec)
        since = previous_since[0] if previous_since and previous_since[1] == fingerprint else None

        # 6. Finalizer first, then the stamp — one patch, before anything reaches the hub.
        obj, export = self._ensure_metadata(
            key, obj, export, since=since, fingerprint=fingerprint, annotated=annotated is not None
        )

        # 7. PUT when the hub lacks the record or holds another exported spec.
        outcome = OUTCOME_UP_TO_DATE
        if _needs_put(record, export):
            record = self._put(key, obj, export, validity)
            if record is None:
                return OUTCOME_REJECTED
            outcome = OUTCOME_EXPORTED
        assert record is not None

        # 8. Report the verdict back.
        self._report(key, obj, record, validity)
        # The data point's moment (docs/reference.md#export-path: "taken when a verdict is reported
        # back, or found already up to date"): now, before the dedupe PATCH's round trip.
        reported_at = self._clock()

        # 9. Count this Service resourceVersion's export duration, once
        # (docs/reference.md#export-path).
        if record.condition(c.CONFLICT) is not None:
            self._observe_duration(key, record, reported_at=reported_at)
        return outcome

    # -- steps ------------------------------------------------------------------------------

    def _finalize(
        self, key: str, obj: dict[str, Any], record: InternalServiceExport | None
    ) -> None:
        metadata = obj.get("metadata") or {}
        finalizers = list(metadata.get("finalizers") or [])
        ours = FINALIZER_SERVICEEXPORT_CLEANUP in finalizers
        if not ours and record is None:
            return
        # DELETE even when our view shows no record: the view may lag behind a PUT, and the
        # finalizer must not go while the hub might still hold the export.
        self._withdraw(key, why="its ServiceExport is being deleted")
        if not ours:
            return
        self._check_leading()
        namespace, _, name = key.partition("/")
        try:
            self._writer.patch_metadata(
                namespace,
                name,
                resource_version=str(metadata.get("resourceVersion")),
                finalizers=[f for f in finalizers if f != FINALIZER_SERVICEEXPORT_CLEANUP],
            )
        except NotFoundError:
            return  # already gone: nothing left to release
        logger.info("%s: withdrawn from the hub; finalizer removed", key, extra=self._fields(key))

    def _invalid(
        self,
        key: str,
        obj: dict[str, Any],
        record: InternalServiceExport | None,
        validity: Validity,
    ) -> None:
        if record is not None:
            self._withdraw(key, why=f"the ServiceExport is not valid ({validity.reason})")
        obj = self._write_status(
            key,
            obj,
            validity=validity,
            ready=(c.FALSE, c.REASON_PENDING, f"Not exported: {validity.message}"),
            remove=(c.CONFLICT,),
        )
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if ANNOTATION_EXPORTED_SINCE in annotations or ANNOTATION_EXPORTED_SPEC_HASH in annotations:
            # The stopwatch belongs to an export that no longer exists: a later valid export
            # is a new one and starts its own.
            self._patch_metadata(
                key,
                obj,
                annotations={ANNOTATION_EXPORTED_SINCE: None, ANNOTATION_EXPORTED_SPEC_HASH: None},
            )

    def _ensure_metadata(
        self,
        key: str,
        obj: dict[str, Any],
        export: InternalServiceExport,
        *,
        since: datetime | None,
        fingerprint: str,
        annotated: bool,
    ) -> tuple[dict[str, Any], InternalServiceExport]:
        metadata = obj.get("metadata") or {}
        finalizers = list(metadata.get("finalizers") or [])
        need_finalizer = FINALIZER_SERVICEEXPORT_CLEANUP not in finalizers
        annotations: dict[str, str | None] | None = None
        if since is not None and not annotated:
            # The stopwatch came from the hub's record: put the annotations back as they were.
            annotations = {
                ANNOTATION_EXPORTED_SINCE: format_millis(since),
                ANNOTATION_EXPORTED_SPEC_HASH: fingerprint,
            }
        if since is None:
            stamp = self._now_millis()
            annotations = {
                ANNOTATION_EXPORTED_SINCE: format_millis(stamp),
                ANNOTATION_EXPORTED_SPEC_HASH: fingerprint,
            }
            export = _with_since(export, stamp)
        if not need_finalizer and annotations is None:
            return obj, export
        obj = self._patch_metadata(
            key,
            obj,
            finalizers=[*finalizers, FINALIZER_SERVICEEXPORT_CLEANUP] if need_finalizer else None,
            annotations=annotations,
        )
        if annotations is not None and since is None:
            logger.info(
                "%s: exported spec changed; exportedSince stamped %s",
                key,
                annotations[ANNOTATION_EXPORTED_SINCE],
                extra=self._fields(key),
            )
        return obj, export

    def _put(
        self,
        key: str,
        obj: dict[str, Any],
        export: InternalServiceExport,
        validity: Validity,
    ) -> InternalServiceExport | None:
        """PUT `export`; the stored record, or None when the hub refused it for good."""
        self._check_leading()
        try:
            record = self._hub.put_export(export)
        except HubRejected as exc:
            logger.warning(
                "%s: the hub rejected the export: %s", key, exc.message, extra=self._fields(key)
            )
            self._write_status(
                key,
                obj,
                validity=validity,
                ready=(c.FALSE, c.REASON_FAILED, f"The hub rejected the export: {exc.message}"),
            )
            if exc.code in _FINAL_REJECTIONS:
                return None  # retrying the same body cannot help; the next change re-sends
            raise  # 401/403/404: credentials or registration the operator may fix; retry
        except HubUnavailable as exc:
            self._write_status(
                key,
                obj,
                validity=validity,
                ready=(c.FALSE, c.REASON_PENDING, "Waiting for the hub, which is unreachable."),
            )
            raise exc
        self._hub_view.remember(record)
        verdict = record.condition(c.CONFLICT)
        logger.info(
            "%s: exported to the hub (record resourceVersion %s, verdict %s)",
            key,
            record.metadata.resource_version,
            f"{verdict.status}/{verdict.reason}" if verdict else "pending",
            extra=self._fields(key),
        )
        return record

    def _report(
        self,
        key: str,
        obj: dict[str, Any],
        record: InternalServiceExport,
        validity: Validity,
    ) -> None:
        verdict = record.condition(c.CONFLICT)
        generation = _generation(obj)
        previous = find_condition((obj.get("status") or {}).get("conditions"), c.CONFLICT)
        if verdict is None:
            self._write_status(
                key,
                obj,
                validity=validity,
                ready=(
                    c.FALSE,
                    c.REASON_PENDING,
                    "Exported; waiting for the hub's conflict verdict.",
                ),
            )
            return
        obj = self._write_status(
            key,
            obj,
            validity=validity,
            conflict=condition_from_hub(verdict, observed_generation=generation),
            ready=(c.TRUE, c.REASON_EXPORTED, "Exported to the hub, which has judged it."),
        )
        # The Event follows the status write: if that write failed, the retry still sees the
        # old verdict and emits it then; an Event is never sent for a verdict not recorded.
        if previous is None or previous.get("status") != verdict.status:
            conflicting = verdict.status == c.TRUE
            self._events.record(
                obj,
                type=c.EVENT_TYPE_WARNING if conflicting else c.EVENT_TYPE_NORMAL,
                reason=c.EVENT_CONFLICT_FOUND if conflicting else c.EVENT_NO_CONFLICT_FOUND,
                message=verdict.message or verdict.reason,
            )
            logger.info(
                "%s: verdict changed to Conflict=%s/%s",
                key,
                verdict.status,
                verdict.reason,
                extra=self._fields(key),
            )

    def _observe_duration(
        self, key: str, record: InternalServiceExport, *, reported_at: datetime
    ) -> None:
        self._check_leading()
        try:
            record = self._durations.observe_once(record, reported_at=reported_at)
        except HubConflict:
            # The record moved on since our view of it: re-read it so the retry decides on the
            # current one (which may already say "counted" — then nothing is observed).
            namespace, _, name = key.partition("/")
            fresh = self._hub.get_export(namespace, name)
            if fresh is not None:
                self._hub_view.remember(fresh)
            raise
        self._hub_view.remember(record)

    # -- writes -----------------------------------------------------------------------------

    def _withdraw(self, key: str, *, why: str) -> None:
        self._check_leading()
        namespace, _, name = key.partition("/")
        last = self._hub.delete_export(namespace, name)
        self._hub_view.forget(key, last)
        logger.info(
            "%s: withdrawn from the hub because %s%s",
            key,
            why,
            "" if last is not None else " (it was already gone)",
            extra=self._fields(key),
        )

    def _write_status(
        self,
        key: str,
        obj: dict[str, Any],
        *,
        validity: Validity,
        ready: tuple[str, str, str],
        conflict: dict[str, Any] | None = None,
        remove: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """Set Valid/Ready (and Conflict when given); write only on a change. Answers the
        object as stored (or `obj` when nothing was written)."""
        generation = _generation(obj)
        desired = [
            make_condition(
                type_=c.VALID,
                status=validity.status,
                reason=validity.reason,
                message=validity.message,
                observed_generation=generation,
            )
        ]
        if conflict is not None:
            desired.append(conflict)
        status, reason, message = ready
        desired.append(
            make_condition(
                type_=c.READY,
                status=status,
                reason=reason,
                message=message,
                observed_generation=generation,
            )
        )
        current = obj.get("status") or {}
        old = current.get("conditions") or []
        new = merge_conditions(old, desired, remove=remove, now=self._clock())
        if not status_changed(old, new):
            return obj
        self._check_leading()
        body = {**obj, "status": {**current, "conditions": new}}
        stored = self._writer.replace_status(body)
        logger.info(
            "%s: status %s",
            key,
            ", ".join(
                f"{d['type']}={d['status']}/{d['reason']}"
                for d in new
                if d["type"] in (c.VALID, c.CONFLICT, c.READY)
            ),
            extra=self._fields(key),
        )
        return stored

    def _patch_metadata(
        self,
        key: str,
        obj: dict[str, Any],
        *,
        finalizers: list[str] | None = None,
        annotations: dict[str, str | None] | None = None,
    ) -> dict[str, Any]:
        self._check_leading()
        namespace, _, name = key.partition("/")
        return self._writer.patch_metadata(
            namespace,
            name,
            resource_version=str((obj.get("metadata") or {}).get("resourceVersion")),
            finalizers=finalizers,
            annotations=annotations,
        )

    def _fields(self, key: str) -> dict[str, str]:
        """The structured fields of a decision's log line (the trace id joins on its own)."""
        return {"key": key, "cluster": self._cluster_id}

    def _check_leading(self) -> None:
        if not self._may_write():
            raise NotLeading("this replica no longer holds the Lease")

    def _now_millis(self) -> datetime:
        # Millisecond precision, as the annotation keeps it: what a restart reads back is
        # then exactly what was sent, and compares equal to the hub's copy.
        return parse_rfc3339(format_millis(self._clock()))


# -- pure helpers ---------------------------------------------------------------------------------


def _generation(obj: dict[str, Any]) -> int | None:
    value = (obj.get("metadata") or {}).get("generation")
    return int(value) if isinstance(value, int) else None


def _stamp_for(obj: dict[str, Any]) -> tuple[datetime, str] | None:
    """(exportedSince, the fingerprint it was stamped for) from the annotations, if sound."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_EXPORTED_SINCE)
    fingerprint = annotations.get(ANNOTATION_EXPORTED_SPEC_HASH)
    if not text or not fingerprint:
        return None
    try:
        return parse_rfc3339(str(text)), str(fingerprint)
    except ValueError:
        return None  # someone edited it into nonsense: restamp rather than fail


def _stamp_of_record(record: InternalServiceExport | None) -> tuple[datetime, str] | None:
    """(exportedSince, fingerprint) of the hub's record, the stopwatch of last resort."""
    if record is None:
        return None
    return record.spec.service_reference.exported_since, export_fingerprint(record.spec)


def _with_since(export: InternalServiceExport, since: datetime) -> InternalServiceExport:
    reference = export.spec.service_reference.model_copy(update={"exported_since": since})
    spec = export.spec.model_copy(update={"service_reference": reference})
    return export.model_copy(update={"spec": spec})


def _needs_put(record: InternalServiceExport | None, export: InternalServiceExport) -> bool:
    if record is None:
        return True
    if not same_exported_spec(record.spec, export.spec):
        return True
    # Same spec but another stopwatch (the annotation was re-stamped, e.g. edited away):
    # the hub's copy of exportedSince must match the one the duration is measured from.
    return (
        record.spec.service_reference.exported_since != export.spec.service_reference.exported_since
    )


def export_controller(
    reconciler: ExportReconciler, queue: WorkQueue, *, in_scope: Callable[[str], bool]
) -> Controller:
    """The export controller: for ServiceExports, watching their Services (a Service's key
    is its ServiceExport's) and the hub's records of this cluster (in the agent's namespace
    scope only: with a narrowed --namespace the others would all look like orphans)."""

    def by_namespaced_key(event: Event) -> list[tuple[str, bool]]:
        obj = event.obj
        return [] if obj is None else [(namespaced_key(obj), event.from_relist)]

    def by_hub_record(event: Event) -> list[tuple[str, bool]]:
        obj = event.obj
        if obj is None:
            return []
        key = record_key(obj)
        return [(key, event.from_relist)] if in_scope(key) else []

    def reconcile(key: str) -> None:
        try:
            reconciler.reconcile(key)
        except NotLeading:
            # Abandoned, not failed: the next term's repair queues every key again.
            logger.debug("%s: abandoned, this replica stopped leading", key)

    return Controller(
        name=CONTROLLER,
        queue=queue,
        reconcile=reconcile,
        for_=Watch(SERVICE_EXPORTS, by_namespaced_key),
        watches=(Watch(SERVICES, by_namespaced_key), Watch(HUB_RECORDS, by_hub_record)),
    )
