"""ListWatch adapters over the Kubernetes API for the generic informer (`member.informer`).

They answer plain JSON dicts — a Service and a ServiceExport look alike — and follow the API's
list/watch protocol: paged lists (`limit` + `continue`), watches with
`allowWatchBookmarks`, `410 Gone` as `ResourceExpired`.

A watch answers a `WatchStream`, which the informer can `interrupt()` from another thread
(it shuts the socket down), so stopping the agent never waits for a quiet watch to time out.

Several namespaces: run one informer per namespace (each adapter takes one `namespace`, None
meaning all). Keys are "namespace/name", so the informers can share one handler and queue.
"""

from __future__ import annotations

import builtins
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import urllib3
from kubernetes import client as k8s

from member.informer import ItemTransform, ResourceExpired
from member.kube.client import ApiException, request, request_json
from member.kube.resources import (
    ENDPOINTSLICE_API_VERSION,
    ENDPOINTSLICE_KIND,
    EXPORTABLE_SERVICES_SELECTOR,
    EXPORTED_SLICES_SELECTOR,
    endpointslices_path,
)
from shared.constants import MCS_GROUP, MCS_SERVICEEXPORT_KIND, MCS_SERVICEEXPORT_PLURAL

__all__ = [
    "EndpointSliceListWatch",
    "KubeListWatch",
    "ServiceExportListWatch",
    "ServiceListWatch",
    "WatchStream",
]

logger = logging.getLogger(__name__)

LIST_PAGE_SIZE = 500
# A watch's socket read gives up this long after the server's own timeout: a silently dead
# connection (no FIN) then turns into a resumed watch instead of a hung informer.
_READ_GRACE_SECONDS = 30.0
_CONNECT_TIMEOUT_SECONDS = 10.0


class WatchStream:
    """Iterator over one watch answer's newline-delimited JSON events; interruptible."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response
        self._chunks = response.stream(amt=None, decode_content=True)
        self._buffer = b""
        self._finished = False
        self._interrupted = threading.Event()
        # Guards shutdown-vs-close: interrupt() must never shut down a socket that close()
        # already handed back to the connection pool (it may carry another request by then).
        self._lock = threading.Lock()
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
                if line.strip():
                    event: dict[str, Any] = json.loads(line)
                    return event
                continue
            if self._finished or self._interrupted.is_set():
                self._close()
                raise StopIteration
            try:
                chunk = next(self._chunks, b"")
            except Exception:
                if self._interrupted.is_set():
                    # The read failed because interrupt() shut the socket: a clean end.
                    self._close()
                    raise StopIteration from None
                self._close()
                raise
            if not chunk:
                self._finished = True
                if self._buffer.strip():  # a last event without its newline
                    line, self._buffer = self._buffer, b""
                    last: dict[str, Any] = json.loads(line)
                    return last
                continue
            self._buffer += chunk

    def interrupt(self) -> None:
        """End the iteration from another thread, even while it waits for data."""
        self._interrupted.set()
        with self._lock:
            if self._closed:
                return
            try:
                # shutdown(), unlike close(), wakes a recv() blocked in another thread.
                self._response.shutdown()  # type: ignore[attr-defined]
            except Exception:
                logger.debug("shutting down a watch stream failed", exc_info=True)

    def close(self) -> None:
        """Release the connection (the consumer stopped early); idempotent."""
        self._close()

    def _close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                # Close before releasing: a stream cut mid-event must not go back to the pool
                # with unread bytes; a closed connection is simply reopened on its next use.
                self._response.close()
            except Exception:
                logger.debug("closing a watch stream failed", exc_info=True)
            finally:
                self._response.release_conn()


class KubeListWatch:
    """List and watch one collection path of the Kubernetes API (`/api/v1/services`, …)."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        path: str,
        api_version: str,
        kind: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        self._api = api
        self._path = path
        self._api_version = api_version
        self._kind = kind
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._page_size = page_size

    def _selectors(self) -> dict[str, str]:
        query: dict[str, str] = {}
        if self._label_selector:
            query["labelSelector"] = self._label_selector
        if self._field_selector:
            query["fieldSelector"] = self._field_selector
        return query

    def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
        """All objects, page by page, with the list's resourceVersion.

        `transform` is applied to each item as its page arrives, so only one page of raw
        objects is alive at a time (the informer's cache transform; see `member.informer`).
        """
        while True:
            try:
                return self._list_pages(transform)
            except ApiException as exc:
                # A `continue` token outlived the server's snapshot: start again from page one
                # (mixing pages of two snapshots would be an inconsistent list).
                if exc.status != 410:
                    raise
                logger.info("%s: list continuation expired, listing again", self._path)

    def _list_pages(
        self, transform: ItemTransform | None
    ) -> tuple[builtins.list[dict[str, Any]], str]:
        items: builtins.list[dict[str, Any]] = []
        continue_token = ""
        while True:
            query = self._selectors()
            query["limit"] = str(self._page_size)
            if continue_token:
                query["continue"] = continue_token
            page = request_json(self._api, "GET", self._path, query=query)
            for item in page.get("items") or []:
                # List items omit apiVersion/kind; watch events carry them. Fill them in so
                # both look alike (Events need them for involvedObject).
                item.setdefault("apiVersion", self._api_version)
                item.setdefault("kind", self._kind)
                items.append(transform(item) if transform is not None else item)
            metadata = page.get("metadata") or {}
            # Free the raw page before the next one is read, not when `page` is rebound.
            del page
            continue_token = metadata.get("continue") or ""
            if not continue_token:
                return items, str(metadata.get("resourceVersion") or "")

    def watch(self, *, resource_version: str, timeout_seconds: int) -> WatchStream:
        """Changes after `resource_version`; raises `ResourceExpired` on 410 Gone."""
        query = self._selectors()
        query.update(
            {
                "watch": "true",
                "allowWatchBookmarks": "true",
                "resourceVersion": resource_version,
                "timeoutSeconds": str(timeout_seconds),
            }
        )
        try:
            response = request(
                self._api,
                "GET",
                self._path,
                query=query,
                timeout=(_CONNECT_TIMEOUT_SECONDS, timeout_seconds + _READ_GRACE_SECONDS),
            )
        except ApiException as exc:
            if exc.status == 410:
                raise ResourceExpired(f"{self._path} at {resource_version}: 410 Gone") from None
            raise
        return WatchStream(response)


class ServiceListWatch(KubeListWatch):
    """core/v1 Services in `namespace` (None: all namespaces), by default only those the
    agent may export: not the derived Services it makes for imports."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        namespace: str | None,
        label_selector: str | None = EXPORTABLE_SERVICES_SELECTOR,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        path = f"/api/v1/namespaces/{namespace}/services" if namespace else "/api/v1/services"
        super().__init__(
            api,
            path=path,
            api_version="v1",
            kind="Service",
            label_selector=label_selector,
            page_size=page_size,
        )


class ServiceExportListWatch(KubeListWatch):
    """MCS ServiceExports of API `version` in `namespace` (None: all namespaces)."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        version: str,
        namespace: str | None,
        label_selector: str | None = None,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        base = f"/apis/{MCS_GROUP}/{version}"
        path = (
            f"{base}/namespaces/{namespace}/{MCS_SERVICEEXPORT_PLURAL}"
            if namespace
            else f"{base}/{MCS_SERVICEEXPORT_PLURAL}"
        )
        super().__init__(
            api,
            path=path,
            api_version=f"{MCS_GROUP}/{version}",
            kind=MCS_SERVICEEXPORT_KIND,
            label_selector=label_selector,
            page_size=page_size,
        )


class EndpointSliceListWatch(KubeListWatch):
    """discovery.k8s.io/v1 EndpointSlices of Services in `namespace` (None: all), by default
    only those the agent may export: named for a Service and not managed by mcsync."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        namespace: str | None,
        label_selector: str | None = EXPORTED_SLICES_SELECTOR,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        super().__init__(
            api,
            path=endpointslices_path(namespace),
            api_version=ENDPOINTSLICE_API_VERSION,
            kind=ENDPOINTSLICE_KIND,
            label_selector=label_selector,
            page_size=page_size,
        )
