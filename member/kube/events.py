"""Kubernetes Events on the objects the agent decides about (docs/reference.md#export-path),
client-go style.

An Event is how an application team learns, with `kubectl describe serviceexport`, what the
agent decided. Like client-go's recorder, a repeat of the same (object, type, reason,
message) bumps `count` and `lastTimestamp` of the Event already written instead of adding a
new one, so a key retried many times does not flood the namespace.

Recording never fails the caller: an Event is a courtesy, and a reconcile must not be retried
(and re-exported) because the Events API had a bad moment. Failures are logged.

Recording never *waits* either, again like client-go (whose broadcaster sends from its own
goroutine): `record()` puts the Event on a bounded queue that one sender thread per recorder
works through, in order. The reconciler records after the status write it reports, so a
synchronous POST held a worker for one more API round trip and delayed everything after it
in the reconcile — the hub's dedupe PATCH and the export-duration data point
(docs/reference.md#export-path). A full queue (the API server is down or crawling) drops the Event
with a warning rather than block a worker; `flush()` waits for what is queued (tests, shutdown).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s

from member.kube.client import ApiException, request_json

__all__ = ["EventRecorder"]

logger = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
# Remembered Events for count bumps; the oldest are forgotten first (their next repeat then
# creates a fresh Event, as client-go's LRU does).
_CACHE_SIZE = 4096
# Events waiting for the sender thread; beyond this they are dropped (client-go's broadcaster
# queue is 1000 long too).
_QUEUE_SIZE = 1000

_Pending = tuple[dict[str, Any], str, str, str]  # (object, type, reason, message)


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Writes core/v1 Events about objects, folding repeats into a count."""

    def __init__(
        self,
        *,
        api: k8s.ApiClient,
        component: str = "mcsync-agent",
        host: str,
        queue_size: int = _QUEUE_SIZE,
    ) -> None:
        self._api = api
        self._component = component
        self._host = host
        self._lock = threading.Lock()
        # (namespace, uid or name, type, reason, message) -> (event name, count)
        self._seen: OrderedDict[tuple[str, str, str, str, str], tuple[str, int]] = OrderedDict()
        self._pending: queue.Queue[_Pending] = queue.Queue(maxsize=queue_size)
        self._sender: threading.Thread | None = None

    def record(self, obj: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        """Queue an Event of `type` ("Normal"/"Warning") about `obj`; never raises or waits.

        The sender thread writes it (or bumps the count of the same Event written before).
        """
        try:
            self._pending.put_nowait((obj, type, reason, message))
        except queue.Full:
            metadata = obj.get("metadata") or {}
            logger.warning(
                "dropped event %s on %s/%s: %d events are waiting to be written",
                reason,
                metadata.get("namespace"),
                metadata.get("name"),
                self._pending.maxsize,
            )
            return
        with self._lock:
            if self._sender is None:
                # Started on first use: a recorder that never records costs no thread.
                self._sender = threading.Thread(
                    target=self._send_forever, name="event-recorder", daemon=True
                )
                self._sender.start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued Event was written (or failed); False if `timeout` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        done = self._pending.all_tasks_done  # Queue.join()'s condition; join() has no timeout
        with done:
            while self._pending.unfinished_tasks:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                done.wait(remaining)
        return True

    def _send_forever(self) -> None:
        while True:
            obj, type_, reason, message = self._pending.get()
            try:
                self._send(obj, type=type_, reason=reason, message=message)
            finally:
                self._pending.task_done()

    def _send(self, obj: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        """Write (or bump) one Event; failures are logged, never raised."""
        try:
            self._record(obj, type=type, reason=reason, message=message)
        except Exception as exc:
            metadata = obj.get("metadata") or {}
            logger.warning(
                "could not record event %s on %s/%s: %s",
                reason,
                metadata.get("namespace"),
                metadata.get("name"),
                exc,
            )

    def _record(self, obj: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        metadata = obj.get("metadata") or {}
        namespace = metadata.get("namespace") or "default"
        name = metadata.get("name", "")
        cache_key = (namespace, metadata.get("uid") or name, type, reason, message)
        with self._lock:
            seen = self._seen.get(cache_key)
            if seen is not None:
                self._seen.move_to_end(cache_key)
        now = _timestamp()
        if seen is not None:
            event_name, count = seen
            try:
                request_json(
                    self._api,
                    "PATCH",
                    f"/api/v1/namespaces/{namespace}/events/{event_name}",
                    body={"count": count + 1, "lastTimestamp": now},
                    content_type=MERGE_PATCH,
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                # The Event expired (the API server's event TTL): write a fresh one below.
            else:
                self._remember(cache_key, event_name, count + 1)
                return
        event_name = f"{name}.{time.time_ns():x}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name, "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": name,
                "namespace": namespace,
                "uid": metadata.get("uid"),
                "resourceVersion": metadata.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": self._component, "host": self._host},
            "reportingComponent": self._component,
            "reportingInstance": self._host,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        request_json(self._api, "POST", f"/api/v1/namespaces/{namespace}/events", body=body)
        self._remember(cache_key, event_name, 1)

    def _remember(
        self, cache_key: tuple[str, str, str, str, str], event_name: str, count: int
    ) -> None:
        with self._lock:
            self._seen[cache_key] = (event_name, count)
            self._seen.move_to_end(cache_key)
            while len(self._seen) > _CACHE_SIZE:
                self._seen.popitem(last=False)
