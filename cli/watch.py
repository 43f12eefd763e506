"""`mcsync exports --watch`: follow the hub's change feed as a filtered, self-healing view.

The hub's feed can be narrowed by cluster only; namespace, name and conflict filters are
applied here. That makes this a *view* in the Kubernetes field-selector sense: an export
that stops matching the filters (say its conflict is resolved under `--conflict true`) is
reported as DELETED from the view, and one that starts matching is ADDED, whatever the
hub called the change. `ExportView` holds that state and is pure, so it is tested with
plain models.

`follow` is the reflector loop: watch from the list's resourceVersion; remember the
revision of every event, BOOKMARKs included, so that a stream the hub ends (its
`timeoutSeconds`) is resumed without a gap; on `410 Gone` relist and report the
difference between the view and the fresh list as events (nothing is missed, nothing is
reported twice); on a dropped connection or a 503 retry with backoff for a while before
giving up, since an operator watching through a hub restart expects the watch to survive
it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from cli.client import Gone, HubClient, HubError
from shared.conditions import CONFLICT, TRUE
from shared.models import InternalServiceExport, InternalServiceExportList

ViewEventType = Literal["ADDED", "MODIFIED", "DELETED"]
Emit = Callable[[ViewEventType, InternalServiceExport], None]
Key = tuple[str, str, str]

RETRY_DELAYS_SECONDS: tuple[float, ...] = (1, 2, 4, 8, 15, 30)


def key_of(export: InternalServiceExport) -> Key:
    ref = export.spec.service_reference
    return ref.cluster_id, ref.namespace, ref.name


@dataclass(frozen=True)
class ExportFilter:
    """The filters of `mcsync exports`, applied to one export."""

    namespace: str | None = None
    name: str | None = None
    cluster: str | None = None
    conflict: bool | None = None

    def matches(self, export: InternalServiceExport) -> bool:
        cluster, namespace, name = key_of(export)
        if self.namespace is not None and namespace != self.namespace:
            return False
        if self.name is not None and name != self.name:
            return False
        if self.cluster is not None and cluster != self.cluster:
            return False
        if self.conflict is not None:
            condition = export.condition(CONFLICT)
            conflicting = condition is not None and condition.status == TRUE
            if conflicting != self.conflict:
                return False
        return True


@dataclass
class ExportView:
    """The exports a watcher is shown, keyed by (cluster, namespace, name)."""

    filter: ExportFilter
    items: dict[Key, InternalServiceExport] = field(default_factory=dict)

    def apply(
        self, event_type: str, export: InternalServiceExport
    ) -> tuple[ViewEventType, InternalServiceExport] | None:
        """What the watcher sees of one hub event, or None when it sees nothing."""
        key = key_of(export)
        if event_type == "DELETED" or not self.filter.matches(export):
            if self.items.pop(key, None) is None:
                return None
            return "DELETED", export
        seen = key in self.items
        self.items[key] = export
        return ("MODIFIED" if seen else "ADDED"), export

    def replace(
        self, listing: Iterable[InternalServiceExport]
    ) -> list[tuple[ViewEventType, InternalServiceExport]]:
        """Adopt a fresh list; answer the events that turn the old view into it."""
        fresh = {key_of(e): e for e in listing if self.filter.matches(e)}
        changes: list[tuple[ViewEventType, InternalServiceExport]] = []
        for key, old in self.items.items():
            if key not in fresh:
                changes.append(("DELETED", old))
        for key, new in fresh.items():
            old_export = self.items.get(key)
            if old_export is None:
                changes.append(("ADDED", new))
            elif old_export.metadata.resource_version != new.metadata.resource_version:
                changes.append(("MODIFIED", new))
        self.items = fresh
        return changes


def follow(
    client: HubClient,
    *,
    view: ExportView,
    resource_version: str | None,
    relist: Callable[[], InternalServiceExportList],
    emit: Emit,
    warn: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Report every change of the view until interrupted; HubError when it cannot go on."""
    revision = resource_version
    failures = 0
    stale = False  # the hub said Gone: relist before watching again
    while True:
        try:
            if stale:
                listing = relist()
                for change in view.replace(listing.items):
                    emit(*change)
                revision, stale = listing.metadata.resource_version, False
            for event in client.watch_exports(
                resource_version=revision, cluster=view.filter.cluster
            ):
                failures = 0
                revision = event.resource_version or revision
                if event.type == "BOOKMARK" or not isinstance(
                    event.object, InternalServiceExport
                ):
                    continue
                seen = view.apply(event.type, event.object)
                if seen is not None:
                    emit(*seen)
            # The hub ended the stream (its timeoutSeconds): resume where it stopped.
        except Gone:
            stale = True
        except HubError as exc:
            if not exc.transient or failures >= len(RETRY_DELAYS_SECONDS):
                raise
            delay = RETRY_DELAYS_SECONDS[failures]
            failures += 1
            warn(f"warning: lost the hub's feed ({exc.message}); retrying in {delay:g}s")
            sleep(delay)
