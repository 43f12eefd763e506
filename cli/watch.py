"""`--watch`: follow the hub's change feed as a filtered, self-healing view.

The hub has one feed, that of the exports, which can be narrowed by cluster only; every
list of the CLI is kept current from it (`cli.commands` says how each list uses it). A
`View` is what a watcher is shown, by key: an object that stops matching the filters (say
an export's conflict is resolved under `--conflict true`) is reported as DELETED from the
view, and one that starts matching is ADDED, whatever the hub called the change; an
object whose resourceVersion did not move is not reported again. Views are pure, so they
are tested with plain models; `ExportView` is the view of `exports`.

`follow` is the reflector loop: watch from the list's resourceVersion; remember the
revision of every event, BOOKMARKs included, so that a stream the hub ends (its
`timeoutSeconds`) is resumed without a gap; on `410 Gone` resync (relist and report the
difference between the view and the fresh list as events: nothing is missed, nothing is
reported twice); on a dropped connection or a 503 reconnect with `shared.backoff`'s full
jitter (so the operators' watches do not all come back at the instant a hub restarts),
never sooner than the hub's `Retry-After` (seconds or an HTTP-date), for a minute before
giving up, since an operator watching through a hub restart expects the watch to survive
it. The minute is measured on the clock, not counted in retries: with jitter, a count
would make the watch's patience a matter of luck.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from cli.client import Gone, HubError
from shared.backoff import Backoff, Retries, retry_after
from shared.conditions import CONFLICT, TRUE
from shared.models import InternalServiceExport, ObjectMeta, WatchEvent

ViewEventType = Literal["ADDED", "MODIFIED", "DELETED"]
Key = tuple[str, str, str]
T = TypeVar("T")


class HasMeta(Protocol):
    @property
    def metadata(self) -> ObjectMeta: ...


# Reconnecting a lost feed: the first retry within a second, later ones up to 30 s apart
# (the longest Retry-After believed, too), until the hub has been lost for a minute.
RECONNECT = Backoff(base=1.0, cap=30.0)
GIVE_UP_AFTER_SECONDS = 60.0


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


class View(Generic[T]):
    """The objects a watcher is shown, by key: what a change on the hub looks like from
    here (an object that stops matching the filters is DELETED from the view)."""

    def __init__(
        self,
        key: Callable[[T], Hashable],
        *,
        matches: Callable[[T], bool] = lambda _: True,
        same: Callable[[T, T], bool],
    ) -> None:
        self.key = key
        self.matches = matches
        self.same = same
        self.items: dict[Hashable, T] = {}

    def apply(self, event_type: str, obj: T) -> tuple[ViewEventType, T] | None:
        """What the watcher sees of one change, or None when it sees nothing."""
        key = self.key(obj)
        if event_type == "DELETED" or not self.matches(obj):
            if self.items.pop(key, None) is None:
                return None
            return "DELETED", obj
        old = self.items.get(key)
        self.items[key] = obj
        if old is None:
            return "ADDED", obj
        return None if self.same(old, obj) else ("MODIFIED", obj)

    def remove(self, key: Hashable) -> tuple[ViewEventType, T] | None:
        """The object under `key` is gone (the hub answered 404)."""
        old = self.items.pop(key, None)
        return None if old is None else ("DELETED", old)

    def replace(self, listing: Iterable[T]) -> list[tuple[ViewEventType, T]]:
        """Adopt a fresh list; answer the events that turn the old view into it."""
        fresh = {self.key(o): o for o in listing if self.matches(o)}
        changes: list[tuple[ViewEventType, T]] = []
        for key, old in self.items.items():
            if key not in fresh:
                changes.append(("DELETED", old))
        for key, new in fresh.items():
            old_obj = self.items.get(key)
            if old_obj is None:
                changes.append(("ADDED", new))
            elif not self.same(old_obj, new):
                changes.append(("MODIFIED", new))
        self.items = fresh
        return changes


def same_version(old: HasMeta, new: HasMeta) -> bool:
    """Unchanged when the hub's resourceVersion is (every change takes a new one)."""
    return old.metadata.resource_version == new.metadata.resource_version


class ExportView(View[InternalServiceExport]):
    """The exports a watcher is shown, keyed by (cluster, namespace, name)."""

    def __init__(self, export_filter: ExportFilter) -> None:
        super().__init__(key_of, matches=export_filter.matches, same=same_version)
        self.filter = export_filter


def follow(
    stream: Callable[[str | None], Iterable[WatchEvent]],
    *,
    resource_version: str | None,
    on_event: Callable[[WatchEvent], None],
    resync: Callable[[], str | None],
    warn: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Feed every event of a hub feed to `on_event` (BOOKMARKs included) until interrupted;
    HubError when it cannot go on. `stream(revision)` opens the feed after `revision`
    (`HubClient.watch_exports` or `watch_imports`).

    `resync` is called after a 410: it relists, reports the difference, and answers the
    revision to watch from.
    """
    revision = resource_version
    retries = Retries(RECONNECT)
    lost_since: float | None = None  # when the feed was lost, while it stays lost
    stale = False  # the hub said Gone: relist before watching again
    while True:
        try:
            if stale:
                revision, stale = resync(), False
            for event in stream(revision):
                retries.reset()
                lost_since = None
                revision = event.resource_version or revision
                on_event(event)
            # The hub ended the stream (its timeoutSeconds): resume where it stopped.
        except Gone:
            stale = True
        except HubError as exc:
            now = clock()
            lost_since = now if lost_since is None else lost_since
            if not exc.transient or now - lost_since >= GIVE_UP_AFTER_SECONDS:
                raise
            asked = retry_after(exc.retry_after, maximum=RECONNECT.cap)
            delay = retries.next(retry_after=asked)
            warn(f"warning: lost the hub's feed ({exc.message}); retrying in {delay:.1f}s")
            sleep(delay)
