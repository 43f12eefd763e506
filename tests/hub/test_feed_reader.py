"""The shared feed reader (hub.store.fanout) under a busy or failing database.

What a fleet relies on (docs/reference.md#fleet-scale, #change-feeds): the replica's one
reader of a feed keeps feeding every open watch while the request pool is exhausted (it
reads over connections of its own), a read that fails now and then is retried without
ending anybody's watch, and only a database that stays unreachable past the reader's
grace ends the watches, each with the error, so that their clients move elsewhere.

Every test runs on SQLite and PostgreSQL. A commit made by a second Store on the same
database is another replica's: on PostgreSQL the store under test hears it by NOTIFY, on
SQLite (one process owns the file) it is told, as an in-process commit would tell it.
No timing asserts: every wait is for a condition, bounded by a generous deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from hub.store import DatabaseUnavailable, Store
from hub.store.fanout import FeedRow, Subscription
from tests.hub.test_api_support import running_hub
from tests.hub.test_store_support import make_export, open_store, port, register
from tests.hub.test_watch_fanout import Watcher

DEADLINE = 60.0


async def until(condition: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(DEADLINE):
            while not condition():  # noqa: ASYNC110 (a condition, not an event)
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


@contextlib.asynccontextmanager
async def two_replicas(database_url: str, **options: Any) -> AsyncIterator[tuple[Store, Store]]:
    """The store under test (a small pool) and another replica that writes."""
    store = await open_store(database_url, pool_size=1, **options)
    other = await Store.open(database_url)
    try:
        yield store, other
    finally:
        await other.close()
        await store.close()


async def put(store: Store, writer: Store, cluster: str, number: int) -> int:
    """Another replica exports a Service of `cluster`; answers its revision, which the
    store under test has heard of."""
    answer = await writer.exports.put(
        cluster, make_export(cluster, name=f"svc{number}", ports=[port(80 + number)])
    )
    revision = int(answer.object.metadata.resource_version or 0)
    if store.backend == "sqlite":
        store._ctx.notifier.committed(revision)  # no NOTIFY between SQLite processes
    return revision


def received(sub: Subscription) -> list[int]:
    return [line.revision for line in sub.buffer]


async def test_the_shared_reader_feeds_watches_while_every_pooled_connection_is_taken(
    database_url: str,
) -> None:
    async with two_replicas(database_url) as (store, writer):
        await register(writer, "c1")
        sub = store.feed.subscribe("c1")
        pool = store._ctx.engine
        # Every connection the request pool may hand out (its size and its overflow), held.
        held = [await pool.connect() for _ in range(store.pool_usage().limit)]
        try:
            revision = await put(store, writer, "c1", 1)
            await until(lambda: revision in received(sub), "the change to reach the watch")
            assert not sub.detached and sub.error is None
        finally:
            for conn in held:
                await conn.close()
        sub.close()


class FailingReads:
    """The export feed's next `failures` history reads fail as an unreachable database
    makes them fail; `calls` counts every read."""

    def __init__(self, store: Store, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        fanout = store.feed.fanout
        self._real = fanout._read_page
        fanout._read_page = self.read

    async def read(self, revision: int, limit: int) -> Sequence[FeedRow]:
        self.calls += 1
        if self.calls <= self.failures:
            raise DatabaseUnavailable("database unavailable: connection refused")
        return await self._real(revision, limit)


async def test_a_failed_read_of_the_shared_reader_is_retried_and_no_watch_ends(
    database_url: str,
) -> None:
    async with two_replicas(database_url) as (store, writer):
        await register(writer, "c1", "c2")
        watches = [store.feed.subscribe("c1"), store.feed.subscribe("c2")]
        reads = FailingReads(store, failures=2)
        revision = await put(store, writer, "c1", 1)
        await until(lambda: revision in received(watches[0]), "the change after the retries")
        assert reads.calls >= 3
        for sub in watches:
            assert not sub.detached and sub.error is None
        assert store.feed.fanout.subscriber_count == 2
        later = await put(store, writer, "c2", 2)
        await until(lambda: later in received(watches[1]), "a later change")
        for sub in watches:
            sub.close()


async def test_a_reader_failing_past_its_grace_ends_the_watches_with_the_error(
    database_url: str,
) -> None:
    async with two_replicas(database_url) as (store, writer):
        await register(writer, "c1")
        store.feed.fanout.failing_grace = 0.2
        sub = store.feed.subscribe("c1")
        reads = FailingReads(store, failures=1_000_000)
        await put(store, writer, "c1", 1)
        await until(lambda: sub.detached, "the watch to end")
        assert isinstance(sub.error, DatabaseUnavailable)
        assert store.feed.fanout.subscriber_count == 0
        # A watch opened afterwards is fed again once the database answers.
        reads.failures = 0  # the database answers again
        again = store.feed.subscribe("c1")
        revision = await put(store, writer, "c1", 2)
        await until(lambda: revision in received(again), "a change after the outage")
        again.close()


async def test_idle_watches_hold_no_pooled_connection(database_url: str) -> None:
    """A replica holds thousands of watches on a pool of tens of connections: an open
    watch takes a connection only while it reads (its replay), never while it waits."""
    watches = 20
    async with running_hub(database_url, pool_size=1, watch_bookmark_seconds=0.2) as hub:
        names = [f"c{i:02d}" for i in range(watches)]
        await register(hub.store, *names)
        start = await hub.store.feed.current_revision()
        watchers = [Watcher(hub, name, start) for name in names]
        try:
            fanout = hub.store.feed.fanout
            await until(lambda: fanout.subscriber_count == watches, "every watch to subscribe")
            assert hub.store.pool_usage().in_use == 0
            # The pool is free for the replica's writes, and the watches hear them.
            answer = await hub.store.exports.put(
                names[3], make_export(names[3], name="svc", ports=[port(80)])
            )
            revision = int(answer.object.metadata.resource_version or 0)
            await until(lambda: revision in watchers[3].revisions, "the change to arrive")
            assert hub.store.pool_usage().in_use == 0
        finally:
            for watcher in watchers:
                await watcher.stop()
