"""A minimal OpenAPI v3 (`/openapi/v3`, `/openapi/v3/{api|apis/g}/{v}`) that kubectl accepts.

kubectl reads OpenAPI v3 for two things operators use every day: to learn that the server
validates fields itself (a PATCH operation of the kind with a `fieldValidation` query
parameter; then `kubectl create -f`/`apply` send `fieldValidation=Strict` instead of
downloading schemas to validate on the client), and for `kubectl explain`. So each
group-version document has, per served resource, its collection and item paths with the
operations and that parameter, each tagged `x-kubernetes-group-version-kind`, and one open
schema per kind with a description. The emulator accepts `fieldValidation` and ignores it.
OpenAPI v2 is protobuf for kubectl and is not served (404, as kubectl tolerates).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sandbox.emulator.resources import ResourceCatalog, ResourceType

FIELD_VALIDATION = {
    "name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True},
    "description": "fieldValidation instructs the server on how to handle objects in the "
                   "request containing unknown or duplicate fields (Ignore, Warn, Strict).",
}


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def group_versions(catalog: ResourceCatalog) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for rt in catalog.types:
        for version in rt.versions:
            seen[(rt.group, version)] = None
    return list(seen)


def _schema_name(rt: ResourceType, version: str) -> str:
    group = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{group}.{version}.{rt.kind}"


def _gvk(rt: ResourceType, version: str) -> dict[str, str]:
    return {"group": rt.group, "version": version, "kind": rt.kind}


def _operation(rt: ResourceType, version: str, action: str, *,
               validating: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": f"{action}{rt.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rt, version),
        "responses": {"200": {"description": "OK", "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{_schema_name(rt, version)}"}}}}},
    }
    if validating:
        op["parameters"] = [FIELD_VALIDATION]
    return op


def _paths(rt: ResourceType, version: str) -> dict[str, Any]:
    base = f"/{_gv_path(rt.group, version)}"
    scope = f"{base}/namespaces/{{namespace}}" if rt.namespaced else base
    collection = f"{scope}/{rt.plural}"
    item = f"{collection}/{{name}}"
    # Write operations are listed for read-only resources (CRDs) too: without a validating
    # PATCH kubectl falls back to OpenAPI v2 and stops at its 404 with "failed to download
    # openapi"; with it, `kubectl apply` reaches the server and prints its 405, which says
    # why the write is refused.
    return {
        collection: {"get": _operation(rt, version, "list"),
                     "post": _operation(rt, version, "post", validating=True)},
        item: {"get": _operation(rt, version, "get"),
               "put": _operation(rt, version, "put", validating=True),
               "patch": _operation(rt, version, "patch", validating=True),
               "delete": _operation(rt, version, "delete")},
    }


def _schema(rt: ResourceType, version: str) -> dict[str, Any]:
    return {
        "description": f"{rt.kind} ({rt.api_version(version)}), served by the mcsync "
                       "Kubernetes API emulator.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion defines the "
                           "versioned schema of this representation of an object."},
            "kind": {"type": "string", "description": "Kind is a string value representing "
                     "the REST resource this object represents."},
            "metadata": {"type": "object", "description": "Standard object's metadata.",
                         "x-kubernetes-preserve-unknown-fields": True},
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "x-kubernetes-group-version-kind": [_gvk(rt, version)],
    }


def group_version_document(catalog: ResourceCatalog, group: str,
                           version: str) -> dict[str, Any] | None:
    types = catalog.in_group_version(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rt in types:
        paths.update(_paths(rt, version))
        schemas[_schema_name(rt, version)] = _schema(rt, version)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def root(catalog: ResourceCatalog) -> dict[str, Any]:
    """`/openapi/v3`: one entry per group-version, its URL carrying a content hash."""
    out: dict[str, Any] = {}
    for group, version in group_versions(catalog):
        doc = group_version_document(catalog, group, version)
        digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]
        path = _gv_path(group, version)
        out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest.upper()}"}
    return {"paths": out}
