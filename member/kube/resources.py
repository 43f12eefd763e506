"""The agent's writes to ServiceExports, and where EndpointSlices live: nothing else.

docs/reference.md#export-path lists everything the agent may write in a member cluster:
ServiceExport status (the status subresource), its finalizer on ServiceExport metadata, Events and
its Lease. This module holds the ServiceExport part, and deliberately has no way to write a Service.

Every write carries the resourceVersion it was computed from, so a write based on a stale
read fails with `StaleObject` (409) instead of overwriting someone else's change; the caller
re-reads (its work queue retries the key) and decides again.

EndpointSlices (`discovery.k8s.io/v1`) are only read on the source side
(docs/reference.md#import-path): the agent watches the slices Kubernetes' EndpointSlice controller
writes for a Service, and never those it manages itself for imports. `EXPORTED_SLICES_SELECTOR` says
exactly that to the API server, so the informer's one watch over all slices carries nothing else.
`EXPORTABLE_SERVICES_SELECTOR` does the same for Services: the derived Services the agent
makes for imports are never exported (re-exporting an import would echo it back to the
fleet), so the export side neither caches them nor reconciles their every event — with
10,000 imports, 10,000 Services it would hold for nothing.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from member.kube.client import ApiException, request_json
from shared.constants import (
    ENDPOINTSLICE_MANAGER,
    LABEL_ENDPOINTSLICE_MANAGED_BY,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    MANAGED_BY_MCSYNC,
    MCS_GROUP,
    MCS_SERVICEEXPORT_PLURAL,
)

__all__ = [
    "ENDPOINTSLICE_API_VERSION",
    "ENDPOINTSLICE_KIND",
    "EXPORTABLE_SERVICES_SELECTOR",
    "EXPORTED_SLICES_SELECTOR",
    "NotFoundError",
    "ServiceExportClient",
    "StaleObject",
    "endpointslices_path",
]

ENDPOINTSLICE_API_VERSION = "discovery.k8s.io/v1"
ENDPOINTSLICE_KIND = "EndpointSlice"
ENDPOINTSLICE_PLURAL = "endpointslices"
# A Service's own slices: they name their Service, and are not the agent's imports.
EXPORTED_SLICES_SELECTOR = (
    f"{LABEL_SERVICE_NAME},{LABEL_ENDPOINTSLICE_MANAGED_BY}!={ENDPOINTSLICE_MANAGER}"
)
# Services a user may export: all but the derived Services of imports
# (docs/reference.md#export-path, #import-path).
EXPORTABLE_SERVICES_SELECTOR = f"{LABEL_MANAGED_BY}!={MANAGED_BY_MCSYNC}"


def endpointslices_path(namespace: str | None) -> str:
    """The collection path of EndpointSlices in `namespace` (None: all namespaces)."""
    base = f"/apis/{ENDPOINTSLICE_API_VERSION}"
    if namespace:
        return f"{base}/namespaces/{namespace}/{ENDPOINTSLICE_PLURAL}"
    return f"{base}/{ENDPOINTSLICE_PLURAL}"


MERGE_PATCH = "application/merge-patch+json"


class StaleObject(Exception):
    """409 Conflict: the object changed since it was read (resourceVersion precondition)."""


class NotFoundError(Exception):
    """404: the object does not exist (any more)."""


class ServiceExportClient:
    """Read ServiceExports and write their status and agent-owned metadata."""

    def __init__(self, api: k8s.ApiClient, *, version: str) -> None:
        self._api = api
        self.version = version
        self._base = f"/apis/{MCS_GROUP}/{version}"

    def _path(self, namespace: str, name: str) -> str:
        return f"{self._base}/namespaces/{namespace}/{MCS_SERVICEEXPORT_PLURAL}/{name}"

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The ServiceExport as the API server has it now; None when it does not exist."""
        try:
            obj: dict[str, Any] = request_json(self._api, "GET", self._path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT `obj` to the status subresource; only its `status` is taken by the server.

        `obj` must carry the `metadata.resourceVersion` it was read at: StaleObject on 409,
        NotFoundError on 404. Answers the stored object (with its new resourceVersion).
        """
        metadata = obj.get("metadata") or {}
        if not metadata.get("resourceVersion"):
            raise ValueError("replace_status needs metadata.resourceVersion (a precondition)")
        path = self._path(metadata["namespace"], metadata["name"]) + "/status"
        return self._write("PUT", path, obj)

    def patch_metadata(
        self,
        namespace: str,
        name: str,
        *,
        resource_version: str,
        finalizers: list[str] | None = None,
        annotations: dict[str, str | None] | None = None,
    ) -> dict[str, Any]:
        """JSON merge patch of `finalizers` (whole list) and/or `annotations` (None deletes one).

        Carries `resource_version` as a precondition: StaleObject on 409 (a merge patch
        replaces the finalizer list whole, so without it a finalizer added by someone else
        since our read would be lost). NotFoundError on 404.
        """
        metadata: dict[str, Any] = {"resourceVersion": resource_version}
        if finalizers is not None:
            metadata["finalizers"] = finalizers
        if annotations is not None:
            metadata["annotations"] = annotations
        return self._write(
            "PATCH", self._path(namespace, name), {"metadata": metadata}, MERGE_PATCH
        )

    def _write(
        self,
        method: str,
        path: str,
        body: dict[str, Any],
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = request_json(
                self._api, method, path, body=body, content_type=content_type
            )
        except ApiException as exc:
            if exc.status == 409:
                raise StaleObject(f"{path}: {exc.reason}") from None
            if exc.status == 404:
                raise NotFoundError(path) from None
            raise
        return answer
