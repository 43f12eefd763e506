"""The change feed (docs/reference.md#change-feeds): order, resume, retained history, and live
changes handed to subscribers by the shared reader, woken by local commits and other replicas'
NOTIFY."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from hub.store import DatabaseUnavailable, Gone, Store
from hub.store.fanout import FeedLine, Subscription
from hub.store.feed import event_line
from tests.hub.test_store_support import at, make_export, open_store, opened_store, register

DEADLINE = 30.0  # generous: these waits normally end in milliseconds


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, "alpha", "beta") as s:
        yield s


async def test_changes_come_in_revision_order_and_resume(store: Store) -> None:
    start = await store.feed.current_revision()
    await store.exports.put("alpha", make_export("alpha", name="one"))
    await store.exports.put("beta", make_export("beta", name="two"))
    await store.exports.put("alpha", make_export("alpha", name="one", ports=[{"port": 81}]))
    await store.exports.delete("alpha", "demo", "one")

    events = await store.feed.changes_since(revision=start)
    assert [(e.type, e.object.metadata.name) for e in events] == [  # type: ignore[union-attr]
        ("ADDED", "one"),
        ("ADDED", "two"),
        ("MODIFIED", "one"),
        ("DELETED", "one"),
    ]
    revisions = [int(e.resource_version or 0) for e in events]
    # Strictly increasing; the ServiceImport changes between them take revisions of the
    # same sequence, but belong to the import feed.
    assert revisions == sorted(set(revisions)) and revisions[0] > start
    assert revisions[-1] == await store.feed.current_revision()
    modified = events[2].object
    assert [p.port for p in modified.spec.ports] == [81]  # type: ignore[union-attr]
    # each event carries the record as of that revision
    assert modified.condition("Conflict") is not None  # type: ignore[union-attr]

    resumed = await store.feed.changes_since(revision=revisions[1])
    assert [int(e.resource_version or 0) for e in resumed] == revisions[2:]
    assert await store.feed.changes_since(revision=revisions[-1]) == []
    limited = await store.feed.changes_since(revision=start, limit=2)
    assert [int(e.resource_version or 0) for e in limited] == revisions[:2]


async def test_changes_of_one_cluster(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", name="one", created=at(0)))
    await store.exports.put("beta", make_export("beta", name="one", created=at(5), type="Headless"))
    # beta's clash re-judges alpha's record: alpha's feed shows that verdict change
    alpha = await store.feed.changes_since(revision=0, cluster_id="alpha")
    assert [e.type for e in alpha] == ["ADDED", "MODIFIED"]
    last = alpha[-1].object
    assert last.condition("Conflict").status == "True"  # type: ignore[union-attr]
    beta = await store.feed.changes_since(revision=0, cluster_id="beta")
    assert [e.type for e in beta] == ["ADDED"]


async def test_a_watch_line_is_the_event_of_its_stored_change(store: Store) -> None:
    # The shared reader writes each line from the stored text with the cluster state
    # spliced in, never through a model: the same JSON as encoding the decoded event, for
    # an added record with annotations, a re-judged one in conflict, a withdrawal.
    await store.exports.put(
        "alpha", make_export("alpha", name="one", created=at(0), annotations={"a": "é\u2028"})
    )
    await store.exports.put("beta", make_export("beta", name="one", created=at(5), type="Headless"))
    await store.exports.delete("alpha", "demo", "one")
    rows = await store.feed.rows_since(revision=0)
    assert {r.type for r in rows} == {"ADDED", "MODIFIED", "DELETED"}
    for row in rows:
        line = row.line()
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line) == json.loads(event_line(row.event()))
        assert json.loads(line)["object"]["status"]["clusterState"] == row.state


async def test_revision_older_than_history_is_gone(database_url: str) -> None:
    store = await open_store(database_url, history_limit=5)
    try:
        await register(store, "alpha")
        for i in range(12):
            await store.exports.put("alpha", make_export("alpha", name=f"svc{i}"))
        current = await store.feed.current_revision()
        assert current == 24  # each export, and the ServiceImport it creates
        with pytest.raises(Gone, match="relist"):
            await store.feed.changes_since(revision=0)
        # the last history_limit revisions are always retained
        recent = await store.feed.changes_since(revision=current - 5)
        # (the export feed's of them: every second revision went to a ServiceImport)
        assert [int(e.resource_version or 0) for e in recent] == [current - 4, current - 2, current]
    finally:
        await store.close()


async def delivered(sub: Subscription) -> FeedLine:
    """The next line the shared reader hands `sub`, waiting on its wake-up as a watch does."""
    while (line := sub.take()) is None:
        assert not sub.detached, f"the subscription ended: {sub.error!r}"
        await asyncio.wait_for(sub.wake.wait(), DEADLINE)
        sub.wake.clear()
    return line


async def test_a_local_commit_reaches_a_subscriber(store: Store) -> None:
    sub = store.feed.subscribe("alpha")
    try:
        assert sub.take() is None
        await store.exports.put("beta", make_export("beta", name="other"))
        put = await store.exports.put("alpha", make_export("alpha"))
        line = await delivered(sub)  # beta's change is not alpha's
        assert line.type == "ADDED"
        assert line.revision == int(put.object.metadata.resource_version or 0)
        assert b'"clusterId":"alpha"' in line.data
    finally:
        sub.close()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_a_commit_on_one_replica_reaches_a_subscriber_on_another(database_url: str) -> None:
    a = await open_store(database_url)
    b = await Store.open(database_url)
    try:
        await register(a, "alpha")
        sub = b.feed.subscribe(None)
        # Let B's LISTEN connection come up; a write before it would still be caught by
        # the listener's catch-up read, so this only makes the test exercise NOTIFY.
        for _ in range(100):
            if b._ctx.notifier._listening:
                break
            await asyncio.sleep(0.05)
        put = await a.exports.put("alpha", make_export("alpha"))
        line = await delivered(sub)
        assert line.type == "ADDED"
        assert line.revision == int(put.object.metadata.resource_version or 0)
    finally:
        await a.close()
        await b.close()


async def test_close_ends_every_subscription(database_url: str) -> None:
    store = await open_store(database_url)
    sub = store.feed.subscribe(None)
    await store.close()
    assert sub.wake.is_set() and sub.detached
    assert isinstance(sub.error, DatabaseUnavailable)
    with pytest.raises(DatabaseUnavailable, match="closed"):
        store.feed.subscribe(None)
