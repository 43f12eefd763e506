"""The generic informer (docs/reference.md#export-path): list, watch from the list's
resourceVersion, resume, relist.

Two sources: a small in-memory ListWatch defined here (the informer is not Kubernetes-specific:
the agent also runs one over the hub's feed, so the protocol itself is the contract under test),
and the Kubernetes API emulator over HTTP through `member.kube.listwatch` (in
`test_kube_listwatch.py`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from member.informer import (
    BACKOFF,
    HUB_RECONNECT,
    Informer,
    ItemTransform,
    ResourceExpired,
    namespaced_key,
)
from shared.backoff import Backoff
from tests.member.informer_support import Recorder

DEADLINE = 30.0


def wait_for(condition: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met within the deadline")
        time.sleep(0.01)


def obj(name: str, rv: int, *, namespace: str = "ns", data: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv)},
        "data": data,
    }


class MemoryListWatch:
    """A revisioned in-memory collection with a bounded history, speaking the ListWatch protocol.

    `watch()` replays history after the given resourceVersion, then blocks for new events
    until the timeout; `compact()` forgets history (a later watch from before it answers
    ResourceExpired); `break_watches()` makes open streams fail like a dropped connection.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._rv = 1
        self._objects: dict[str, dict[str, Any]] = {}
        # (position, event); position (rv, 0) for changes, (rv, n > 0) for raw emitted events
        self._history: list[tuple[tuple[int, int], dict[str, Any]]] = []
        self._emitted = 0
        self._oldest = 1  # watches from rv < oldest are too old
        self._generation = 0
        self.watch_calls: list[str] = []
        self.list_calls = 0

    def put(self, name: str, data: str = "") -> dict[str, Any]:
        with self._cond:
            self._rv += 1
            key = f"ns/{name}"
            kind = "MODIFIED" if key in self._objects else "ADDED"
            item = obj(name, self._rv, data=data)
            self._objects[key] = item
            self._history.append(((self._rv, 0), {"type": kind, "object": item}))
            self._cond.notify_all()
            return item

    def emit(self, event: dict[str, Any]) -> None:
        """Send a raw event as is (e.g. a same-resourceVersion replay, a BOOKMARK)."""
        with self._cond:
            self._emitted += 1
            self._history.append(((self._rv, self._emitted), event))
            self._cond.notify_all()

    def delete(self, name: str) -> None:
        with self._cond:
            self._rv += 1
            item = self._objects.pop(f"ns/{name}")
            gone = obj(name, self._rv, data=item["data"])
            self._history.append(((self._rv, 0), {"type": "DELETED", "object": gone}))
            self._cond.notify_all()

    def delete_quietly(self, name: str) -> None:
        """Delete without a retained event, as if it happened during a compacted gap."""
        with self._cond:
            self._rv += 1
            self._objects.pop(f"ns/{name}")

    def compact(self) -> None:
        with self._cond:
            self._history.clear()
            self._oldest = self._rv + 1
            self._generation += 1
            self._cond.notify_all()

    def break_watches(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
        with self._cond:
            self.list_calls += 1
            items = list(self._objects.values())
            return [transform(i) for i in items] if transform else items, str(self._rv)

    def watch(self, *, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        with self._cond:
            self.watch_calls.append(resource_version)
            if int(resource_version) + 1 < self._oldest:
                raise ResourceExpired(resource_version)
        return self._stream(int(resource_version), timeout_seconds)

    def _stream(self, since: int, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        deadline = time.monotonic() + timeout_seconds
        with self._cond:
            generation = self._generation
        last = (since, 0)
        while True:
            with self._cond:
                pending = [(pos, e) for pos, e in self._history if pos > last]
                if not pending:
                    if self._generation != generation:
                        raise ConnectionError("connection reset by peer")
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    self._cond.wait(remaining)
                    continue
                pos, event = pending[0]
                if event.get("type") == "ERROR":
                    # An ERROR ends one stream; it is not part of the replayable history.
                    self._history.remove((pos, event))
            last = pos
            yield event


def start(
    source: MemoryListWatch,
    stop: threading.Event,
    *,
    timeout_seconds: int = 300,
    on_list: Callable[[], None] | None = None,
) -> tuple[Informer, Recorder, threading.Thread]:
    recorder = Recorder()
    informer = Informer(
        name="mem",
        list_watch=source,
        handler=recorder,
        watch_timeout_seconds=timeout_seconds,
        on_list=on_list,
    )
    thread = informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    return informer, recorder, thread


def test_namespaced_key() -> None:
    assert namespaced_key(obj("a", 1, namespace="team")) == "team/a"
    assert namespaced_key({"metadata": {"name": "cluster-wide"}}) == "cluster-wide"


def test_initial_list_then_live_changes_in_order(stop: threading.Event) -> None:
    source = MemoryListWatch()
    source.put("a")
    source.put("b")
    informer, recorder, _ = start(source, stop)
    assert sorted(recorder.events) == [
        ("ADDED", "ns/a", "2", True),
        ("ADDED", "ns/b", "3", True),
    ]
    assert source.watch_calls == ["3"]  # the watch starts at the list's resourceVersion

    source.put("a", data="x")
    source.put("c")
    source.delete("b")
    wait_for(lambda: len(recorder.events) == 5)
    assert recorder.events[2:] == [
        ("MODIFIED", "ns/a", "4", False),
        ("ADDED", "ns/c", "5", False),
        ("DELETED", "ns/b", "6", False),
    ]
    assert informer.keys() == ["ns/a", "ns/c"]
    cached = informer.get("ns/a")
    assert cached is not None and cached["data"] == "x"
    assert informer.get("ns/b") is None
    assert {o["metadata"]["name"] for o in informer.list_cached()} == {"a", "c"}


def test_same_resource_version_update_and_bookmark_deliver_nothing(stop: threading.Event) -> None:
    source = MemoryListWatch()
    item = source.put("a")
    informer, recorder, _ = start(source, stop)
    source.emit({"type": "MODIFIED", "object": item})
    source.emit({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "40"}}})
    wait_for(lambda: informer.resource_version == "40")
    source.put("b")  # a change after them, as a marker that they have been processed
    wait_for(lambda: len(recorder.events) == 2)
    assert recorder.events == [("ADDED", "ns/a", "2", True), ("ADDED", "ns/b", "3", False)]


def test_dropped_watch_resumes_from_last_resource_version(stop: threading.Event) -> None:
    source = MemoryListWatch()
    source.put("a")
    informer, recorder, _ = start(source, stop)
    source.put("a", data="1")
    wait_for(lambda: len(recorder.events) == 2)
    source.break_watches()
    wait_for(lambda: len(source.watch_calls) == 2)  # reconnected
    source.put("a", data="2")
    wait_for(lambda: len(recorder.events) == 3)
    assert recorder.events == [
        ("ADDED", "ns/a", "2", True),
        ("MODIFIED", "ns/a", "3", False),
        ("MODIFIED", "ns/a", "4", False),
    ]
    assert source.list_calls == 1  # resumed, not relisted
    assert source.watch_calls[:2] == ["2", "3"]
    assert informer.relists == 0


def test_server_ending_the_stream_resumes_without_redelivery(stop: threading.Event) -> None:
    source = MemoryListWatch()
    source.put("a")
    _, recorder, _ = start(source, stop, timeout_seconds=1)
    source.put("b")
    wait_for(lambda: len(source.watch_calls) >= 3)  # two timeouts passed
    source.put("c")
    wait_for(lambda: len(recorder.events) == 3)
    assert [e[1] for e in recorder.events] == ["ns/a", "ns/b", "ns/c"]
    assert source.list_calls == 1


def test_expired_resource_version_relists_and_diffs(stop: threading.Event) -> None:
    source = MemoryListWatch()
    source.put("keep")
    source.put("change")
    source.put("vanish")
    lists: list[int] = []
    informer, recorder, _ = start(source, stop, on_list=lambda: lists.append(1))
    source.put("change", data="new")
    source.put("new")
    source.delete_quietly("vanish")  # no event: only a relist can notice
    source.compact()  # ends the open stream; resuming from any rv seen so far is too old
    wait_for(lambda: informer.relists == 1 and len(recorder.events) >= 6)
    later = recorder.events[3:]
    # The live stream may have delivered the first two changes before the compaction;
    # whatever it missed, the relist's diff delivers, and the vanished object only it can.
    assert ("DELETED", "ns/vanish", "4", True) in later
    assert {e[1] for e in later} == {"ns/change", "ns/new", "ns/vanish"}
    assert len(later) == 3
    assert sorted(informer.keys()) == ["ns/change", "ns/keep", "ns/new"]
    changed = informer.get("ns/change")
    assert changed is not None and changed["data"] == "new"
    assert len(lists) == 2
    assert informer.relists == 1


def test_error_410_event_relists(stop: threading.Event) -> None:
    source = MemoryListWatch()
    source.put("a")
    informer, recorder, _ = start(source, stop)
    source.delete_quietly("a")
    source.emit({"type": "ERROR", "object": {"kind": "Status", "code": 410, "metadata": {}}})
    wait_for(lambda: informer.relists == 1)
    wait_for(lambda: len(recorder.events) == 2)
    assert recorder.events[1] == ("DELETED", "ns/a", "2", True)


def test_handler_errors_do_not_stop_the_informer(stop: threading.Event) -> None:
    source = MemoryListWatch()
    seen: list[str] = []

    def handler(
        event_type: str, old: dict[str, Any] | None, new: dict[str, Any] | None, relist: bool
    ) -> None:
        assert new is not None
        seen.append(new["metadata"]["name"])
        if new["metadata"]["name"] == "bad":
            raise RuntimeError("boom")

    informer = Informer(name="mem", list_watch=source, handler=handler)
    informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    source.put("bad")
    source.put("good")
    wait_for(lambda: seen == ["bad", "good"])


def test_list_failures_are_retried(stop: threading.Event) -> None:
    class Flaky(MemoryListWatch):
        def __init__(self) -> None:
            super().__init__()
            self.failures = 1

        def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
            if self.failures:
                self.failures -= 1
                raise ConnectionError("refused")
            return super().list(transform)

    source = Flaky()
    source.put("a")
    informer = Informer(name="flaky", list_watch=source, handler=Recorder())
    assert not informer.has_synced()
    informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    assert informer.keys() == ["ns/a"]


class RecordingStop(threading.Event):
    """A stop flag whose timed waits (the informer's backoff) are recorded, not waited."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            return super().wait()
        self.waits.append(timeout)
        return self.is_set()


def test_retries_back_off_to_the_cap_and_start_over_after_a_success() -> None:
    """A source that keeps failing is retried at waits that grow to at most 30 s (full
    jitter: anywhere below each ceiling); once a list succeeds, the next failure is
    retried quickly again."""

    class Down(MemoryListWatch):
        def __init__(self, failures: int) -> None:
            super().__init__()
            self.failures = failures

        def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
            if self.failures:
                self.failures -= 1
                raise ConnectionError("refused")
            return super().list(transform)

    source = Down(failures=12)
    source.put("a")
    stop = RecordingStop()
    informer = Informer(name="down", list_watch=source, handler=Recorder())
    try:
        informer.start(stop)
        assert informer.wait_for_sync(DEADLINE)
        assert len(stop.waits) == 12
        ceilings = [0.5, 1, 2, 4, 8, 16] + [30] * 6
        assert all(0.0 <= w <= c for w, c in zip(stop.waits, ceilings, strict=True))
        source.break_watches()
        wait_for(lambda: len(stop.waits) == 13)
        assert stop.waits[12] <= 0.5  # the successful list started the count over
    finally:
        stop.set()


def test_a_broken_watch_reopens_after_a_wait_from_its_reconnect_window() -> None:
    """A fleet-wide server (the hub) loses every agent's watch at once when a replica dies:
    the informer given a wide `reconnect` window re-opens within it, never on the list
    back-off's half second, and a refused re-open widens the next window."""
    random.seed(20261129)  # the draws below are the informer thread's only ones
    source = MemoryListWatch()
    source.put("a")
    stop = RecordingStop()
    window = Backoff(base=100.0, cap=400.0)
    informer = Informer(name="hub", list_watch=source, handler=Recorder(), reconnect=window)
    try:
        informer.start(stop)
        assert informer.wait_for_sync(DEADLINE)
        source.put("a", data="1")
        wait_for(lambda: informer.resource_version == "3")
        source.break_watches()
        wait_for(lambda: len(stop.waits) == 1)
        # Full jitter over the first window: with this seed, well past half a second.
        assert 0.5 < stop.waits[0] <= 100.0
        assert source.watch_calls[-1] == "3"  # resumed, not relisted
        assert source.list_calls == 1
    finally:
        stop.set()


def test_a_watch_ended_with_503_waits_at_least_its_retry_after() -> None:
    source = MemoryListWatch()
    source.put("a")
    stop = RecordingStop()
    informer = Informer(
        name="hub", list_watch=source, handler=Recorder(), reconnect=Backoff(base=0.1, cap=1.0)
    )
    try:
        informer.start(stop)
        assert informer.wait_for_sync(DEADLINE)
        source.emit(
            {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "code": 503,
                    "message": "database unavailable",
                    "details": {"retryAfterSeconds": 7},
                },
            }
        )
        wait_for(lambda: len(stop.waits) == 1)
        assert stop.waits[0] >= 7.0
        assert source.list_calls == 1  # an outage is not a 410: resumed, not relisted
    finally:
        stop.set()


def test_each_watch_asks_for_a_timeout_drawn_between_once_and_twice_the_setting(
    stop: threading.Event,
) -> None:
    """Watches opened together must not all end together (a wave of re-opens every T)."""

    class Timed(MemoryListWatch):
        def __init__(self) -> None:
            super().__init__()
            self.timeouts: list[int] = []

        def watch(
            self, *, resource_version: str, timeout_seconds: int
        ) -> Iterator[dict[str, Any]]:
            self.timeouts.append(timeout_seconds)
            return super().watch(resource_version=resource_version, timeout_seconds=0)

    source = Timed()
    source.put("a")
    start(source, stop, timeout_seconds=100)
    wait_for(lambda: len(source.timeouts) >= 20)
    assert all(100 <= t < 200 for t in source.timeouts), source.timeouts
    assert len(set(source.timeouts)) > 1


def test_the_agent_reopens_its_hub_watches_over_a_wider_window_than_its_kube_watches() -> None:
    assert HUB_RECONNECT.ceiling(0) > BACKOFF.ceiling(0)
    assert HUB_RECONNECT.cap >= BACKOFF.cap


def test_stop_ends_run(stop: threading.Event) -> None:
    source = MemoryListWatch()
    _, _, thread = start(source, stop)
    stop.set()
    source.break_watches()  # a plain generator stream cannot be interrupted; end it
    thread.join(DEADLINE)
    assert not thread.is_alive()


class CountingTransform:
    """Drops `data` (what a transform prunes) and counts the objects it was given."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, item: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(namespaced_key(item))
        return {"metadata": item["metadata"]}


def test_transform_applies_to_listed_and_watched_objects(stop: threading.Event) -> None:
    source = MemoryListWatch()
    source.put("listed", data="x" * 1000)
    transform = CountingTransform()
    received: list[dict[str, Any] | None] = []
    informer = Informer(
        name="mem",
        list_watch=source,
        handler=lambda _type, _old, new, _relist: received.append(new),
        transform=transform,
    )
    informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    source.put("watched", data="y" * 1000)
    wait_for(lambda: informer.get("ns/watched") is not None)
    for key in ("ns/listed", "ns/watched"):
        cached = informer.get(key)
        assert cached is not None and "data" not in cached
    # The handler is given what the cache holds, not the raw object.
    assert all(new is not None and "data" not in new for new in received)
    assert transform.seen == ["ns/listed", "ns/watched"]


def test_relist_keeps_unchanged_cached_objects_without_transforming_them(
    stop: threading.Event,
) -> None:
    source = MemoryListWatch()
    source.put("same")
    source.put("change")
    source.put("gone")
    transform = CountingTransform()
    informer = Informer(name="mem", list_watch=source, handler=Recorder(), transform=transform)
    informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    before = informer.get("ns/same")
    source.put("change", data="new")
    source.delete_quietly("gone")  # leaves the informer's resourceVersion behind the history
    source.compact()
    wait_for(lambda: informer.relists == 1 and informer.get("ns/gone") is None)
    # "change" was transformed once more, by the watch or by the relist (not by both).
    assert transform.seen.count("ns/change") == 2
    # The unchanged object is the very one cached before: during the relist there was one
    # copy of it, not the old and a freshly decoded one.
    assert informer.get("ns/same") is before
    assert transform.seen.count("ns/same") == 1
