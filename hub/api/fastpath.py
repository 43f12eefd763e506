"""A route whose common request skips FastAPI's per-request dependency solving.

FastAPI solves a route's dependency graph on every request: for the single-export PUT
that is six nodes (context, store, bearer scheme, authenticate, the access rule, the
path and body parameters), each re-deriving its cache key and scope, and it was the
largest part of the PUT's framework cost, the one the benchmark's no-op route does not
pay (docs/benchmarks.md §1, fourth round).

`fast_path_route(fast)` keeps the route declared as usual — the same signature, so the
same OpenAPI, the same dependencies and error answers — and puts `fast` in front of it.
`fast` gets the request (a `StrictJsonRequest`) and either answers it, or returns None:
then the request goes through FastAPI's handler unchanged. A fast path handles only the
request that is entirely in order and declines everything else *before any side effect*,
so every refusal (401, 403, 415, 422 naming the field, …) is still worded by the one
dependency path, and a fast path cannot answer differently from it. What it reads on the
way (the body, its parsed JSON) is cached on the request, so a declined request is not
read twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from hub.api.jsonbody import StrictJsonRequest

FastHandler = Callable[[StrictJsonRequest], Awaitable[Response | None]]


def fast_path_route(fast: FastHandler) -> type[APIRoute]:
    """An APIRoute class that tries `fast` first and falls back to FastAPI's handler."""

    class FastPathRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            declared = super().get_route_handler()

            async def handler(request: Request) -> Response:
                strict = StrictJsonRequest(request.scope, request.receive)
                answer = await fast(strict)
                if answer is not None:
                    return answer
                return await declared(strict)

            return handler

    FastPathRoute.__qualname__ = f"FastPathRoute[{getattr(fast, '__qualname__', fast)}]"
    return FastPathRoute
