"""Refuse request bodies over `max_body_bytes` with 413 before anything parses them.

A pure ASGI middleware rather than a route dependency, because by the time a dependency
runs FastAPI has already read and parsed the whole body. Two checks, since a client may
lie or say nothing: a `Content-Length` above the limit is refused at once without reading
a byte; otherwise the body is read here, counting, and refused as soon as the count
passes the limit (this is what catches chunked uploads). A body within the limit is
replayed to the app unchanged; later `receive` calls (a streaming response listening for
the client's disconnect) pass straight through.

Buffering is bounded by the limit itself (1 MiB by default), so reading ahead costs no
more memory than the route would have used to parse it.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hub.api.status import make_status, status_response


class BodyTooLargeMiddleware:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, *, seen: str) -> None:
        status = make_status(
            413,
            f"the request body ({seen}) exceeds the limit of {self.max_body_bytes} bytes",
        )
        # Close the connection: the rest of the oversized body is not read.
        await status_response(status, headers={"Connection": "close"})(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = None
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = None
                break
        if length is not None and length > self.max_body_bytes:
            await self._refuse(scope, receive, send, seen=f"Content-Length {length}")
            return

        buffered: list[Message] = []
        total = 0
        while True:
            message = await receive()
            buffered.append(message)
            if message["type"] != "http.request":
                break  # http.disconnect: let the app see it
            total += len(message.get("body", b""))
            if total > self.max_body_bytes:
                await self._refuse(scope, receive, send, seen=f"at least {total} bytes")
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            if buffered:
                return buffered.pop(0)
            return await receive()

        await self.app(scope, replay, send)
