"""A watch served by the real server goes on outside its ASGI request, on a connection
taken from the server (`hub.api.takeover`, docs/reference.md#fleet-scale).

What a client sees must not change: the answer's head, every change once and in order,
BOOKMARKs, the end after `timeoutSeconds` with the last chunk — and then the same
kept-alive connection answers the client's next request. The request is still recorded
once, when the watch ends, under its `?watch` route and with the watch's duration; the
server's connections count it while it streams, and a client going away ends it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from hub.api.deps import context_of
from hub.api.takeover import WatchConnection
from hub.api.watch import WatchStream
from tests.hub.test_api_endpointslices import slice_body, slice_path
from tests.hub.test_api_support import Hub, at, bearer, running_hub, serving
from tests.hub.test_watch_direct import RawWatch, _register
from tests.hub.test_watch_fanout import until

DEADLINE = 60.0


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url, watch_bookmark_seconds=0.5) as running:
        yield running


def _streams(hub: Hub) -> list[WatchStream]:
    return [s for s in context_of(hub.app).open_watches if isinstance(s, WatchStream)]


def _watch_requests(hub: Hub) -> list[tuple[float, float]]:
    """(count, sum of seconds) of the request-duration samples of watch routes."""
    out = []
    for metric in context_of(hub.app).metrics.request_duration.collect():
        counts = {}
        sums = {}
        for sample in metric.samples:
            route = sample.labels.get("route", "")
            if not route.endswith("?watch"):
                continue
            if sample.name.endswith("_count"):
                counts[route] = sample.value
            elif sample.name.endswith("_sum"):
                sums[route] = sample.value
        out += [(counts[r], sums.get(r, 0.0)) for r in counts]
    return out


async def test_a_watch_goes_on_outside_its_request_and_hands_its_connection_back(
    hub: Hub,
) -> None:
    token = await _register(hub, "east", importNamespaces=["demo"])
    members = bearer(token)
    answer = await hub.put("east", members, created=at(0), namespace="demo")
    assert answer.is_success, answer.text
    fanout = hub.store.import_feed.fanout
    async with serving(hub.app) as url:
        watch = RawWatch()
        try:
            await watch.open(
                url, "/api/v1/clusters/east/imports?watch=true&timeoutSeconds=3", token
            )
            await until(lambda: fanout.subscriber_count == 1, "the watch to subscribe")
            (stream,) = _streams(hub)
            await until(lambda: isinstance(stream.writer, WatchConnection), "the take-over")
            # The request has returned; it is recorded when the watch ends, not before.
            assert _watch_requests(hub) == []
            opened = time.monotonic()
            watch.start()
            changed = []
            for index in range(3):
                body = slice_body(namespace="demo", addresses=(f"10.8.0.{index + 1}",))
                answer = await hub.client.put(
                    slice_path("east", namespace="demo"), json=body, headers=members
                )
                assert answer.is_success, answer.text
                changed.append(("demo", answer.json()["metadata"]["resourceVersion"]))
                await until(lambda: len(watch.slices()) == len(changed), f"change {index}")
            assert watch.slices() == changed
            assert watch.task is not None
            # After timeoutSeconds the answer ends with its last chunk ...
            await asyncio.wait_for(watch.task, DEADLINE)
            assert watch.bookmarks, "a waiting watch sends its BOOKMARKs"
            await until(lambda: fanout.subscriber_count == 0, "the subscription to close")
            await until(lambda: len(_watch_requests(hub)) == 1, "the watch's request record")
            ((count, seconds),) = _watch_requests(hub)
            assert count == 1
            assert seconds >= 2.5  # its whole life, not the moment it was taken over
            assert time.monotonic() - opened >= 2.0
            # ... and the same connection answers the next request.
            assert watch.writer is not None and watch.reader is not None
            assert await watch.reader.readexactly(2) == b"\r\n"  # the last chunk's end
            watch.writer.write(b"GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n")
            head = await asyncio.wait_for(watch.reader.readuntil(b"\r\n\r\n"), DEADLINE)
            assert b" 200 " in head.split(b"\r\n", 1)[0], head
        finally:
            await watch.close()


async def test_a_client_going_away_ends_a_taken_over_watch(hub: Hub) -> None:
    token = await _register(hub, "east")
    fanout = hub.store.import_feed.fanout
    ctx = context_of(hub.app)
    async with serving(hub.app) as url:
        watch = RawWatch()
        try:
            await watch.open(
                url, "/api/v1/clusters/east/imports?watch=true&timeoutSeconds=600", token
            )
            await until(lambda: fanout.subscriber_count == 1, "the watch to subscribe")
            (stream,) = _streams(hub)
            await until(lambda: isinstance(stream.writer, WatchConnection), "the take-over")
            assert ctx.watches_by_token, "the watch holds its token's slot"
        finally:
            await watch.close()
        await until(lambda: fanout.subscriber_count == 0, "the watch to end")
        await until(lambda: not _streams(hub), "the stream to close")
        await until(lambda: not ctx.watches_by_token, "the slot to be released")
        await until(lambda: len(_watch_requests(hub)) == 1, "the watch's request record")


async def test_a_watch_over_http_1_0_is_not_taken_over_and_still_streams(hub: Hub) -> None:
    """No chunked framing (HTTP/1.0): the answer stays the server's, as before."""
    token = await _register(hub, "east")
    async with serving(hub.app) as url:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        try:
            writer.write(
                b"GET /api/v1/clusters/east/imports?watch=true&timeoutSeconds=1 HTTP/1.0\r\n"
                + f"Authorization: Bearer {token}\r\n\r\n".encode()
            )
            answer = await asyncio.wait_for(reader.read(), DEADLINE)  # until the close
            head, _, body = answer.partition(b"\r\n\r\n")
            assert b" 200 " in head.split(b"\r\n", 1)[0], head
            assert b"BOOKMARK" in body
        finally:
            writer.close()


async def test_watch_opens_take_turns_and_give_them_back(database_url: str) -> None:
    """More watches opened at once than there are turns (one per pooled connection, at
    least 4) all open; refused watch requests give their turn back."""
    async with running_hub(database_url, pool_size=1, watch_bookmark_seconds=0.5) as hub:
        ctx = context_of(hub.app)
        token = await _register(hub, "east")
        for _ in range(3 * ctx.watch_opens._value):  # a refused watch gives its turn back
            answer = await hub.client.get(
                "/api/v1/clusters/east/imports?watch=true", headers=bearer("wrong")
            )
            assert answer.status_code == 401, answer.text
        fanout = hub.store.import_feed.fanout
        watches = [RawWatch() for _ in range(12)]
        async with serving(hub.app) as url:
            try:
                await asyncio.gather(
                    *(
                        w.open(
                            url,
                            "/api/v1/clusters/east/imports?watch=true&timeoutSeconds=120",
                            token,
                        )
                        for w in watches
                    )
                )
                await until(lambda: fanout.subscriber_count == 12, "twelve watches")
                assert ctx.watch_opens._value == max(4, hub.settings.pool_size)
            finally:
                for w in watches:
                    await w.close()


class _Transport:
    """What a `WatchConnection` writes to, recorded."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def _chunks(writes: list[bytes]) -> list[bytes]:
    out = []
    for data in writes:
        while data:
            size, _, rest = data.partition(b"\r\n")
            n = int(size, 16)
            out.append(rest[:n])
            data = rest[n + 2 :]
    return out


async def test_lines_handed_over_in_one_turn_go_out_as_one_write_in_order() -> None:
    transport = _Transport()
    connection = WatchConnection(
        transport,  # type: ignore[arg-type]
        connections=set(),
        reopen=None,
        keep_alive=False,
        paused=False,
    )
    connection.write(b"a\n")
    connection.write(b"b\n")
    assert transport.writes == []  # gathered until the end of this turn
    await asyncio.sleep(0)
    assert _chunks(transport.writes) == [b"a\nb\n"]
    # What the watch's task sends goes after what was handed over before it.
    connection.write(b"c\n")
    await connection.send(b"d\n")
    await asyncio.sleep(0)
    assert _chunks(transport.writes) == [b"a\nb\n", b"c\n", b"d\n"]
    # A paused connection declines writes; the task's send waits for it to drain.
    connection.pause_writing()
    assert not connection.ready()
    sending = asyncio.create_task(connection.send(b"e\n"))
    await asyncio.sleep(0.05)
    assert not sending.done()
    connection.resume_writing()
    await asyncio.wait_for(sending, DEADLINE)
    connection.finish(complete=True)
    assert transport.writes[-1] == b"0\r\n\r\n" and transport.closed
