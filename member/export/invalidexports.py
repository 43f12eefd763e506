"""What the hub hears of this cluster's ServiceExports that are not valid (docs/reference.md#flags).

An invalid ServiceExport (`Valid=False`: no Service, an ExternalName Service, a denied
namespace; docs/reference.md#conditions) is never exported, so the hub would know nothing of it, and
an operator asking "why is this Service not exported?" would have to visit every cluster.
The export reconciler already writes the reason onto the ServiceExport's status; this
reads it back from the informer's cache when a heartbeat is sent and hands the list to
the beat. So the heartbeat stays the one periodic call to the hub, and the export path —
the hot one — gains no write and no request.

Sent only on a change: the beat carries the list when it differs from the last one the
hub answered for, and None (the hub keeps what it has) otherwise, and None too while the
ServiceExport caches are not filled (an empty cache is not "nothing is invalid"). A
restarted agent has had nothing answered yet, so its first beat after the caches filled
carries the list, empty or not, replacing what an earlier run reported. At most
`INVALID_EXPORTS_MAX` are listed, in key order; `total` counts them all.

The reports never take part in conflicts or imports: the hub stores them beside the
cluster's record, not as exports.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from shared import conditions as c
from shared.constants import INVALID_EXPORTS_MAX
from shared.models import InvalidExportReport, InvalidExports

CachedExports = Callable[[], list[dict[str, Any]]]


def invalid_report(obj: dict[str, Any]) -> InvalidExportReport | None:
    """The report of one cached ServiceExport: None unless its `Valid` condition is False."""
    status = obj.get("status")
    metadata = obj.get("metadata")
    if not isinstance(status, dict) or not isinstance(metadata, dict):
        return None
    for condition in status.get("conditions") or ():
        if not isinstance(condition, dict) or condition.get("type") != c.VALID:
            continue
        if condition.get("status") != c.FALSE:
            return None
        try:
            return InvalidExportReport(
                namespace=metadata.get("namespace", ""),
                name=metadata.get("name", ""),
                reason=condition.get("reason") or "Unknown",
                message=str(condition.get("message") or "")[:1024],
            )
        except ValueError:
            return None  # a status no agent of ours wrote: nothing to tell the hub
    return None


class InvalidExportsReporter:
    """The heartbeat's `invalidExports`: the current list when it changed, else None."""

    def __init__(self, *, cached_exports: CachedExports, synced: Callable[[], bool]) -> None:
        self._cached = cached_exports
        self._synced = synced
        self._lock = threading.Lock()
        self._answered: InvalidExports | None = None  # the last list the hub answered for

    def current(self) -> InvalidExports:
        """Every invalid ServiceExport in the cache, at most INVALID_EXPORTS_MAX listed."""
        reports = [r for obj in self._cached() if (r := invalid_report(obj)) is not None]
        reports.sort(key=lambda r: (r.namespace, r.name))
        return InvalidExports(items=reports[:INVALID_EXPORTS_MAX], total=len(reports))

    def pending(self) -> InvalidExports | None:
        """What the next beat must carry: the list, or None when the hub already has it or
        the caches are not filled yet."""
        if not self._synced():
            return None
        now = self.current()
        with self._lock:
            return None if now == self._answered else now

    def answered(self, sent: InvalidExports | None) -> None:
        """The hub answered a beat that carried `sent` (None: it carried nothing)."""
        if sent is not None:
            with self._lock:
                self._answered = sent
