"""A watch served by the real server: each change encoded once, and written to a waiting
watch's client by the shared reader itself (docs/reference.md#change-feeds,
docs/reference.md#fleet-scale).

Over uvicorn (`serving`), a watch that waits with everything sent hands its subscription a
sink that writes a line straight to its connection (`hub.api.watch.WatchStream._deliver`);
what the clients see must be what the task's path sends: every change once, in revision
order, cut to each cluster's import scope, with the encoding done once per change however
many watch it. A connection that stops taking writes (its client stopped reading) must not
lose a line either: the sink declines, and the watch's task writes the rest as it always
did.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, cast
from urllib.parse import urlsplit

import pytest

from hub.api.deps import context_of
from hub.api.watch import ExportFeedSource, ServerWriter, WatchStream
from tests.hub.test_api_endpointslices import slice_body, slice_path
from tests.hub.test_api_support import ADMIN, Hub, at, bearer, running_hub, serving
from tests.hub.test_watch_fanout import until

DEADLINE = 60.0  # generous: a slow shared machine must not fail these
CHANGES = 8


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url, watch_bookmark_seconds=0.5) as running:
        yield running


class RawWatch:
    """A watch on a raw socket, read line by line (or not read at all, `paused`)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.bookmarks: list[str] = []
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task[None] | None = None

    async def open(self, url: str, path: str, token: str) -> None:
        parts = urlsplit(url)
        self.reader, self.writer = await asyncio.open_connection(parts.hostname, parts.port)
        self.writer.write(
            f"GET {path} HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n", 1)[0], head
        assert b"transfer-encoding: chunked" in head.lower(), head

    def start(self) -> None:
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.reader is not None
        pending = b""
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                return
            pending += await self.reader.readexactly(size)
            assert await self.reader.readexactly(2) == b"\r\n"
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                event = json.loads(line)
                if event["type"] != "BOOKMARK":
                    self.events.append(event)
                else:
                    self.bookmarks.append(event["object"]["metadata"]["resourceVersion"])

    def slices(self) -> list[tuple[str, str]]:
        return [
            (e["object"]["metadata"]["namespace"], e["object"]["metadata"]["resourceVersion"])
            for e in self.events
            if e["object"]["kind"] == "EndpointSliceExport"
        ]

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.writer is not None:
            self.writer.close()


async def _register(hub: Hub, name: str, **spec: Any) -> str:
    body: dict[str, Any] = {"metadata": {"name": name}}
    if spec:
        body["spec"] = spec
    answer = await hub.client.post("/api/v1/clusters", json=body, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["token"]
    return token


async def test_waiting_watches_get_every_change_once_encoded_once(hub: Hub) -> None:
    tokens = {
        "east": await _register(hub, "east"),
        "west": await _register(hub, "west", importNamespaces=["demo"]),
    }
    east = bearer(tokens["east"])
    for namespace in ("demo", "other"):
        answer = await hub.put("east", east, created=at(0), namespace=namespace)
        assert answer.is_success, answer.text
    listed = await hub.client.get("/api/v1/clusters/west/imports", headers=bearer(tokens["west"]))
    start = listed.json()["metadata"]["resourceVersion"]
    fanout = hub.store.import_feed.fanout
    watches: list[tuple[str, RawWatch]] = []
    async with serving(hub.app) as url:
        try:
            for index in range(10):
                cluster = "west" if index % 2 else "east"
                watch = RawWatch()
                await watch.open(
                    url,
                    f"/api/v1/clusters/{cluster}/imports?watch=true&resourceVersion={start}"
                    "&timeoutSeconds=120",
                    tokens[cluster],
                )
                watch.start()
                watches.append((cluster, watch))
            await until(lambda: fanout.subscriber_count == 10, "ten watches to subscribe")
            encodings, written = fanout.encodings, fanout.written
            revisions: list[tuple[str, str]] = []

            def wanted(cluster: str) -> list[tuple[str, str]]:
                return [r for r in revisions if cluster == "east" or r[0] == "demo"]

            for change in range(CHANGES):
                namespace = "demo" if change % 2 else "other"
                body = slice_body(namespace=namespace, addresses=(f"10.9.0.{change + 1}",))
                answer = await hub.client.put(
                    slice_path("east", namespace=namespace), json=body, headers=east
                )
                assert answer.is_success, answer.text
                revisions.append((namespace, answer.json()["metadata"]["resourceVersion"]))
                # One at a time, so that the watches wait between changes (the sink's case).
                await until(
                    lambda: all(len(w.slices()) == len(wanted(c)) for c, w in watches),
                    f"change {change} on every watch",
                )
            for cluster, watch in watches:
                assert watch.slices() == wanted(cluster), cluster
            # One encoding per change, whoever watches it; written straight to the clients.
            assert fanout.encodings - encodings == CHANGES
            assert fanout.written - written > 0
        finally:
            for _, watch in watches:
                await watch.close()


async def test_a_waiting_watch_gets_its_bookmarks(hub: Hub) -> None:
    """BOOKMARKs of a waiting watch are written by a timer, not its task; they still come
    every `watch_bookmark_seconds`, at the revision the watch has reached."""
    token = await _register(hub, "east")
    await hub.put("east", bearer(token), created=at(0))
    revision = await hub.store.import_feed.current_revision()
    watch = RawWatch()
    async with serving(hub.app) as url:
        try:
            await watch.open(
                url, "/api/v1/clusters/east/imports?watch=true&timeoutSeconds=120", token
            )
            watch.start()
            await until(lambda: len(watch.bookmarks) >= 3, "three bookmarks")
            assert all(int(rv) >= revision for rv in watch.bookmarks)
            assert watch.events == []
        finally:
            await watch.close()


class FakeWriter:
    """A connection that takes writes only while `ready_now` (a client that stops reading
    makes the server's connection stop taking them)."""

    def __init__(self) -> None:
        self.ready_now = True
        self.written: list[bytes] = []

    def ready(self) -> bool:
        return self.ready_now

    def write(self, data: bytes) -> None:
        assert self.ready_now
        self.written.append(bytes(data))


async def test_a_connection_that_stops_taking_writes_loses_no_line(hub: Hub) -> None:
    members = await hub.register("east")
    stream = WatchStream(
        source=ExportFeedSource(hub.store.feed, "east"),
        ctx=context_of(hub.app),
        start=await hub.store.feed.current_revision(),
        timeout_seconds=DEADLINE * 4,
    )
    writer = FakeWriter()
    stream.writer = cast(ServerWriter, writer)
    yielded: list[bytes] = []  # what the task wrote (also in `writer.written`, in order)
    gate = asyncio.Event()
    gate.set()

    async def consume() -> None:
        async for chunk in stream.lines([]):
            yielded.append(bytes(chunk))
            writer.written.append(bytes(chunk))
            await gate.wait()

    def names() -> list[str]:
        out = []
        for line in b"".join(writer.written).splitlines():
            event = json.loads(line)
            if event["type"] != "BOOKMARK":
                out.append(event["object"]["metadata"]["name"])
        return out

    task = asyncio.create_task(consume())
    fanout = hub.store.feed.fanout
    try:
        await until(lambda: fanout.subscriber_count == 1, "the watch to subscribe")
        sent: list[str] = []
        for index in range(9):
            # Every third change finds the connection full; the consumer (the socket's
            # drain) is held meanwhile, so the watch's task falls behind and catches up.
            writer.ready_now = index % 3 != 2
            if not writer.ready_now:
                gate.clear()
            name = f"svc-{index}"
            answer = await hub.put("east", members["east"], created=at(0), name=name)
            assert answer.is_success, answer.text
            sent.append(name)
            if not writer.ready_now:
                await until(lambda: len(names()) == len(sent), f"{name} from the task")
                writer.ready_now = True
                gate.set()
            await until(lambda: len(names()) == len(sent), f"{name} on the watch")
        assert names() == sent
        assert len(writer.written) > len(yielded) > 0  # both ways were taken
    finally:
        stream.gone.set()
        stream.interrupt()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
