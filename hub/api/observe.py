"""The outermost layer of the API: one log line and one metric sample per request, and
the last-resort 500.

A pure ASGI middleware (not Starlette's `BaseHTTPMiddleware`, which would buffer and
disturb streaming watch responses). It sees every request, including ones refused by the
body limit, and records the route *template* (`/api/v1/clusters/{cluster}/…`, as the
router leaves it in the scope) so that neither metric labels nor the route field carry
names. A watch is recorded under its list route with a `?watch` suffix, so that its
long duration does not pollute the list's latency histogram.

An exception no handler anticipated is logged here with its route and traceback, and
answered with a generic 500 Status — unless the response had already started (a stream),
in which case the connection is simply ended. The answer never contains the traceback.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hub.api.status import make_status, status_response
from hub.logs import fields
from hub.metrics import HubMetrics

log = logging.getLogger("mcsync.hub.requests")
UNMATCHED_ROUTE = "<unmatched>"
# The scope key under which a response that goes on after its request returns (a watch
# whose connection was taken over, `hub.api.takeover`) leaves an object with
# `when_done(callback)`: the request is recorded when that answer ends, not when the app
# returns.
DETACHED = "mcsync.detached"


def route_template(scope: Scope) -> str:
    route: Any = scope.get("route")
    template = getattr(route, "path", None)
    if not isinstance(template, str):
        return UNMATCHED_ROUTE
    if is_watch(scope):
        return f"{template}?watch"
    return template


def is_watch(scope: Scope) -> bool:
    """Whether the request asks for a watch (`?watch=true`)."""
    query = scope.get("query_string", b"")
    return b"watch=true" in query or b"watch=1" in query


class RequestObserverMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: HubMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        code = 500
        response_started = False

        async def observing_send(message: Message) -> None:
            nonlocal code, response_started
            if message["type"] == "http.response.start":
                code = int(message["status"])
                response_started = True
            await send(message)

        try:
            await self.app(scope, receive, observing_send)
        except Exception:
            log.exception(
                "unexpected error while answering a request",
                extra=fields(method=scope.get("method"), route=route_template(scope)),
            )
            if not response_started:
                code = 500
                status = make_status(500, "internal error; the hub's log has the details")
                await status_response(status)(scope, receive, send)
        finally:
            route = route_template(scope)
            method = str(scope.get("method", ""))
            path = scope.get("path")
            detached = scope.pop(DETACHED, None)
            if detached is None:
                self._record(started, method, route, path, code)
            else:
                record = self._record
                detached.when_done(lambda: record(started, method, route, path, code))

    def _record(
        self,
        started: float,
        method: str,
        route: str,
        path: Any,
        code: int,
    ) -> None:
        duration = time.perf_counter() - started
        self.metrics.request_duration.labels(method, route, str(code)).observe(duration)
        log.info(
            "request",
            extra=fields(
                method=method,
                route=route,
                path=path,
                status=code,
                duration_ms=round(duration * 1000, 2),
            ),
        )
