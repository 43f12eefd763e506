"""The ASGI app: Kubernetes REST paths -> registry verbs, and `/emulator/…` test controls.

The test controls (pause, inject-conflict, compact, request counters …) exist for the
project's tests only: they are served when the app is built with `test_controls=True`;
otherwise `/emulator/…` is an unknown path like any other (404), so a cluster of
`mcsync sandbox` is the Kubernetes API and nothing a user could pause or corrupt by accident
(docs/reference.md#sandbox).

URL layout served (namespaced resources; `{base}` is `/api/v1` or `/apis/{group}/{version}`):
    GET  {base}/{plural}                                   list / watch, all namespaces
    GET  POST  {base}/namespaces/{ns}/{plural}             list / watch, create
    GET  PUT  PATCH  DELETE  {base}/namespaces/{ns}/{plural}/{name}
    GET  PUT  PATCH  {base}/namespaces/{ns}/{plural}/{name}/status
cluster-scoped ones (Namespaces, CRDs) at `{base}/{plural}[/{name}[/status]]`, plus
discovery and `/openapi/v3`. A verb the resource does not list is 405. GET, list and
watch answer a `meta.k8s.io` Table when the Accept header asks for one (`tables.py`).
Paths are parsed by hand rather than with one route per shape so every
unknown path or verb gets the Kubernetes `Status` a client expects (404 NotFound, 405
MethodNotAllowed), and so each request is counted once under its verb and resource.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sandbox.emulator import discovery, errors, openapi, protobuf, tables
from sandbox.emulator.errors import KubeError
from sandbox.emulator.resources import ResourceType
from sandbox.emulator.selectors import (
    allowed_fields,
    parse_field_selector,
    parse_label_selector,
)
from sandbox.emulator.state import EmulatorState, RequestRecord
from sandbox.emulator.store import Obj
from sandbox.emulator.watch import WatchRequest, stream_watch

TRUE = ("true", "1")


def _json(body: Any, code: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=code)


def _error(exc: KubeError) -> JSONResponse:
    return _json(exc.status(), exc.code)


class ResourceRequest:
    """A parsed resource URL: which resource, version, namespace, name and subresource."""

    def __init__(self, rt: ResourceType, version: str, namespace: str | None,
                 name: str | None, subresource: str | None) -> None:
        self.rt = rt
        self.version = version
        self.namespace = namespace
        self.name = name
        self.subresource = subresource

    @property
    def api_version(self) -> str:
        return self.rt.api_version(self.version)

    @property
    def counted_resource(self) -> str:
        return f"{self.rt.plural}/{self.subresource}" if self.subresource else self.rt.plural


class EmulatorApp:
    """Builds the Starlette app around one `EmulatorState`."""

    def __init__(self, state: EmulatorState, *, test_controls: bool = False) -> None:
        self.state = state
        controls = [Route("/emulator/{action:path}", self.control,
                          methods=["GET", "POST", "DELETE"])] if test_controls else []
        self.app = Starlette(routes=[
            *controls,
            Route("/{path:path}", self.dispatch,
                  methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ])

    # -- rendering -----------------------------------------------------------------------

    @staticmethod
    def render(rr: ResourceRequest, obj: Obj) -> Obj:
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return {"apiVersion": rr.api_version, "kind": rr.rt.kind, **body}

    # -- dispatch ------------------------------------------------------------------------

    async def dispatch(self, request: Request) -> Response:
        if self.state.paused:
            return _error(errors.service_unavailable())
        parts = [p for p in request.url.path.split("/") if p]
        try:
            doc = self._discovery(request, parts)
            if doc is not None:
                if request.method != "GET":
                    raise errors.method_not_allowed(request.method)
                _check_accept(request)
                return _json(doc)
            rr = self._parse(parts)  # an unknown path is 404 whatever it accepts (openapi/v2)
            _check_accept(request)
            return await self._serve(request, rr)
        except KubeError as exc:
            return _error(exc)

    def _discovery(self, request: Request, parts: list[str]) -> dict[str, Any] | None:
        catalog = self.state.catalog
        if parts[:2] == ["openapi", "v3"]:
            if len(parts) == 2:
                return openapi.root(catalog)
            gv = parts[2:]
            found = None
            if len(gv) == 2 and gv[0] == "api":
                found = openapi.group_version_document(catalog, "", gv[1])
            elif len(gv) == 3 and gv[0] == "apis":
                found = openapi.group_version_document(catalog, gv[1], gv[2])
            if found is None:
                raise errors.resource_not_found()
            return found
        if parts == ["version"]:
            return discovery.version()
        if parts == ["api"]:
            return discovery.api_versions(request.url.netloc)
        if parts == ["api", "v1"]:
            return discovery.resource_list(catalog, "", "v1")
        if parts == ["apis"]:
            return discovery.api_group_list(catalog)
        if len(parts) == 2 and parts[0] == "apis":
            doc = discovery.api_group(catalog, parts[1])
            if doc is None:
                raise errors.resource_not_found()
            return doc
        if len(parts) == 3 and parts[0] == "apis":
            doc = discovery.resource_list(catalog, parts[1], parts[2])
            if doc is None:
                raise errors.resource_not_found()
            return doc
        return None

    def _parse(self, parts: list[str]) -> ResourceRequest:
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) > 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise errors.resource_not_found()
        namespace: str | None = None
        # `namespaces/x/status` is the Namespace x's status, not a resource named "status".
        if len(rest) >= 3 and rest[0] == "namespaces" and not (
                len(rest) == 3 and rest[2] == "status"):
            namespace, rest = rest[1], rest[2:]
        if not 1 <= len(rest) <= 3:
            raise errors.resource_not_found()
        rt = self.state.catalog.lookup(group, version, rest[0])
        if rt is None:
            raise errors.resource_not_served(rest[0], group, version,
                                             [t.plural for t in self.state.catalog.types])
        if (rt.namespaced and namespace is None and len(rest) > 1) or (
                not rt.namespaced and namespace is not None):
            raise errors.resource_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and (sub != "status" or not rt.has_status):
            raise errors.resource_not_found()
        return ResourceRequest(rt, version, namespace, name, sub)

    async def _serve(self, request: Request, rr: ResourceRequest) -> Response:
        method = request.method
        q = request.query_params
        if rr.name is None:
            if method == "GET":
                verb = "watch" if q.get("watch", "").lower() in TRUE else "list"
            elif method == "POST" and (rr.namespace is not None or not rr.rt.namespaced):
                verb = "create"
            else:
                raise errors.method_not_allowed(method)
        else:
            verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
                method, "")
            if not verb or (rr.subresource and verb == "delete"):
                raise errors.method_not_allowed(method)
        if verb not in rr.rt.verbs:
            raise errors.read_only(method, rr.rt.group_resource, rr.rt.verbs,
                                   note=rr.rt.read_only_note)
        response: Response
        try:
            response = await getattr(self, f"_{verb}")(request, rr)
        except KubeError as exc:
            response = _error(exc)
        self.state.record(RequestRecord(verb, rr.counted_resource, rr.namespace, rr.name,
                                        response.status_code))
        return response

    # -- verbs ---------------------------------------------------------------------------

    async def _body(self, request: Request, rr: ResourceRequest, *, typed: bool) -> Any:
        content_type = request.headers.get("content-type", "")
        if "cbor" in content_type:
            # A 415 makes client-go resend a CBOR body as JSON.
            raise errors.unsupported_body(content_type)
        raw = await request.body()
        if not raw:
            raise errors.bad_request("the request body is empty")
        if "protobuf" in content_type:
            # kubectl's typed commands (`create namespace`) send protobuf and never resend.
            try:
                body: Any = protobuf.decode(raw)
            except protobuf.ProtobufError as exc:
                raise errors.unsupported_body(content_type, detail=str(exc)) from exc
        else:
            try:
                body = json.loads(raw)
            except ValueError as exc:
                raise errors.bad_request(
                    f"couldn't decode the request body as JSON: {exc}") from exc
        if typed and isinstance(body, dict):
            api_version, kind = body.get("apiVersion"), body.get("kind")
            if api_version and api_version != rr.api_version:
                raise errors.bad_request(
                    f"the API version in the data ({api_version}) does not match the expected "
                    f"API version ({rr.api_version})")
            if kind and kind != rr.rt.kind:
                raise errors.bad_request(
                    f"the kind in the data ({kind}) does not match the expected kind "
                    f"({rr.rt.kind})")
        return body

    def _name(self, rr: ResourceRequest) -> str:
        assert rr.name is not None
        return rr.name

    @staticmethod
    def _table_version(request: Request) -> str | None:
        return tables.wants_table(request.headers.get("accept", ""))

    @staticmethod
    def _table_response(body: dict[str, Any], version: str) -> Response:
        return JSONResponse(body, media_type=f"application/json;as=Table;v={version};"
                            "g=meta.k8s.io")

    async def _get(self, request: Request, rr: ResourceRequest) -> Response:
        obj = self.state.registry.get(rr.rt, rr.namespace, self._name(rr))
        table_version = self._table_version(request)
        if table_version and not rr.subresource:
            return self._table_response(tables.table(
                rr.rt, rr.api_version, [obj], table_version=table_version,
                list_meta={"resourceVersion": obj["metadata"]["resourceVersion"]},
                include_object=request.query_params.get("includeObject", "Metadata"),
            ), table_version)
        return _json(self.render(rr, obj))

    def _selectors(self, request: Request, rr: ResourceRequest) -> tuple[Any, Any]:
        q = request.query_params
        return (
            parse_label_selector(q.get("labelSelector")),
            parse_field_selector(q.get("fieldSelector"), allowed=allowed_fields(rr.rt.plural)),
        )

    async def _list(self, request: Request, rr: ResourceRequest) -> Response:
        labels, fields = self._selectors(request, rr)
        q = request.query_params
        limit = _int_param(q.get("limit"), "limit")
        page = self.state.registry.list(
            rr.rt, rr.namespace, labels=labels, fields=fields, limit=limit,
            continue_token=q.get("continue") or None,
        )
        meta: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            meta["continue"] = page.continue_token
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
        table_version = self._table_version(request)
        if table_version:
            return self._table_response(tables.table(
                rr.rt, rr.api_version, page.items, table_version=table_version,
                list_meta=meta, include_object=q.get("includeObject", "Metadata"),
            ), table_version)
        # Built-in lists omit apiVersion/kind on items; custom resource lists carry them.
        items = [self.render(rr, o) if rr.rt.custom else o for o in page.items]
        return _json({"apiVersion": rr.api_version, "kind": rr.rt.list_kind,
                      "metadata": meta, "items": items})

    async def _watch(self, request: Request, rr: ResourceRequest) -> Response:
        labels, fields = self._selectors(request, rr)
        q = request.query_params
        rv_text = q.get("resourceVersion") or ""
        since = _int_param(rv_text, "resourceVersion") if rv_text else None
        timeout = _int_param(q.get("timeoutSeconds"), "timeoutSeconds")
        req = WatchRequest(
            rt=rr.rt, api_version=rr.api_version, namespace=rr.namespace, labels=labels,
            fields=fields, since_rv=since or None,  # "0" means "any": start from current state
            timeout=float(timeout) if timeout else self.state.default_watch_timeout,
            bookmarks=q.get("allowWatchBookmarks", "").lower() in TRUE,
            bookmark_interval=self.state.bookmark_interval,
        )
        table_version = self._table_version(request)
        include = q.get("includeObject", "Metadata")

        def render(obj: Obj) -> Obj:
            if table_version:  # kubectl get -w: each event's object is a one-row Table
                return tables.table(rr.rt, rr.api_version, [obj], table_version=table_version,
                                    include_object=include)
            return self.render(rr, obj)

        return StreamingResponse(stream_watch(self.state.store, req, render),
                                 media_type="application/json")

    async def _create(self, request: Request, rr: ResourceRequest) -> Response:
        body = await self._body(request, rr, typed=True)
        obj = self.state.registry.create(rr.rt, rr.namespace, body)
        return _json(self.render(rr, obj), 201)

    async def _update(self, request: Request, rr: ResourceRequest) -> Response:
        body = await self._body(request, rr, typed=True)
        obj = self.state.registry.update(rr.rt, rr.namespace, self._name(rr), body,
                                         status=rr.subresource == "status")
        return _json(self.render(rr, obj))

    async def _patch(self, request: Request, rr: ResourceRequest) -> Response:
        content_type = request.headers.get("content-type", "")
        body = await self._body(request, rr, typed=False)
        obj = self.state.registry.patch(
            rr.rt, rr.namespace, self._name(rr), body, content_type,
            api_version=rr.api_version, status=rr.subresource == "status",
        )
        return _json(self.render(rr, obj))

    async def _delete(self, request: Request, rr: ResourceRequest) -> Response:
        raw = await request.body()
        options: Any = None
        if raw:
            try:
                options = json.loads(raw)
            except ValueError as exc:
                raise errors.bad_request(f"couldn't decode DeleteOptions: {exc}") from exc
        q = request.query_params
        if q.get("propagationPolicy") or q.get("orphanDependents"):
            # DeleteOptions may come as query parameters too (the body wins).
            options = {"propagationPolicy": q.get("propagationPolicy"),
                       "orphanDependents": q.get("orphanDependents", "").lower() in TRUE,
                       **(options if isinstance(options, dict) else {})}
        obj, deleted = self.state.registry.delete(rr.rt, rr.namespace, self._name(rr), options)
        if deleted and not rr.rt.returns_deleted_object:
            return _json({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": obj["metadata"]["name"], "group": rr.rt.group,
                            "kind": rr.rt.plural, "uid": obj["metadata"]["uid"]},
            })
        return _json(self.render(rr, obj))

    # -- test controls -------------------------------------------------------------------

    async def control(self, request: Request) -> Response:
        action = request.path_params["action"].strip("/")
        state = self.state
        method = request.method
        if (method, action) == ("POST", "wait-collected"):
            return _json({"idle": state.wait_collected()})
        if (method, action) == ("GET", "state"):
            return _json(self._summary())
        if (method, action) == ("POST", "compact"):
            return _json({"compactedResourceVersion": str(state.compact())})
        if (method, action) == ("POST", "close-watches"):
            return _json({"closed": state.close_watches()})
        if (method, action) == ("POST", "pause"):
            state.pause(close_watches=request.query_params.get("closeWatches", "true") in TRUE)
            return _json(self._summary())
        if (method, action) == ("POST", "unpause"):
            state.unpause()
            return _json(self._summary())
        if (method, action) == ("GET", "requests"):
            return _json({"counts": [
                {"verb": v, "resource": r, "count": n}
                for (v, r), n in sorted(state.request_counts().items())
            ]})
        if (method, action) == ("DELETE", "requests"):
            state.reset_request_counts()
            return _json({})
        if (method, action) == ("POST", "inject-conflict"):
            try:
                spec = json.loads(await request.body())
                state.inject_conflict(spec["resource"], spec.get("namespace"), spec["name"],
                                      int(spec.get("times", 1)))
            except (ValueError, KeyError, TypeError) as exc:
                return _error(errors.bad_request(
                    f"inject-conflict wants {{resource, namespace, name, times}}: {exc}"))
            return _json({})
        return _error(errors.resource_not_found())

    def _summary(self) -> dict[str, Any]:
        return {
            "resourceVersion": str(self.state.resource_version),
            "compactedResourceVersion": str(self.state.store.compacted_rv),
            "paused": self.state.paused,
            "openWatches": self.state.open_watches(),
            "mcsVersions": list(self.state.mcs_versions),
        }


def accepts_json(accept: str) -> bool:
    """Whether an Accept header takes a JSON answer, the only kind the emulator writes.

    kubectl's typed clients send `application/vnd.kubernetes.protobuf,application/json`:
    JSON is their alternative, and client-go decodes an answer by its Content-Type. A header
    naming protobuf (or anything else) alone gets 406, as a real apiserver answers a type it
    cannot write.
    """
    if not accept.strip():
        return True
    for media_range in accept.split(","):
        media_type = media_range.split(";", 1)[0].strip().lower()
        if media_type in ("application/json", "application/*", "*/*"):
            return True
    return False


def _check_accept(request: Request) -> None:
    accept = request.headers.get("accept", "")
    if not accepts_json(accept):
        raise errors.not_acceptable(accept)


def _int_param(text: str | None, name: str) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError as exc:
        raise errors.bad_request(f"invalid {name} {text!r}: must be an integer") from exc


def create_app(state: EmulatorState, *, test_controls: bool = False) -> Starlette:
    """The ASGI app serving `state`; `/emulator/…` only with `test_controls`."""
    return EmulatorApp(state, test_controls=test_controls).app
