"""Reads and writes of the objects the agent owns for imports (docs/reference.md#export-path,
#import-path).

The agent writes ServiceImports, derived Services and EndpointSlices, and only those it
made (label `app.kubernetes.io/managed-by: mcsync`): the reconcilers check that label on the
cached object before every update or delete, and this module gives them the verbs with the
answers mapped to what a reconciler acts on:

* `AlreadyExists` — a create met an object of that name (ours, not yet in the cache, or
  someone else's: the caller decides);
* `StaleObject` — an update carried a resourceVersion that is no longer current (409): the
  work queue retries the key against a fresher cache;
* `NotFoundError` — gone already; a delete treats that as done.

Every update is a PUT of the whole object with the resourceVersion it was computed from, so
a write based on a stale read never overwrites someone else's change. Deletes carry the
uid as a precondition: a same-named object created since our read is not deleted.

Paths for the informers (`collection_path`) live here too, so the reconcilers and the
informers name each resource once.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import urllib3
from kubernetes import client as k8s

from member.kube.client import ApiException, request_json
from member.kube.resources import NotFoundError, StaleObject, endpointslices_path
from shared.constants import LABEL_MANAGED_BY, MANAGED_BY_MCSYNC, MCS_GROUP

__all__ = [
    "MANAGED_SELECTOR",
    "SERVICEIMPORT_PLURAL",
    "AlreadyExists",
    "ImportObjectClient",
    "ObjectWriter",
    "namespaces_path",
    "served_import_fields",
    "serviceimports_path",
    "services_path",
]

logger = logging.getLogger(__name__)

SERVICEIMPORT_PLURAL = "serviceimports"
SERVICEIMPORT_CRD = (
    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{SERVICEIMPORT_PLURAL}.{MCS_GROUP}"
)
# What the managed-object informers watch: only the objects the agent made.
MANAGED_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY_MCSYNC}"


class AlreadyExists(Exception):
    """409 on create: an object of that name exists."""


class ObjectWriter(Protocol):
    """What the import reconcilers write through (`ImportObjectClient`, or a wrapper)."""

    version: str

    def create(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def replace(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def replace_status(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def delete(self, namespace: str, name: str, *, uid: str | None) -> None: ...


def serviceimports_path(version: str, namespace: str | None) -> str:
    base = f"/apis/{MCS_GROUP}/{version}"
    if namespace:
        return f"{base}/namespaces/{namespace}/{SERVICEIMPORT_PLURAL}"
    return f"{base}/{SERVICEIMPORT_PLURAL}"


def services_path(namespace: str | None) -> str:
    return f"/api/v1/namespaces/{namespace}/services" if namespace else "/api/v1/services"


def namespaces_path() -> str:
    return "/api/v1/namespaces"


def served_import_fields(
    api: k8s.ApiClient, version: str, optional: frozenset[str]
) -> frozenset[str]:
    """Which of the `optional` ServiceImport spec fields the cluster's CRD has at `version`.

    An older CRD lacks some (the upstream v1alpha1 gained the traffic policies late), and
    the API server prunes a field its schema lacks: stating it would make every reconcile
    see a difference and write again. Answers `optional` whole when the CRD cannot be read
    (no RBAC for CRDs, or no schema): then the served version is taken to have them all.
    """
    try:
        crd = request_json(api, "GET", SERVICEIMPORT_CRD) or {}
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        logger.info("ServiceImport CRD not readable (%s); assuming every spec field", exc)
        return optional
    for served in (crd.get("spec") or {}).get("versions") or []:
        if served.get("name") != version:
            continue
        schema = (served.get("schema") or {}).get("openAPIV3Schema") or {}
        spec = ((schema.get("properties") or {}).get("spec") or {}).get("properties") or {}
        if spec:
            return optional & frozenset(spec)
    return optional


class ImportObjectClient:
    """Create, replace (whole object or status) and delete of one resource kind."""

    def __init__(self, api: k8s.ApiClient, *, kind: str, version: str = "v1beta1") -> None:
        """`kind`: "ServiceImport" (of MCS API `version`), "Service" or "EndpointSlice"."""
        self._api = api
        self.kind = kind
        self.version = version
        if kind == "ServiceImport":
            self._collection = lambda ns: serviceimports_path(version, ns)
        elif kind == "Service":
            self._collection = services_path
        elif kind == "EndpointSlice":
            self._collection = endpointslices_path
        else:
            raise ValueError(f"not an import object kind: {kind!r}")

    def path(self, namespace: str, name: str) -> str:
        return f"{self._collection(namespace)}/{name}"

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create `body`; `AlreadyExists` when its name is taken."""
        namespace = body["metadata"]["namespace"]
        try:
            return self._request("POST", self._collection(namespace), body)
        except StaleObject as exc:
            raise AlreadyExists(str(exc)) from None

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        """PUT `body`, which must carry the resourceVersion it was read at."""
        metadata = body["metadata"]
        if not metadata.get("resourceVersion"):
            raise ValueError("replace needs metadata.resourceVersion (a precondition)")
        return self._request("PUT", self.path(metadata["namespace"], metadata["name"]), body)

    def replace_status(self, body: dict[str, Any]) -> dict[str, Any]:
        """PUT `body` to the status subresource (its resourceVersion a precondition)."""
        metadata = body["metadata"]
        if not metadata.get("resourceVersion"):
            raise ValueError("replace_status needs metadata.resourceVersion (a precondition)")
        path = self.path(metadata["namespace"], metadata["name"]) + "/status"
        return self._request("PUT", path, body)

    def delete(self, namespace: str, name: str, *, uid: str | None) -> None:
        """Delete one object (gone already counts as done); `uid` a precondition."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._request("DELETE", self.path(namespace, name), body)
        except NotFoundError:
            return

    def _request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = request_json(self._api, method, path, body=body) or {}
        except ApiException as exc:
            if exc.status == 409:
                raise StaleObject(f"{method} {path}: {exc.reason}") from None
            if exc.status == 404:
                raise NotFoundError(path) from None
            raise
        return answer
