"""The API's routers, one module per resource (docs/reference.md#rest-api); `ROUTERS` is what the
app mounts.

Routers sit apart from the machinery they use (`hub.api.deps`, `params`, `auth`, `status`,
`watch`): they depend on it and nothing depends on them, so the dependency graph of
`hub.api` stays a tree that `hub.app` assembles (tests/hub/test_api_imports.py keeps it so).
"""

from __future__ import annotations

from fastapi import APIRouter

from hub.api.routes import (
    clusternamespaces,
    clusterproperties,
    clusters,
    conflicts,
    docs,
    endpointslices,
    exports,
    health,
    imports,
    invalidexports,
    tokens,
    whoami,
)

ROUTERS: tuple[APIRouter, ...] = tuple(
    module.router
    for module in (
        clusters,
        clusterproperties,
        clusternamespaces,
        tokens,
        exports,
        conflicts,
        invalidexports,
        endpointslices,
        imports,
        health,
        whoami,
        docs,
    )
)
