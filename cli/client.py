"""The CLI's only HTTP code: typed reads of the hub's REST API (docs/reference.md#rest-api).

Every answer is parsed into the models of `shared.models` here, so the rest of the CLI
never sees JSON, and every failure becomes one `HubError` whose `message` is fit to print
after `error:` on one line: the hub's own `Status.message` when it sent one, otherwise a
sentence naming the URL that could not be reached or what came back instead of the
expected object. Callers therefore need exactly one `except`.

Lists follow `metadata.continue` to the end, so a caller gets the whole set; the page
size is a knob for the hub's sake, not something callers page through. The watch is a
generator of `WatchEvent`s read line by line from the hub's newline-delimited stream; it
raises `Gone` (a `HubError` with code 410) when the hub says the revision is no longer
retained — whether as an HTTP 410 or as an ERROR event mid-stream — so that the caller
relists, as the Kubernetes reflector does.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from shared.constants import API_PREFIX, WATCH_DEFAULT_TIMEOUT_SECONDS
from shared.models import (
    EndpointSliceExport,
    EndpointSliceExportList,
    ExportConflictList,
    Identity,
    ImporterList,
    InternalServiceExport,
    InternalServiceExportList,
    InvalidServiceExportList,
    ListMeta,
    MemberCluster,
    MemberClusterList,
    MemberClusterMeta,
    RegisteredMemberCluster,
    RotatedMemberCluster,
    ServiceImport,
    ServiceImportList,
    Status,
    VersionInfo,
    WatchEvent,
    to_wire,
)
from shared.version import __version__

M = TypeVar("M", bound=BaseModel)
Params = Mapping[str, str | int | None]

# The hub sends a BOOKMARK at least every few seconds on an idle watch; this much silence
# means the connection is dead even if TCP has not noticed.
WATCH_SILENCE_SECONDS = 120.0


class HubError(Exception):
    """A request that did not give the expected object; `message` is one printable line.

    `retry_after` is the hub's `Retry-After` as sent (seconds or an HTTP-date), for a caller
    that retries (`cli.watch.follow`) to read with `shared.backoff.retry_after`.
    """

    def __init__(
        self, message: str, *, code: int | None = None, retry_after: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = " ".join(message.split())
        self.code = code
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Worth retrying later: the hub was unreachable or said 503."""
        return self.code is None or self.code == 503


class Unreachable(HubError):
    """No HTTP answer at all (connection refused, DNS, timeout, dropped connection)."""


class Gone(HubError):
    """410: the watched revision is older than the hub's retained history; relist."""


class NoWatch(HubError):
    """The hub answered a watch request with a plain list: it has no such feed."""


def _quote(part: str) -> str:
    return quote(part, safe="")


def _error_from_answer(response: httpx.Response, body: bytes) -> HubError:
    code = response.status_code
    message: str | None = None
    try:
        message = Status.model_validate_json(body).message
    except ValidationError:
        pass
    if not message:
        snippet = body[:200].decode("utf-8", "replace").strip()
        message = f"the hub answered HTTP {code} {response.reason_phrase}" + (
            f": {snippet}" if snippet else ""
        )
    kind = Gone if code == 410 else HubError
    return kind(message, code=code, retry_after=response.headers.get("Retry-After"))


class _Tracer:
    """`-v`: one line per request — method, URL, status, time to the answer's headers.

    Built from httpx's event hooks so every request is traced, watches included (their
    line comes when the stream opens). Headers are never printed: the bearer token is in
    one of them.
    """

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write
        self._started: dict[int, float] = {}

    def request(self, request: httpx.Request) -> None:
        self._started[id(request)] = time.monotonic()

    def response(self, response: httpx.Response) -> None:
        started = self._started.pop(id(response.request), None)
        took = "" if started is None else f" in {(time.monotonic() - started) * 1000:.0f} ms"
        self._write(
            f"{response.request.method} {response.request.url} "
            f"{response.status_code} {response.reason_phrase}{took}"
        )


class HubClient:
    """A synchronous reader of one hub. Use as a context manager, or call `close()`."""

    def __init__(
        self,
        *,
        base_url: str,
        token: str | None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        verify: ssl.SSLContext | bool = True,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        headers = {"Accept": "application/json", "User-Agent": f"mcsync-cli/{__version__}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        hooks: dict[str, list[Callable[..., Any]]] = {}
        if trace is not None:
            tracer = _Tracer(trace)
            hooks = {"request": [tracer.request], "response": [tracer.response]}
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport,
            verify=verify, event_hooks=hooks,
        )

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- plumbing -----------------------------------------------------------------------

    def _unreachable(self, exc: httpx.HTTPError) -> Unreachable:
        detail = str(exc) or type(exc).__name__
        return Unreachable(f"cannot reach the hub at {self.base_url}: {detail}")

    def _request(
        self,
        method: str,
        path: str,
        model: type[M],
        *,
        params: Params | None = None,
        body: Any = None,
        expect: tuple[int, ...] = (200,),
    ) -> M:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(method, API_PREFIX + path, params=query, json=body)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if response.status_code not in expect:
            raise _error_from_answer(response, response.content)
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            raise HubError(
                f"the hub at {self.base_url} answered {path} with something that is not "
                f"a {model.__name__}: {exc.errors()[0].get('msg', exc)}"
            ) from None

    def _get(self, path: str, model: type[M], params: Params | None = None) -> M:
        return self._request("GET", path, model, params=params)

    def _list_all(self, path: str, model: type[M], params: Params, *, page_size: int) -> M:
        """Every page of a list, merged into one list object (first page's metadata)."""
        first: Any = None
        token: str | None = None
        while True:
            page: Any = self._get(path, model, {**params, "limit": page_size, "continue": token})
            if first is None:
                first = page
            else:
                first.items.extend(page.items)
            token = page.metadata.continue_
            if not token:
                break
        first.metadata = ListMeta(resource_version=first.metadata.resource_version)
        return first  # type: ignore[no-any-return]

    # --- clusters -----------------------------------------------------------------------

    def list_clusters(self) -> MemberClusterList:
        return self._get("/clusters", MemberClusterList)

    def get_cluster(self, name: str) -> MemberCluster:
        return self._get(f"/clusters/{_quote(name)}", MemberCluster)

    def register_cluster(
        self, name: str, labels: Mapping[str, str], spec: Mapping[str, Any] | None = None
    ) -> RegisteredMemberCluster:
        """POST /clusters (admin): the new cluster with its member token, shown only now.
        `spec`: its scope (docs/reference.md#scope-and-limits), as the wire has it
        (`exportNamespaces`, …)."""
        meta = MemberClusterMeta(name=name, labels=dict(labels) or None)
        body: dict[str, Any] = {"metadata": to_wire(meta)}
        if spec:
            body["spec"] = dict(spec)
        return self._request(
            "POST", "/clusters", RegisteredMemberCluster, body=body, expect=(200, 201)
        )

    def patch_cluster(self, name: str, patch: Mapping[str, Any]) -> MemberCluster:
        """PATCH /clusters/{name} (admin): a JSON merge patch of its labels and spec."""
        return self._request("PATCH", f"/clusters/{_quote(name)}", MemberCluster, body=patch)

    def deregister_cluster(self, name: str) -> MemberCluster:
        """DELETE /clusters/{name} (admin): the cluster as it was; its exports are withdrawn."""
        return self._request("DELETE", f"/clusters/{_quote(name)}", MemberCluster)

    def rotate_token(self, name: str) -> RotatedMemberCluster:
        """POST /clusters/{name}/token (admin): a new member token, shown only now; the old
        one works until `previousTokenExpires` (docs/reference.md#credentials)."""
        return self._request(
            "POST", f"/clusters/{_quote(name)}/token", RotatedMemberCluster, expect=(200,)
        )

    def allow_withdrawal(self, name: str) -> MemberCluster:
        """POST /clusters/{name}/allow-withdrawal (admin): the cluster's next held mass
        withdrawal goes through, once (docs/reference.md#failover)."""
        return self._request(
            "POST", f"/clusters/{_quote(name)}/allow-withdrawal", MemberCluster, expect=(200,)
        )

    def feed_position(self) -> str | None:
        """The hub's current revision, from a one-item page of exports: where a watch of
        a list that carries no resourceVersion of its own (clusters) starts."""
        page = self._get("/serviceexports", InternalServiceExportList, {"limit": 1})
        return page.metadata.resource_version

    # --- version, identity, readiness ----------------------------------------------------

    def version(self) -> VersionInfo:
        return self._get("/version", VersionInfo)

    def whoami(self) -> Identity | None:
        """The role of this client's token; None from a hub without `/whoami` (older)."""
        try:
            return self._get("/whoami", Identity)
        except HubError as exc:
            if exc.code == 404:
                return None
            raise

    def readiness(self) -> Status:
        """`/readyz` as the hub answered it, 200 or 503: its message says why."""
        try:
            response = self._http.get("/readyz")
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        try:
            return Status.model_validate_json(response.content)
        except ValidationError:
            raise _error_from_answer(response, response.content) from None

    # --- exports ------------------------------------------------------------------------

    def list_exports(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        cluster: str | None = None,
        conflict: bool | None = None,
        page_size: int = 500,
    ) -> InternalServiceExportList:
        params: dict[str, str | int | None] = {
            "namespace": namespace,
            "name": name,
            "cluster": cluster,
            "conflict": None if conflict is None else str(conflict).lower(),
        }
        return self._list_all(
            "/serviceexports", InternalServiceExportList, params, page_size=page_size
        )

    def get_export(self, cluster: str, namespace: str, name: str) -> InternalServiceExport:
        path = f"/clusters/{_quote(cluster)}/serviceexports/{_quote(namespace)}/{_quote(name)}"
        return self._get(path, InternalServiceExport)

    def watch_exports(
        self,
        *,
        resource_version: str | None,
        cluster: str | None = None,
        timeout_seconds: int = WATCH_DEFAULT_TIMEOUT_SECONDS,
    ) -> Iterator[WatchEvent]:
        """The hub's export feed after `resource_version`, until the hub ends the stream.

        Raises `Gone` when the revision is too old (relist), `Unreachable` when the
        connection cannot be made or breaks, `HubError` for any other refusal.
        """
        path = (
            f"/clusters/{_quote(cluster)}/serviceexports" if cluster else "/serviceexports"
        )
        return self._watch(path, resource_version, timeout_seconds)

    def watch_imports(
        self,
        cluster: str,
        *,
        resource_version: str | None,
        timeout_seconds: int = WATCH_DEFAULT_TIMEOUT_SECONDS,
    ) -> Iterator[WatchEvent]:
        """The import feed (docs/reference.md#change-feeds): ServiceImport and EndpointSliceExport
        events of the whole fleet, as `cluster` must import them. `NoWatch` when the hub answers the
        request with a plain list, as a hub without that feed does."""
        return self._watch(f"/clusters/{_quote(cluster)}/imports", resource_version,
                           timeout_seconds)

    def _watch(
        self, path: str, resource_version: str | None, timeout_seconds: int
    ) -> Iterator[WatchEvent]:
        params = {"watch": "true", "timeoutSeconds": str(timeout_seconds)}
        if resource_version:
            params["resourceVersion"] = resource_version
        timeout = httpx.Timeout(self._timeout, read=WATCH_SILENCE_SECONDS)
        try:
            with self._http.stream(
                "GET", API_PREFIX + path, params=params, timeout=timeout,
                headers={"Accept": "application/x-ndjson, application/json"},
            ) as response:
                if response.status_code != 200:
                    raise _error_from_answer(response, response.read())
                media_type = response.headers.get("content-type", "").split(";")[0].strip()
                if media_type == "application/json":
                    raise NoWatch(f"the hub at {self.base_url} does not offer a watch of "
                                  f"{API_PREFIX}{path}: it answered a list", code=200)
                for line in response.iter_lines():
                    if line.strip():
                        yield self._event(line)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None

    def _event(self, line: str) -> WatchEvent:
        try:
            event = WatchEvent.model_validate(json.loads(line))
        except (ValueError, ValidationError):
            raise HubError(
                f"the hub at {self.base_url} sent a watch line that is not a WatchEvent: "
                f"{line[:200]}"
            ) from None
        if event.type == "ERROR" and isinstance(event.object, Status):
            status = event.object
            kind = Gone if status.code == 410 else HubError
            seconds = status.details.retry_after_seconds if status.details else None
            raise kind(
                status.message,
                code=status.code,
                retry_after=None if seconds is None else str(seconds),
            )
        return event

    # --- imports ------------------------------------------------------------------------

    def list_imports(
        self,
        *,
        namespace: str | None = None,
        conflict: bool | None = None,
        page_size: int = 500,
    ) -> ServiceImportList:
        params: dict[str, str | int | None] = {
            "namespace": namespace,
            "conflict": None if conflict is None else str(conflict).lower(),
        }
        return self._list_all("/serviceimports", ServiceImportList, params, page_size=page_size)

    def get_import(self, namespace: str, name: str) -> ServiceImport:
        return self._get(f"/serviceimports/{_quote(namespace)}/{_quote(name)}", ServiceImport)

    def list_importers(self, namespace: str, name: str) -> ImporterList:
        """`GET /serviceimports/{ns}/{name}/importers`: per registered cluster, whether it
        imports the Service and why (`shared.importreach`)."""
        return self._get(
            f"/serviceimports/{_quote(namespace)}/{_quote(name)}/importers", ImporterList
        )

    def list_conflicts(
        self, *, namespace: str | None = None, name: str | None = None, page_size: int = 500
    ) -> ExportConflictList:
        """`GET /conflicts`: the exports that differ from their key's winner, and how."""
        params: dict[str, str | int | None] = {"namespace": namespace, "name": name}
        return self._list_all("/conflicts", ExportConflictList, params, page_size=page_size)

    def list_invalid_exports(
        self, *, namespace: str | None = None, cluster: str | None = None
    ) -> InvalidServiceExportList:
        """`GET /invalidexports`: the ServiceExports members could not export, and why."""
        return self._get(
            "/invalidexports", InvalidServiceExportList,
            {"namespace": namespace, "cluster": cluster},
        )  # fmt: skip

    def get_endpoint_slice(self, cluster: str, namespace: str, name: str) -> EndpointSliceExport:
        """One EndpointSliceExport as its source cluster sent it."""
        path = (f"/clusters/{_quote(cluster)}/endpointslices/{_quote(namespace)}/"
                f"{_quote(name)}")
        return self._get(path, EndpointSliceExport)

    # --- endpoint slices ----------------------------------------------------------------

    def list_endpoint_slices(
        self,
        *,
        namespace: str | None = None,
        service: str | None = None,
        cluster: str | None = None,
        page_size: int = 500,
    ) -> EndpointSliceExportList:
        """GET /endpointslices: every cluster's EndpointSliceExports, `service` being the
        Service they belong to (the hub's `name` filter)."""
        params: dict[str, str | int | None] = {
            "namespace": namespace, "name": service, "cluster": cluster,
        }
        return self._list_all(
            "/endpointslices", EndpointSliceExportList, params, page_size=page_size
        )
