"""The export-duration histogram with resource-version dedupe (docs/reference.md#export-path).

A data point is "now - exportedSince" for one resourceVersion of the Service, taken when the
hub's verdict for it is reported back (or found already up to date). The hard part is
*exactly once*: a reconcile runs again on every resync, every retry, on a new leader after
failover and after a restart, and each of those must not count the same export twice.

The memory that survives all of them is the hub record itself: its annotation
`mcsync.io/last-observed-resource-version`. The rule, in this order:

1. If the annotation equals `spec.serviceReference.resourceVersion`, this version was
   counted: do nothing.
2. Otherwise PATCH the annotation on the hub with the record's `metadata.resourceVersion`
   as a precondition. A 409 means someone (another replica, our own earlier attempt whose
   answer was lost) wrote the record since we read it: raise `HubConflict`; the caller
   re-reads and decides again, and the new record will usually say "already counted".
3. Only after the PATCH succeeded, observe — the duration up to when the verdict was
   reported back, which the caller passes in (the PATCH's own round trip is not export time).

So two replicas racing on one record cannot both pass step 2 (the hub serialises writes on
its revision), and a crash between 2 and 3 loses one data point instead of doubling one —
the reference's choice: "never counted twice".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from prometheus_client import Histogram

from shared.conditions import CONFLICT
from shared.constants import ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION
from shared.metrics import clamp_export_duration_ms
from shared.models import InternalServiceExport
from shared.timefmt import utcnow

__all__ = ["DurationRecorder", "export_duration_ms", "needs_observation"]

logger = logging.getLogger(__name__)


class AnnotationPatcher(Protocol):
    """The one hub call this module needs (`HubClient.patch_annotations`)."""

    def patch_annotations(
        self,
        namespace: str,
        name: str,
        *,
        resource_version: str,
        annotations: dict[str, str | None],
    ) -> InternalServiceExport: ...


def needs_observation(record: InternalServiceExport) -> bool:
    """True when `record` has a verdict and its Service resourceVersion was not yet counted."""
    if record.condition(CONFLICT) is None:
        return False  # no verdict yet: nothing was reported back
    observed = (record.metadata.annotations or {}).get(ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION)
    return observed != record.spec.service_reference.resource_version


def export_duration_ms(record: InternalServiceExport, *, now: datetime) -> float:
    """now - exportedSince of `record`, clamped as docs/reference.md#export-path says."""
    elapsed = now - record.spec.service_reference.exported_since
    return clamp_export_duration_ms(elapsed.total_seconds() * 1000.0)


class DurationRecorder:
    """Counts each exported resourceVersion once in the histogram, deduped on the hub."""

    def __init__(
        self,
        *,
        hub: AnnotationPatcher,
        histogram: Histogram,
        cluster_id: str,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._hub = hub
        self._histogram = histogram.labels(cluster_id)
        self._cluster_id = cluster_id
        self._clock = clock

    def observe_once(
        self, record: InternalServiceExport, *, reported_at: datetime | None = None
    ) -> InternalServiceExport:
        """Count `record`'s resourceVersion unless already counted; answers the newest record.

        `reported_at`: when the verdict was reported back (or found up to date) — the moment
        docs/reference.md#export-path takes the data point at. The dedupe PATCH comes after it and
        its round trip is bookkeeping, not export time, so it is not counted in. Default: now.

        Raises the hub client's `HubConflict` when the record changed since it was read
        (nothing is counted then).
        """
        if not needs_observation(record):
            return record
        ref = record.spec.service_reference
        resource_version = record.metadata.resource_version
        if not resource_version:
            raise ValueError(f"hub record {ref.namespace}/{ref.name} has no resourceVersion")
        patched = self._hub.patch_annotations(
            ref.namespace,
            ref.name,
            resource_version=resource_version,
            annotations={ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION: ref.resource_version},
        )
        # The hub now says "counted": observe. A crash right here loses this data point,
        # which is the reference's choice over ever counting one twice.
        duration = export_duration_ms(
            record, now=reported_at if reported_at is not None else self._clock()
        )
        self._histogram.observe(duration)
        logger.info(
            "export duration observed for %s/%s: %.0f ms (Service resourceVersion %s)",
            ref.namespace,
            ref.name,
            duration,
            ref.resource_version,
            extra={"key": f"{ref.namespace}/{ref.name}", "cluster": self._cluster_id},
        )
        return patched
