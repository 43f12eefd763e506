"""The one place where the agent speaks HTTP to the hub (docs/reference.md#rest-api).

Built like an httpx client should be: one `httpx.Client` (keep-alive connections), an
explicit `HubClientConfig` (timeouts, retry budget, TLS), typed methods that answer the
`shared.models` both sides agree on, and a small set of exceptions a caller can act on:

* `HubRejected` — the hub said no (4xx). Carries the hub's `Status` message, which the
  reconciler shows users verbatim (`Ready=False/Failed`). Subclasses: `HubConflict` (409, a
  stale resourceVersion precondition), `HubNotFound` (404), `HubGone` (410, the watch
  history moved past us).
* `HubUnavailable` — the hub could not be reached, or kept answering 5xx/429, through the
  whole retry budget. The work queue's per-key backoff takes over from there, so the client
  never blocks a worker for long.
* `HubProtocolError` — a 2xx answer that is not what the contract says (bad JSON, wrong
  shape): a clear error, not a crash deep in a reconcile.

Retries: connection errors, timeouts, 5xx and 429 are retried with `shared.backoff`'s
exponential backoff and full jitter, never sooner than the hub's `Retry-After` (seconds or
an HTTP-date; capped, so a confused proxy cannot park a worker for an hour). Every method
the agent uses is idempotent on the hub (PUT replaces, DELETE of a gone record is a 404 the
caller accepts, PATCH carries a precondition), so a retry after a lost answer is safe: at
worst a precondition turns into a 409 that the caller re-reads.

The bearer token is sent in the Authorization header and nowhere else: it is not in
`repr(config)`, log lines or metric labels. With `token_file` the token is the file's
content, re-read when the file changes (a rotated Secret) and after a 401, which is then
retried once with the new token (`member.hubtoken`), so a rotation refuses no request.
A W3C `traceparent` header is added when a span is active (the reconcile's), so the
hub's request span joins the agent's trace.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from opentelemetry import propagate
from opentelemetry.trace import TracerProvider
from pydantic import BaseModel, ValidationError

from member.hubtoken import TokenSource
from member.metrics import HubRequestMetrics
from shared.backoff import Backoff, retry_after
from shared.constants import (
    API_PREFIX,
    HEARTBEAT_JITTER,
    IDLE_CONNECTION_MARGIN_SECONDS,
    WATCH_DEFAULT_TIMEOUT_SECONDS,
)
from shared.models import (
    AnnotationPatch,
    AnnotationPatchMeta,
    ClusterImportList,
    ClusterNamespacesReport,
    ClusterProperties,
    ClusterPropertiesList,
    ClusterPropertiesReport,
    EndpointSliceExport,
    EndpointSliceExportList,
    Heartbeat,
    HeartbeatResponse,
    InternalServiceExport,
    InternalServiceExportList,
    InvalidExports,
    MemberCluster,
    ServiceImport,
    VersionInfo,
    WatchEvent,
    WithdrawalHold,
    to_wire,
)
from shared.version import __version__

__all__ = [
    "HubClient",
    "HubClientConfig",
    "HubConflict",
    "HubError",
    "HubGone",
    "HubNotFound",
    "HubProtocolError",
    "HubRejected",
    "HubUnavailable",
    "HubWatchStream",
    "idle_connection_seconds",
]

logger = logging.getLogger(__name__)

ROUTE_EXPORT = API_PREFIX + "/clusters/{cluster}/serviceexports/{namespace}/{name}"
ROUTE_EXPORTS = API_PREFIX + "/clusters/{cluster}/serviceexports"
ROUTE_SLICE = API_PREFIX + "/clusters/{cluster}/endpointslices/{namespace}/{name}"
ROUTE_SLICES = API_PREFIX + "/clusters/{cluster}/endpointslices"
ROUTE_IMPORTS = API_PREFIX + "/clusters/{cluster}/imports"
ROUTE_HEARTBEAT = API_PREFIX + "/clusters/{cluster}/heartbeat"
ROUTE_PROPERTIES = API_PREFIX + "/clusters/{cluster}/properties"
ROUTE_NAMESPACES = API_PREFIX + "/clusters/{cluster}/namespaces"
ROUTE_FLEET_PROPERTIES = API_PREFIX + "/clusters/{cluster}/fleetproperties"
ROUTE_VERSION = API_PREFIX + "/version"
# Every (method, route) this client calls, and the failures an agent meets in normal work
# (no connection; a conflict, gone, throttled or unavailable hub): their error series exist
# from start at 0 (docs/reference.md#observability), so the first one is an increase an alert can
# see.
CALLS: tuple[tuple[str, str], ...] = (
    ("GET", ROUTE_EXPORT),
    ("PUT", ROUTE_EXPORT),
    ("PATCH", ROUTE_EXPORT),
    ("DELETE", ROUTE_EXPORT),
    ("GET", ROUTE_EXPORTS),
    ("PUT", ROUTE_SLICE),
    ("DELETE", ROUTE_SLICE),
    ("GET", ROUTE_SLICES),
    ("GET", ROUTE_IMPORTS),
    ("POST", ROUTE_HEARTBEAT),
    ("GET", ROUTE_VERSION),
)
EXPECTED_ERROR_CODES = ("connection", "409", "410", "429", "500", "503")

M = TypeVar("M", bound=BaseModel)


def idle_connection_seconds(heartbeat_interval: float) -> float:
    """How long the agent keeps an idle connection to the hub: its longest wait between
    heartbeats (the interval plus its jitter) and a margin, so that every beat of a quiet
    agent goes over the connection the last one used. The hub keeps idle connections
    longer (`--keep-alive-timeout-seconds`, above this for the default interval)."""
    return heartbeat_interval * (1 + HEARTBEAT_JITTER) + IDLE_CONNECTION_MARGIN_SECONDS


@dataclass(frozen=True)
class HubClientConfig:
    """How to reach the hub, and how patient to be with it."""

    base_url: str
    cluster_id: str
    token: str = field(repr=False)
    # Where `token` was read from; watched for changes (docs/reference.md#credentials).
    token_file: Path | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    # A watch's read gives up this long after the hub's own stream timeout: a silently
    # dead connection then becomes a resumed watch instead of a hung informer.
    watch_read_grace: float = 30.0
    max_attempts: int = 4
    backoff_initial: float = 0.2
    backoff_max: float = 5.0
    retry_after_max: float = 15.0
    page_size: int = 500
    # How long an idle connection is kept for the next request: past the agent's longest
    # wait between heartbeats (`idle_connection_seconds`), or a quiet agent opens a new
    # TCP connection for every beat. httpx's own default is 5 s.
    keepalive_expiry: float = 5.0
    verify: bool | str = True
    user_agent: str = f"mcsync-agent/{__version__}"

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"hub URL must start with http:// or https://, got {self.base_url!r}")
        if not self.token:
            raise ValueError("hub token is empty")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.retry_after_max < 0:
            raise ValueError("retry_after_max must be at least 0")
        self.backoff  # noqa: B018 -- refuses a backoff that makes no sense, here and now

    @property
    def backoff(self) -> Backoff:
        """The pacing of retries within one call's budget."""
        return Backoff(base=self.backoff_initial, cap=self.backoff_max)


class HubError(Exception):
    """Base of every hub client error."""


class HubUnavailable(HubError):
    """The hub could not be reached (or answered 5xx/429) through the whole retry budget."""


class HubProtocolError(HubError):
    """The hub answered something that is not what the contract says."""


class HubRejected(HubError):
    """The hub refused the request (4xx); `message` is the hub's own sentence."""

    def __init__(self, *, code: int, reason: str, message: str, route: str) -> None:
        super().__init__(f"hub answered {code} {reason} to {route}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.route = route


class HubConflict(HubRejected):
    """409: the resourceVersion precondition no longer holds (re-read, decide again)."""


class HubNotFound(HubRejected):
    """404: no such record (or cluster)."""


class HubGone(HubRejected):
    """410: the requested revision is older than the hub's retained history: relist."""


_REJECTIONS: Mapping[int, type[HubRejected]] = {409: HubConflict, 404: HubNotFound, 410: HubGone}


class HubClient:
    """Typed calls to the hub's REST API for one member cluster. Thread-safe."""

    def __init__(
        self,
        config: HubClientConfig,
        *,
        metrics: HubRequestMetrics | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._metrics = metrics
        self._backoff = config.backoff
        self._sleep = sleep
        self._token = TokenSource(config.token, path=config.token_file)
        if metrics is not None:
            for method, route in CALLS:
                for code in EXPECTED_ERROR_CODES:
                    metrics.errors.labels(method, route, code)
        self._http = httpx.Client(
            base_url=config.base_url.rstrip("/"),
            timeout=httpx.Timeout(config.read_timeout, connect=config.connect_timeout),
            headers={
                "User-Agent": config.user_agent,
                "Accept": "application/json",
            },
            verify=config.verify,
            transport=transport,
            follow_redirects=False,
            limits=httpx.Limits(keepalive_expiry=config.keepalive_expiry),
        )

    def instrument(self, tracer_provider: TracerProvider) -> None:
        """Trace each request (every retry attempt) as a client span of the current span.

        The instrumentation injects that span's `traceparent`, so the hub's request span
        becomes its child; URL and method are recorded, headers (the token) are not.
        """
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor.instrument_client(self._http, tracer_provider=tracer_provider)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- exports ----------------------------------------------------------------------------

    def put_export(self, export: InternalServiceExport) -> InternalServiceExport:
        """Create or replace one export; answers the stored record with its verdict."""
        ref = export.spec.service_reference
        answer = self._call(
            "PUT",
            ROUTE_EXPORT,
            namespace=ref.namespace,
            name=ref.name,
            json_body=to_wire(export),
        )
        return self._parse(answer, InternalServiceExport, ROUTE_EXPORT)

    def get_export(self, namespace: str, name: str) -> InternalServiceExport | None:
        """The hub's record of `namespace/name` for this cluster; None when it has none."""
        try:
            answer = self._call("GET", ROUTE_EXPORT, namespace=namespace, name=name)
        except HubNotFound:
            return None
        return self._parse(answer, InternalServiceExport, ROUTE_EXPORT)

    def delete_export(self, namespace: str, name: str) -> InternalServiceExport | None:
        """Withdraw one export. Answers its last state, or None when it was already gone."""
        try:
            answer = self._call("DELETE", ROUTE_EXPORT, namespace=namespace, name=name)
        except HubNotFound:
            # docs/reference.md#export-path: 404 confirms the withdrawal as well as 200 does
            return None
        return self._parse(answer, InternalServiceExport, ROUTE_EXPORT)

    def patch_annotations(
        self,
        namespace: str,
        name: str,
        *,
        resource_version: str,
        annotations: dict[str, str | None],
    ) -> InternalServiceExport:
        """JSON merge patch of the record's annotations, if it is still at `resource_version`.

        Raises `HubConflict` when it is not (nothing was written), `HubNotFound` when the
        record is gone.
        """
        body = AnnotationPatch(
            metadata=AnnotationPatchMeta(resource_version=resource_version, annotations=annotations)
        )
        answer = self._call(
            "PATCH",
            ROUTE_EXPORT,
            namespace=namespace,
            name=name,
            json_body=body.model_dump(mode="json", by_alias=True),
            content_type="application/merge-patch+json",
        )
        return self._parse(answer, InternalServiceExport, ROUTE_EXPORT)

    def list_exports(
        self, each: Callable[[InternalServiceExport], Any] | None = None
    ) -> tuple[list[Any], str]:
        """Every record of this cluster (following `continue`), and the list's revision.

        A continue token that expired mid-way (410) starts the list again from page one:
        pages of two snapshots mixed would be an inconsistent list. With `each`, the answer
        holds `each(record)`, applied page by page: 10,000 models are never alive at once.
        """
        while True:
            try:
                return self._pages(ROUTE_EXPORTS, InternalServiceExportList, each)
            except HubGone:
                logger.info("hub list continuation expired; listing again")

    def _pages(
        self,
        route: str,
        model: (
            type[InternalServiceExportList]
            | type[EndpointSliceExportList]
            | type[ClusterImportList]
        ),
        each: Callable[[Any], Any] | None,
    ) -> tuple[list[Any], str]:
        items: list[Any] = []
        token: str | None = None
        while True:
            params: dict[str, str] = {"limit": str(self.config.page_size)}
            if token:
                params["continue"] = token
            answer = self._call("GET", route, params=params)
            page = self._parse(answer, model, route)
            items.extend(page.items if each is None else map(each, page.items))
            token = page.metadata.continue_
            if not token:
                return items, page.metadata.resource_version or "0"

    def watch_exports(
        self, *, resource_version: str, timeout_seconds: int = WATCH_DEFAULT_TIMEOUT_SECONDS
    ) -> HubWatchStream:
        """The change feed of this cluster's records after `resource_version`
        (docs/reference.md#change-feeds).

        Raises `HubGone` when that revision is older than the hub's retained history, and
        `HubUnavailable` when the hub cannot be reached (no retries: the informer backs off).
        """
        return self._watch(ROUTE_EXPORTS, resource_version, timeout_seconds)

    # -- imports (docs/reference.md#import-path, #change-feeds)
    # -----------------------------------------------------------

    def list_imports(
        self, each: Callable[[ServiceImport | EndpointSliceExport], Any] | None = None
    ) -> tuple[list[Any], str]:
        """Everything this cluster must import (ServiceImports and EndpointSliceExports of
        the fleet, following `continue`), and the list's revision; as `list_exports`."""
        while True:
            try:
                return self._pages(ROUTE_IMPORTS, ClusterImportList, each)
            except HubGone:
                logger.info("hub import list continuation expired; listing again")

    def watch_imports(
        self, *, resource_version: str, timeout_seconds: int = WATCH_DEFAULT_TIMEOUT_SECONDS
    ) -> HubWatchStream:
        """The import feed after `resource_version`; raises as `watch_exports`."""
        return self._watch(ROUTE_IMPORTS, resource_version, timeout_seconds)

    def _watch(self, route: str, resource_version: str, timeout_seconds: int) -> HubWatchStream:
        path = self._path(route)
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        timeout = httpx.Timeout(
            timeout_seconds + self.config.watch_read_grace, connect=self.config.connect_timeout
        )
        started = time.monotonic()
        for renewed in (False, True):
            request = self._http.build_request(
                "GET", path, params=params, headers=self._headers(), timeout=timeout
            )
            started = time.monotonic()
            try:
                response = self._http.send(request, stream=True)
            except httpx.TransportError as exc:
                self._observe("GET", route, "connection", started, error=True)
                raise HubUnavailable(
                    f"hub watch at {self.config.base_url}: {_short(exc)}"
                ) from None
            if response.status_code != 401 or renewed or not self._renewed(request.headers):
                break
            response.close()
            self._observe("GET", route, "401", started, error=False)  # retried at once
        if response.status_code != 200:
            try:
                response.read()
            finally:
                response.close()
            self._observe("GET", route, str(response.status_code), started, error=True)
            if response.status_code >= 500 or response.status_code == 429:
                raise HubUnavailable(
                    f"hub watch answered {response.status_code}: {_status_message(response)}"
                )
            raise self._rejection(response, route)
        self._observe("GET", route, "200", started, error=False)
        return HubWatchStream(response)

    # -- endpoint slices (docs/reference.md#import-path)
    # ---------------------------------------------------------

    def put_endpointslice(self, export: EndpointSliceExport) -> EndpointSliceExport:
        """Create or replace one of this cluster's EndpointSliceExports; answers it as stored.

        Raises `HubConflict` (409) when this cluster does not export the slice's Service
        (yet): the export's PUT has not reached the hub, or it was withdrawn.
        """
        answer = self._call(
            "PUT",
            ROUTE_SLICE,
            namespace=export.metadata.namespace or "",
            name=export.metadata.name,
            json_body=to_wire(export),
        )
        return self._parse(answer, EndpointSliceExport, ROUTE_SLICE)

    def delete_endpointslice(self, namespace: str, name: str) -> EndpointSliceExport | None:
        """Withdraw one slice. Answers its last state, or None when it was already gone."""
        try:
            answer = self._call("DELETE", ROUTE_SLICE, namespace=namespace, name=name)
        except HubNotFound:
            return None  # gone already (e.g. withdrawn with its export): what we wanted
        return self._parse(answer, EndpointSliceExport, ROUTE_SLICE)

    def list_endpointslices(
        self, each: Callable[[EndpointSliceExport], Any] | None = None
    ) -> tuple[list[Any], str]:
        """Every EndpointSliceExport of this cluster (following `continue`), and the list's
        revision; as `list_exports`, restarted from page one when a continuation expires."""
        while True:
            try:
                return self._pages(ROUTE_SLICES, EndpointSliceExportList, each)
            except HubGone:
                logger.info("hub slice list continuation expired; listing again")

    # -- cluster ---------------------------------------------------------------------------

    def heartbeat(
        self,
        *,
        agent_version: str = __version__,
        imports: tuple[int, int] | None = None,
        withdrawal_held: WithdrawalHold | None = None,
        invalid_exports: InvalidExports | None = None,
    ) -> HeartbeatResponse:
        """Say this cluster's agent is alive, what it imports (ServiceImports, endpoints),
        the repair it holds (docs/reference.md#failover) and, when they changed, its invalid
        ServiceExports (docs/reference.md#flags); answers the hub's version, minAgentVersion, TTL
        and whether an admin allowed the held withdrawal."""
        beat = Heartbeat(
            agent_version=agent_version,
            withdrawal_held=withdrawal_held,
            invalid_exports=invalid_exports,
        )
        if imports is not None:
            beat.imported_services, beat.imported_endpoints = imports
        answer = self._call("POST", ROUTE_HEARTBEAT, json_body=to_wire(beat))
        return self._parse(answer, HeartbeatResponse, ROUTE_HEARTBEAT)

    # -- cluster properties (docs/reference.md#cluster-properties) ---------------------------

    def put_properties(self, properties: Mapping[str, str]) -> MemberCluster:
        """Report every ClusterProperty of this cluster (replacing the hub's)."""
        body = to_wire(ClusterPropertiesReport(properties=dict(properties)))
        answer = self._call("PUT", ROUTE_PROPERTIES, json_body=body)
        return self._parse(answer, MemberCluster, ROUTE_PROPERTIES)

    def put_namespaces(self, namespaces: Iterable[str]) -> MemberCluster:
        """Report every namespace this cluster holds within its import scope (replacing
        the hub's)."""
        body = to_wire(ClusterNamespacesReport(namespaces=sorted(namespaces)))
        answer = self._call("PUT", ROUTE_NAMESPACES, json_body=body)
        return self._parse(answer, MemberCluster, ROUTE_NAMESPACES)

    def list_fleet_properties(self) -> tuple[list[ClusterProperties], str]:
        """Every cluster's reported properties, and the revision to watch them from."""
        answer = self._call("GET", ROUTE_FLEET_PROPERTIES)
        page = self._parse(answer, ClusterPropertiesList, ROUTE_FLEET_PROPERTIES)
        return page.items, page.metadata.resource_version or "0"

    def watch_fleet_properties(
        self, *, resource_version: str, timeout_seconds: int = WATCH_DEFAULT_TIMEOUT_SECONDS
    ) -> HubWatchStream:
        """The fleet's cluster-properties changes after `resource_version`; raises as
        `watch_exports`."""
        return self._watch(ROUTE_FLEET_PROPERTIES, resource_version, timeout_seconds)

    def version(self) -> VersionInfo:
        answer = self._call("GET", ROUTE_VERSION)
        return self._parse(answer, VersionInfo, ROUTE_VERSION)

    # -- plumbing --------------------------------------------------------------------------

    def _path(self, route: str, **params: str) -> str:
        values = {"cluster": self.config.cluster_id, **params}
        return route.format(**{k: quote(v, safe="") for k, v in values.items()})

    def _renewed(self, sent: Mapping[str, str]) -> bool:
        """After a 401: whether the token file holds another token than the one `sent`
        carried (read again now). A request sent with the old token while another one
        already used the new token (and so retired the old one) is retried too."""
        self._token.refresh()
        return sent.get("Authorization") != f"Bearer {self._token.token}"

    def _headers(self) -> dict[str, str]:
        headers: dict[str, str] = {"Authorization": f"Bearer {self._token.current()}"}
        # Adds `traceparent` (and `tracestate`) when a span is active; nothing otherwise.
        propagate.inject(headers)
        return headers

    def _call(
        self,
        method: str,
        route: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        **path_params: str,
    ) -> httpx.Response:
        """One request with retries; answers the 2xx response or raises a `HubError`."""
        path = self._path(route, **path_params)
        content = None if json_body is None else json.dumps(json_body).encode("utf-8")
        last_problem = "no attempt made"
        renewed = False  # a 401 is retried once, when the token file holds a new token
        attempt = 0
        while attempt < self.config.max_attempts:
            attempt += 1
            headers = self._headers()
            if content is not None:
                headers["Content-Type"] = content_type
            started = time.monotonic()
            asked: float | None = None  # the hub's Retry-After, when it gave one
            try:
                response = self._http.request(
                    method, path, content=content, params=params, headers=headers
                )
            except httpx.TransportError as exc:
                self._observe(method, route, "connection", started, error=True)
                last_problem = _short(exc)
            else:
                code = response.status_code
                if 200 <= code < 300:
                    self._observe(method, route, str(code), started, error=False)
                    return response
                if code == 401 and not renewed and self._renewed(headers):
                    self._observe(method, route, str(code), started, error=False)
                    renewed = True
                    attempt -= 1  # not the hub's fault: this attempt does not count
                    continue
                self._observe(method, route, str(code), started, error=True)
                if code < 500 and code != 429:
                    raise self._rejection(response, route)
                last_problem = f"{code} {_status_message(response)}"
                asked = retry_after(
                    response.headers.get("Retry-After"), maximum=self.config.retry_after_max
                )
            if attempt == self.config.max_attempts:
                break
            wait = self._backoff.wait(attempt - 1, retry_after=asked)
            logger.info(
                "hub %s %s failed (attempt %d of %d: %s); retrying in %.2fs",
                method,
                route,
                attempt,
                self.config.max_attempts,
                last_problem,
                wait,
            )
            self._sleep(wait)
        raise HubUnavailable(
            f"hub at {self.config.base_url} did not answer {method} {route} after "
            f"{self.config.max_attempts} attempts: {last_problem}"
        )

    def _rejection(self, response: httpx.Response, route: str) -> HubRejected:
        reason, message = _status_of(response)
        kind = _REJECTIONS.get(response.status_code, HubRejected)
        return kind(code=response.status_code, reason=reason, message=message, route=route)

    def _parse(self, response: httpx.Response, model: type[M], route: str) -> M:
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            raise HubProtocolError(
                f"hub answered {response.status_code} to {route} with a body that is not a "
                f"{model.__name__}: {exc.errors()[0].get('msg') if exc.errors() else exc}"
            ) from None

    def _observe(self, method: str, route: str, code: str, started: float, *, error: bool) -> None:
        if self._metrics is None:
            return
        self._metrics.duration.labels(method, route, code).observe(time.monotonic() - started)
        if error:
            self._metrics.errors.labels(method, route, code).inc()


class HubWatchStream:
    """Iterator over one open watch's events (`WatchEvent` models); interruptible.

    `interrupt()` (from another thread) shuts the socket down, which wakes a read blocked
    in this thread; the iteration then ends cleanly. Without it, stopping the agent would
    wait for a quiet watch to time out.
    """

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._lines = response.iter_lines()
        self._interrupted = threading.Event()
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        while True:
            if self._interrupted.is_set():
                self.close()
                raise StopIteration
            try:
                line = next(self._lines)
            except StopIteration:
                self.close()
                raise
            except (httpx.HTTPError, OSError) as exc:
                self.close()
                if self._interrupted.is_set():
                    raise StopIteration from None
                raise HubUnavailable(f"hub watch stream broke: {_short(exc)}") from None
            if not line.strip():
                continue
            try:
                return WatchEvent.model_validate_json(line)
            except ValidationError as exc:
                self.close()
                raise HubProtocolError(
                    f"hub watch sent an event that is not a WatchEvent: {exc}"
                ) from None

    def interrupt(self) -> None:
        self._interrupted.set()
        stream = self._response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            try:
                # shutdown(), unlike close(), wakes a recv() blocked in another thread.
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                logger.debug("shutting down a hub watch socket failed", exc_info=True)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._response.close()
            except Exception:
                logger.debug("closing a hub watch failed", exc_info=True)


def _status_of(response: httpx.Response) -> tuple[str, str]:
    """(reason, message) of a Status answer; tolerant of non-Status bodies."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body.get("reason") or response.reason_phrase), str(body["message"])
    text = response.text.strip()[:200] or response.reason_phrase
    return response.reason_phrase, text


def _status_message(response: httpx.Response) -> str:
    return _status_of(response)[1]


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
