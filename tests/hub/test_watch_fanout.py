"""One shared feed reader per hub replica (hub.store.fanout), seen through real watches.

Each test drives `WatchStream.lines` — the generator the HTTP route streams — directly, so
that many watches and a deliberately stalled client (a consumer that stops pulling, exactly
what a blocked socket does to the generator) fit in one process. On PostgreSQL the writes
come from a second Store on the same database, i.e. another hub replica, so the watches are
woken by LISTEN/NOTIFY; on SQLite by the in-process commit.

No timing asserts: every wait is for a condition, bounded only by a generous deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from sqlalchemy import event

from hub.api.deps import context_of
from hub.api.watch import ExportFeedSource, WatchStream
from hub.store import Store
from hub.store.feed import event_line
from tests.hub.test_api_support import Hub, running_hub
from tests.hub.test_store_support import make_export, port, register

DEADLINE = 60.0  # generous: a slow shared machine must not fail these


async def until(condition: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(DEADLINE):
            while not condition():  # noqa: ASYNC110 (a condition, not an event)
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


class Watcher:
    """A watch consumed by a task; `gate`, while clear, stalls the consumer (slow client)."""

    def __init__(self, hub: Hub, cluster: str | None, start: int) -> None:
        self.stream = WatchStream(
            source=ExportFeedSource(hub.store.feed, cluster),
            ctx=context_of(hub.app),
            start=start,
            timeout_seconds=DEADLINE * 4,
        )
        self.cluster = cluster
        self.start = start
        self.events: list[dict[str, Any]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        lines = self.stream.lines([])
        pending = b""
        try:
            async for chunk in lines:
                # A large event comes in slices; the client reads whole lines.
                pending += bytes(chunk)
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    parsed = json.loads(line)
                    if parsed["type"] != "BOOKMARK":
                        self.events.append(parsed)
                await self.gate.wait()
        finally:
            await lines.aclose()

    @property
    def revisions(self) -> list[int]:
        return [
            int(e["object"]["metadata"]["resourceVersion"])
            for e in self.events
            if e["type"] != "ERROR"
        ]

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@contextlib.asynccontextmanager
async def hub_and_writer(database_url: str, **overrides: Any) -> AsyncIterator[tuple[Hub, Store]]:
    """The hub under test and the Store that writes: another replica on PostgreSQL."""
    overrides.setdefault("watch_bookmark_seconds", 0.2)
    async with running_hub(database_url, **overrides) as hub:
        if hub.store.backend != "postgresql":
            yield hub, hub.store
            return
        # The writer prunes the history: it keeps what the hub under test would keep.
        other = await Store.open(database_url, history_limit=hub.settings.history_limit)
        try:
            yield hub, other
        finally:
            await other.close()


def arrived(watcher: Watcher, revision: int) -> Callable[[], bool]:
    return lambda: revision in watcher.revisions


async def expected(hub: Hub, cluster: str | None, after: int) -> list[int]:
    """The revisions of every change of `cluster` after `after`, from the history itself."""
    events = await hub.store.feed.changes_since(revision=after, cluster_id=cluster, limit=100_000)
    return [int(e.resource_version or 0) for e in events]


async def test_history_reads_do_not_grow_with_the_number_of_watches(database_url: str) -> None:
    watches, commits = 50, 10
    async with hub_and_writer(database_url) as (hub, writer):
        names = [f"c{i:02d}" for i in range(watches)]
        await register(writer, *names)
        start = await hub.store.feed.current_revision()
        watchers = [Watcher(hub, name, start) for name in names]
        fanout = hub.store.feed.fanout
        await until(lambda: fanout.subscriber_count == watches, "every watch to subscribe")

        history_reads = 0

        def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            nonlocal history_reads
            flat = " ".join(statement.split()).lower()
            if flat.startswith("select") and "from changes" in flat:
                history_reads += 1

        # The shared reader reads over its own pool (hub.store.db.make_reader_engine).
        engines = [hub.store.engine.sync_engine, hub.store.feed_engine.sync_engine]
        for sync_engine in engines:
            event.listen(sync_engine, "before_cursor_execute", count)
        try:
            for number in range(commits):
                name = names[number * 7 % watches]
                put = await writer.exports.put(
                    name, make_export(name, name=f"svc{number}", ports=[port(80 + number)])
                )
                revision = int(put.object.metadata.resource_version or 0)
                target = watchers[names.index(name)]
                await until(arrived(target, revision), "the change to arrive")
        finally:
            for sync_engine in engines:
                event.remove(sync_engine, "before_cursor_execute", count)
        # One read per commit (at most: wake-ups during a read share the next one), plus
        # slack for a wake-up that finds nothing new; never one per watch per commit.
        assert 1 <= history_reads <= 2 * commits, history_reads
        assert history_reads < watches
        for name, watcher in zip(names, watchers, strict=True):
            assert watcher.revisions == await expected(hub, name, start)
        for watcher in watchers:
            await watcher.stop()
        assert fanout.subscriber_count == 0
        assert not context_of(hub.app).open_watches


async def test_a_watch_started_mid_stream_gets_every_later_change_once_in_order(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tiny pages, so that the replay and the reader both page through the history.
    monkeypatch.setattr("hub.api.watch.PAGE_SIZE", 4)
    async with hub_and_writer(database_url) as (hub, writer):
        await register(writer, "east", "west")
        hub.store.feed.fanout.page_size = 3
        first = await hub.store.feed.current_revision()
        early = Watcher(hub, "east", first)
        fleet = Watcher(hub, None, first)
        late: list[Watcher] = []
        total = 40
        for number in range(total):
            cluster = "east" if number % 3 else "west"
            put = await writer.exports.put(
                cluster, make_export(cluster, name=f"svc{number % 7}", ports=[port(number + 1)])
            )
            if number in (5, 17, 29):
                # Started from a revision in the past while commits keep coming: it must
                # replay from the database and then switch to the shared reader.
                revision = int(put.object.metadata.resource_version or 0)
                late.append(Watcher(hub, "east", revision - 2))
            if number % 10 == 0:
                await asyncio.sleep(0)  # let readers interleave with the writes
        newest = await hub.store.feed.current_revision()
        for watcher in (early, fleet, *late):
            watched = watcher.cluster
            want = await expected(hub, watched, watcher.start)
            await until(arrived(watcher, want[-1]), "the watch to reach the newest change")
            assert watcher.revisions == want  # every change once, in order, no gap
            assert all(e["type"] != "ERROR" for e in watcher.events)
        assert fleet.revisions[-1] == newest
        for watcher in (early, fleet, *late):
            await watcher.stop()


def too_slow_metric(hub: Hub) -> float:
    value = context_of(hub.app).metrics.watches_too_slow._value.get()
    return float(value)


async def test_each_change_is_encoded_once_and_its_bytes_shared_by_every_buffer(
    database_url: str,
) -> None:
    async with hub_and_writer(database_url) as (hub, writer):
        await register(writer, "east", "west")
        feed = hub.store.feed
        # Subscriptions nobody drains: their buffers keep what the reader handed over.
        east_a, east_b, fleet = feed.subscribe("east"), feed.subscribe("east"), feed.subscribe(None)
        west = feed.subscribe("west")
        fanout = feed.fanout
        encodings = fanout.encodings
        put = await writer.exports.put(
            "east", make_export("east", name="shared", annotations={"a.io/x": "y" * 50_000})
        )
        revision = int(put.object.metadata.resource_version or 0)
        await until(lambda: len(fleet.buffer) >= 1 and len(east_b.buffer) >= 1, "the change")
        line = east_a.buffer[0]
        assert line.revision == revision
        assert east_b.buffer[0] is line and fleet.buffer[0] is line  # one object …
        assert east_b.buffer[0].data is line.data  # … and one bytes, for every watch
        assert not west.buffer
        assert fanout.encodings == encodings + 1
        assert east_a.buffered_bytes == len(line.data) > 50_000
        event = json.loads(line.data)
        assert line.data.endswith(b"\n") and b"\n" not in line.data[:-1]
        assert event["type"] == "ADDED"
        assert event["object"]["metadata"]["annotations"] == {"a.io/x": "y" * 50_000}
        assert event["object"]["metadata"]["resourceVersion"] == str(revision)
        # The line a watch sends is the event the history replays, byte for byte.
        replayed = await feed.changes_since(revision=revision - 1, cluster_id="east")
        assert [json.loads(event_line(e)) for e in replayed] == [event]
        for sub in (east_a, east_b, fleet, west):
            sub.close()
        assert fanout.subscriber_count == 0


async def test_a_stalled_watch_over_its_byte_bound_is_ended_with_410_and_others_go_on(
    database_url: str,
) -> None:
    limit = 64 * 1024  # the smallest allowed; each change below is about 20 KB
    async with hub_and_writer(database_url, watch_buffer_bytes=limit) as (hub, writer):
        await register(writer, "east", "west")
        fanout = hub.store.feed.fanout
        start = await hub.store.feed.current_revision()
        slow = Watcher(hub, "east", start)
        fast = Watcher(hub, "east", start)
        other = Watcher(hub, "west", start)
        await until(lambda: fanout.subscriber_count == 3, "every watch to subscribe")
        slow.gate.clear()  # from its first event on, the slow client reads nothing
        scraped = (await hub.client.get("/metrics")).text
        assert "\nmcsync_hub_watches_too_slow_total 0.0\n" in scraped  # exists from the start

        for number in range(12):
            cluster = "west" if number % 5 == 4 else "east"
            await writer.exports.put(
                cluster,
                make_export(
                    cluster,
                    name=f"svc{number % 4}",
                    ports=[port(number + 1)],
                    annotations={"a.io/blob": f"{number:02d}" * 10_000},
                ),
            )
            # A client that keeps up reads each change before the next is written: four
            # of these changes read by the hub in one go would be over the bound for any
            # watch, fast or not.
            watcher = other if cluster == "west" else fast
            sent = await expected(hub, cluster, start)
            await until(
                lambda w=watcher, s=sent: w.revisions == s,
                f"{cluster}'s watch to get change {number}",
            )
        east = await expected(hub, "east", start)
        west = await expected(hub, "west", start)
        # The others got everything; the stalled one is ended, its buffer dropped.
        assert fast.revisions == east
        assert other.revisions == west
        await until(lambda: fanout.subscriber_count == 2, "the slow watch to be dropped")
        assert fanout.overflows == 1
        assert too_slow_metric(hub) == 1
        assert len(slow.events) <= 1  # it stalled after its first line or slice of one

        slow.gate.set()
        await until(lambda: slow.task.done(), "the stalled watch to end")
        ended = slow.events[-1]
        assert ended["type"] == "ERROR"
        assert ended["object"]["code"] == 410
        assert str(limit) in ended["object"]["message"]
        # What it did send is a prefix of the truth: in order, no gap, no duplicate.
        assert slow.revisions == east[: len(slow.revisions)]
        assert fast.revisions == east
        for watcher in (fast, other):
            await watcher.stop()
        assert fanout.subscriber_count == 0
        assert not context_of(hub.app).open_watches


async def test_a_stalled_watch_over_its_event_bound_is_ended_with_410(
    database_url: str,
) -> None:
    async with hub_and_writer(database_url, watch_buffer_events=3) as (hub, writer):
        await register(writer, "east")
        fanout = hub.store.feed.fanout
        start = await hub.store.feed.current_revision()
        slow = Watcher(hub, "east", start)
        await until(lambda: fanout.subscriber_count == 1, "the watch to subscribe")
        slow.gate.clear()
        for number in range(10):
            await writer.exports.put("east", make_export("east", ports=[port(number + 1)]))
        await until(lambda: fanout.subscriber_count == 0, "the slow watch to be dropped")
        assert too_slow_metric(hub) == 1
        slow.gate.set()
        await until(lambda: slow.task.done(), "the stalled watch to end")
        assert slow.events[-1]["type"] == "ERROR"
        assert slow.events[-1]["object"]["code"] == 410
        revisions = slow.revisions
        assert revisions == sorted(set(revisions))  # no duplicate, in order, before the end


async def test_an_event_larger_than_the_byte_bound_still_reaches_a_reading_watch(
    database_url: str,
) -> None:
    async with hub_and_writer(database_url, watch_buffer_bytes=64 * 1024) as (hub, writer):
        await register(writer, "east")
        start = await hub.store.feed.current_revision()
        watcher = Watcher(hub, "east", start)
        await until(lambda: hub.store.feed.fanout.subscriber_count == 1, "the subscription")
        put = await writer.exports.put(
            "east",
            make_export("east", annotations={f"a.io/b{i}": "z" * 60_000 for i in range(3)}),
        )
        revision = int(put.object.metadata.resource_version or 0)
        await until(arrived(watcher, revision), "the 180 KB event")
        assert len(watcher.events[-1]["object"]["metadata"]["annotations"]) == 3
        assert all(e["type"] != "ERROR" for e in watcher.events)
        await watcher.stop()


async def test_a_watch_ends_at_once_when_its_client_is_gone(database_url: str) -> None:
    async with hub_and_writer(database_url, watch_buffer_events=10_000) as (hub, writer):
        await register(writer, "east")
        fanout = hub.store.feed.fanout
        start = await hub.store.feed.current_revision()
        stream = WatchStream(
            source=ExportFeedSource(hub.store.feed, "east"),
            ctx=context_of(hub.app),
            start=start,
            timeout_seconds=DEADLINE,
        )
        lines = stream.lines([])
        first = asyncio.ensure_future(anext(lines))
        await until(lambda: fanout.subscriber_count == 1, "the subscription")
        # One change, taken by the stream; while nobody asks for its next chunk, the next
        # four can only be buffered.
        await writer.exports.put("east", make_export("east", ports=[port(1)]))
        await first
        for number in range(1, 5):
            await writer.exports.put("east", make_export("east", ports=[port(number + 1)]))
        await until(
            lambda: stream._sub is not None and len(stream._sub.buffer) >= 4, "buffered changes"
        )
        stream.gone.set()  # what WatchResponse does on the server's disconnect message
        rest = [chunk async for chunk in lines]
        # Four more changes were buffered; none is sent to a client that has gone.
        assert rest == []
        assert fanout.subscriber_count == 0
        assert not context_of(hub.app).open_watches
