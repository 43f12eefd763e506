"""Discovery documents (`/version`, `/api`, `/api/v1`, `/apis`, `/apis/{g}`, `/apis/{g}/{v}`).

The agent finds out which MCS versions a cluster serves by discovery
(docs/reference.md#export-path), so the group list must name exactly the configured versions,
preferred first. Every resource with a status subresource also lists `{plural}/status`, as a real
apiserver does, and each resource names its short names and categories (`kubectl get all` uses
them).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from sandbox.emulator.resources import ResourceCatalog, ResourceType

KUBE_VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-mcsync-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def version() -> dict[str, Any]:
    return dict(KUBE_VERSION)


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _storage_hash(rt: ResourceType) -> str:
    digest = hashlib.sha256(f"{rt.group}/{rt.storage_key}".encode()).digest()[:8]
    return base64.b64encode(digest).decode()


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = [{
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
        **({"shortNames": list(rt.short_names)} if rt.short_names else {}),
        **({"categories": list(rt.categories)} if rt.categories else {}),
        **({"storageVersionHash": _storage_hash(rt)} if rt.custom else {}),
    }]
    if rt.has_status:
        entries.append({
            "name": f"{rt.plural}/status",
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": ["get", "patch", "update"],
        })
    return entries


def resource_list(catalog: ResourceCatalog, group: str, version: str) -> dict[str, Any] | None:
    types = catalog.in_group_version(group, version)
    if not types:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [e for rt in types for e in _resource_entries(rt)],
    }


def api_group(catalog: ResourceCatalog, group: str) -> dict[str, Any] | None:
    versions = catalog.groups().get(group)
    if not versions:
        return None
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": gvs,
            "preferredVersion": gvs[0]}


def api_group_list(catalog: ResourceCatalog) -> dict[str, Any]:
    groups = [api_group(catalog, g) for g in catalog.groups()]
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [{k: v for k, v in g.items() if k not in ("kind", "apiVersion")}
                   for g in groups if g is not None],
    }
