"""An in-process stand-in for the hub's REST API, for the CLI's command tests.

It answers over an `httpx.MockTransport`, so the CLI's real `HubClient` runs unchanged —
URLs, query parameters, paging, bodies, status codes — without a server process. It
follows docs/reference.md#rest-api for the routes the tests use, and records every request so a test
can assert what was asked (and that no token leaks into what is printed).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

import httpx

from shared.models import EndpointSliceExport, MemberCluster, ServiceImport, to_wire
from tests.cli.samples import NOW, cluster

PREFIX = "/api/v1"


def status(code: int, reason: str, message: str) -> httpx.Response:
    return httpx.Response(code, json={"apiVersion": "v1", "kind": "Status", "status": "Failure",
                                      "code": code, "reason": reason, "message": message})


@dataclass
class FakeHub:
    clusters: dict[str, MemberCluster] = field(default_factory=dict)
    slices: list[EndpointSliceExport] = field(default_factory=list)
    imports: list[ServiceImport] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)
    issued_tokens: list[str] = field(default_factory=list)
    revision: int = 42
    # Lines of the export feed's first watch; the next watch request ends the test's
    # command as Ctrl-C would.
    watch_lines: list[dict[str, Any]] = field(default_factory=list)
    watches: int = 0
    # The import feed's first watch (None: a hub without that feed, which answers a list);
    # the next watch request ends the command as Ctrl-C would.
    import_lines: list[dict[str, Any]] | None = None
    import_watches: int = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path.removeprefix(PREFIX)
        parts = [p for p in path.split("/") if p]
        method = request.method
        if parts == ["version"]:
            return httpx.Response(200, json={"hubVersion": "9.8.7", "apiVersion":
                                             "mcsync.io/v1alpha1", "minAgentVersion": "0.1.0"})
        if parts == ["serviceexports"] and method == "GET":
            return self._exports(request)
        if parts == ["endpointslices"] and method == "GET":
            return self._slices(request)
        if parts == ["serviceimports"] and method == "GET":
            return httpx.Response(200, json={
                "apiVersion": "mcsync.io/v1alpha1", "kind": "ServiceImportList",
                "metadata": {"resourceVersion": str(self.revision)},
                "items": [to_wire(i) for i in self.imports]})
        if parts == ["clusters"] and method == "POST":
            return self._register(json.loads(request.content))
        if parts == ["clusters"] and method == "GET":
            return httpx.Response(200, json={"kind": "MemberClusterList", "items": [
                to_wire(c) for c in self.clusters.values()]})
        if len(parts) == 3 and parts[0] == "clusters" and parts[2] == "imports":
            return self._imports(request)
        if len(parts) == 5 and parts[0] == "clusters" and parts[2] == "endpointslices":
            return self._one_slice(*parts[1:2], *parts[3:])
        if len(parts) == 2 and parts[0] == "clusters":
            found = self.clusters.get(parts[1])
            if found is None:
                return status(404, "NotFound", f"cluster {parts[1]!r} is not registered")
            if method == "DELETE":
                del self.clusters[parts[1]]
            return httpx.Response(200, json=to_wire(found))
        return status(404, "NotFound", f"no route {method} {path}")

    def _exports(self, request: httpx.Request) -> httpx.Response:
        if request.url.params.get("watch") != "true":
            return httpx.Response(200, json={
                "kind": "InternalServiceExportList",
                "metadata": {"resourceVersion": str(self.revision)}, "items": []})
        self.watches += 1
        if self.watches > 1:
            raise KeyboardInterrupt
        body = "".join(json.dumps(line) + "\n" for line in self.watch_lines)
        return httpx.Response(200, content=body.encode(),
                              headers={"Content-Type": "application/x-ndjson"})

    def _imports(self, request: httpx.Request) -> httpx.Response:
        if self.import_lines is None or request.url.params.get("watch") != "true":
            return httpx.Response(200, json={"kind": "ClusterImportList", "items": [],
                                             "metadata": {"resourceVersion": "1"}})
        self.import_watches += 1
        if self.import_watches > 1:
            raise KeyboardInterrupt
        body = "".join(json.dumps(line) + "\n" for line in self.import_lines)
        return httpx.Response(200, content=body.encode(),
                              headers={"Content-Type": "application/x-ndjson"})

    def _one_slice(self, cluster_id: str, namespace: str, name: str) -> httpx.Response:
        for item in self.slices:
            if (item.spec.cluster_id, item.metadata.namespace, item.metadata.name) == (
                cluster_id, namespace, name
            ):
                return httpx.Response(200, json=to_wire(item))
        return status(404, "NotFound", f"EndpointSliceExport {namespace}/{name} not found")

    def _slices(self, request: httpx.Request) -> httpx.Response:
        query = request.url.params
        chosen = [
            s for s in self.slices
            if query.get("namespace") in (None, s.metadata.namespace)
            and query.get("name") in (None, s.spec.service_name)
            and query.get("cluster") in (None, s.spec.cluster_id)
        ]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or len(chosen) or 1)
        page = chosen[start:start + limit]
        more = start + limit < len(chosen)
        return httpx.Response(200, json={
            "apiVersion": "mcsync.io/v1alpha1", "kind": "EndpointSliceExportList",
            "metadata": {"resourceVersion": str(self.revision),
                         "continue": str(start + limit) if more else None},
            "items": [to_wire(s) for s in page],
        })

    def _register(self, body: dict[str, Any]) -> httpx.Response:
        meta = body["metadata"]
        name = meta["name"]
        if name in self.clusters:
            return status(409, "AlreadyExists", f"cluster {name!r} is already registered")
        registered = cluster(name, state="Pending", labels=meta.get("labels"), created=NOW,
                             agent_version=None)
        self.clusters[name] = registered
        token = secrets.token_urlsafe(24)
        self.issued_tokens.append(token)
        return httpx.Response(201, json={**to_wire(registered), "token": token})
