"""A ListWatch over the hub's records of this cluster, for the generic informer.

docs/reference.md#export-path asks the agent to *follow the hub's change feed, not poll*, and
docs/reference.md#export-path to relist and repair after a `410 Gone`. Both are what an informer
already does for Kubernetes objects, so the hub gets the same treatment: `HubExportListWatch.list()`
is the paged `GET …/clusters/{c}/serviceexports`, `watch()` the NDJSON stream of
`GET …?watch=true&resourceVersion=N`, and 410 becomes `ResourceExpired`, on which the
informer relists and diffs. One machine, two sources; the informer's cache of hub records is
the reconciler's view of "what the hub has" (see `HubView`).

Objects are handed to the informer as wire dicts (what it caches and diffs by
resourceVersion) and keyed by `spec.serviceReference` namespace/name, the same
"namespace/name" as the ServiceExport they belong to.

`HubView` answers "the hub's current record of a key" from the informer's cache, corrected
by the answers of our own writes: after a PUT the feed may take a moment to bring the new
record, and a reconcile in that moment must not PUT again or copy a stale verdict. Revisions
are one global increasing counter (docs/reference.md#change-feeds), so "newer" is a plain integer
comparison.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import ValidationError

from member.hubclient import HubClient, HubGone, HubWatchStream
from member.informer import Informer, ItemTransform, ResourceExpired
from member.transform import transform_hub_record
from shared.models import InternalServiceExport, WatchEvent, to_wire

__all__ = ["HubEventStream", "HubExportListWatch", "HubView", "opened_watch", "record_key"]

logger = logging.getLogger(__name__)


def record_key(obj: dict[str, Any]) -> str:
    """"namespace/name" of a hub record (wire dict), from its serviceReference."""
    reference = (obj.get("spec") or {}).get("serviceReference") or {}
    metadata = obj.get("metadata") or {}
    namespace = reference.get("namespace") or metadata.get("namespace") or ""
    name = reference.get("name") or metadata.get("name") or ""
    return f"{namespace}/{name}"


def opened_watch(open_stream: Callable[[], HubWatchStream]) -> HubWatchStream:
    """A watch of one of the hub's feeds, opened; the hub's `410 Gone` (`HubGone`) is the
    informer's `ResourceExpired`, on which it relists and diffs (docs/reference.md#change-feeds).
    Every hub feed's ListWatch (exports, imports, fleet properties) opens its watch here."""
    try:
        return open_stream()
    except HubGone as exc:
        raise ResourceExpired(str(exc)) from None


class HubEventStream:
    """Adapts a `HubWatchStream` (models) to the informer's raw-event dialect (dicts)."""

    def __init__(self, stream: HubWatchStream) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        event: WatchEvent = next(self._stream)
        return {"type": event.type, "object": to_wire(event.object)}

    def interrupt(self) -> None:
        self._stream.interrupt()

    def close(self) -> None:
        """Release the connection (the informer calls it when it leaves the stream early)."""
        self._stream.close()


class HubExportListWatch:
    """`member.informer.ListWatch` over the hub's records of this cluster."""

    def __init__(self, hub: HubClient) -> None:
        self._hub = hub

    def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
        def each(record: InternalServiceExport) -> dict[str, Any]:
            wire = to_wire(record)
            return transform(wire) if transform is not None else wire

        # Converted page by page: the models of a 10,000-record list are never all alive.
        return self._hub.list_exports(each)

    def watch(self, *, resource_version: str, timeout_seconds: int) -> HubEventStream:
        return HubEventStream(opened_watch(lambda: self._hub.watch_exports(
            resource_version=resource_version, timeout_seconds=timeout_seconds
        )))


def _revision(record: InternalServiceExport | None) -> int:
    try:
        return int((record.metadata.resource_version if record else None) or 0)
    except ValueError:
        return 0


def _raw_revision(obj: dict[str, Any] | None) -> int:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def _feed_position(informer: Informer) -> int:
    try:
        return int(informer.resource_version or 0)
    except ValueError:
        return 0


class HubView:
    """The newest known hub record per key: the feed's cache, or our own write's answer.

    Our writes' answers are held as the feed's cache holds records (`transform_hub_record`,
    a wire dict) and only while the feed lags behind them: `settle()`, called for each feed
    event, drops them as soon as the feed has caught up. Holding them as models until the
    key's next reconcile kept one ~8 KB model per key after a startup repair.
    """

    def __init__(self, informer: Informer) -> None:
        self._informer = informer
        self._lock = threading.Lock()
        # key -> (revision, compact record or None for "we deleted it at this revision or later")
        self._written: dict[str, tuple[int, dict[str, Any] | None]] = {}

    def get(self, key: str) -> InternalServiceExport | None:
        self.settle(key)
        with self._lock:
            written = self._written.get(key)
        if written is None:
            return self._cached(key)
        record = written[1]
        return self._parse(key, record) if record is not None else None

    def remember(self, record: InternalServiceExport) -> None:
        """Our write's answer: newer than the feed until the feed shows a later revision."""
        key = f"{record.spec.service_reference.namespace}/{record.spec.service_reference.name}"
        revision = _revision(record)
        cached = self._informer.get(key)
        if cached is not None and _raw_revision(cached) >= revision:
            return  # the feed already has it (e.g. a duration check that changed nothing)
        compact = transform_hub_record(to_wire(record))
        with self._lock:
            self._written[key] = (revision, compact)

    def forget(self, key: str, last: InternalServiceExport | None) -> None:
        """We withdrew `key`; `last` is the hub's last state (None: it was already gone)."""
        revision = max(_revision(last), _raw_revision(self._informer.get(key)))
        with self._lock:
            self._written[key] = (revision, None)

    def settle(self, key: str) -> None:
        """Drop our write's answer for `key` once the feed has caught up with it."""
        raw = self._informer.get(key)
        with self._lock:
            written = self._written.get(key)
            if written is None:
                return
            revision, record = written
            if record is not None:
                # The feed caught up with our write: it is the truth again.
                caught_up = raw is not None and _raw_revision(raw) >= revision
            elif raw is not None:
                # A tombstone: we withdrew the record at `revision`. A cached record at or
                # before it is one the feed has not yet seen deleted.
                caught_up = _raw_revision(raw) > revision
            else:
                # The feed has passed our delete: nothing to correct.
                caught_up = _feed_position(self._informer) >= revision
            if caught_up:
                del self._written[key]

    def keys(self) -> set[str]:
        return set(self._informer.keys())

    def present_keys(self) -> set[str]:
        """The keys the hub holds, as far as we know: the feed's, less those we withdrew
        that the feed has not yet shown deleted."""
        with self._lock:
            gone = {key for key, (_, record) in self._written.items() if record is None}
        return set(self._informer.keys()) - gone

    def pending(self) -> int:
        """How many of our writes' answers the feed has not caught up with yet."""
        with self._lock:
            return len(self._written)

    def _cached(self, key: str) -> InternalServiceExport | None:
        raw = self._informer.get(key)
        return self._parse(key, raw) if raw is not None else None

    @staticmethod
    def _parse(key: str, raw: dict[str, Any]) -> InternalServiceExport | None:
        try:
            return InternalServiceExport.model_validate(raw)
        except ValidationError as exc:
            logger.error("hub record %s does not parse, ignoring it: %s", key, exc)
            return None
