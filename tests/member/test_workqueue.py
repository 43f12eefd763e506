"""Work queue and rate limiter: the scheduling promises of docs/reference.md#export-path (live not
starved)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from member.ratelimit import ExponentialBackoff, RateLimiter, TokenBucket
from member.workqueue import WorkQueue, WorkQueueMetrics, run_workers

DEADLINE = 30.0


def wait_for(condition: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met within the deadline")
        time.sleep(0.01)


def sample(registry: CollectorRegistry, name: str, queue: str) -> float:
    value = registry.get_sample_value(name, {"name": queue})
    return 0.0 if value is None else value


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- rate limiter ---------------------------------------------------------------------------


def test_backoff_doubles_from_5ms_and_caps_at_1000s() -> None:
    backoff = ExponentialBackoff()
    delays = [backoff.when("ns/a") for _ in range(30)]
    expected = [min(0.005 * 2**n, 1000.0) for n in range(30)]
    assert delays == pytest.approx(expected)
    assert delays[-1] == 1000.0
    assert backoff.num_requeues("ns/a") == 30
    # A key failing for ever never overflows.
    for _ in range(2000):
        backoff.when("ns/a")
    assert backoff.when("ns/a") == 1000.0


def test_backoff_is_per_key_and_forget_resets() -> None:
    limiter = RateLimiter(clock=FakeClock())
    assert limiter.when("ns/a") == pytest.approx(0.005)
    assert limiter.when("ns/a") == pytest.approx(0.010)
    assert limiter.when("ns/b") == pytest.approx(0.005)
    assert limiter.num_requeues("ns/a") == 2
    limiter.forget("ns/a")
    assert limiter.num_requeues("ns/a") == 0
    assert limiter.when("ns/a") == pytest.approx(0.005)


def test_token_bucket_allows_burst_then_spaces_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=100, clock=clock)
    assert [bucket.reserve() for _ in range(100)] == [0.0] * 100
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)
    clock.now += 10.0  # refills, but never beyond the burst
    assert [bucket.reserve() for _ in range(98)] == [0.0] * 98


def test_rate_limiter_answers_the_larger_of_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter = RateLimiter(qps=10, burst=1, clock=clock)
    assert limiter.when("ns/a") == pytest.approx(0.005)  # token available: backoff decides
    assert limiter.when("ns/b") == pytest.approx(0.1)  # bucket empty: the bucket decides
    clock.now += 100.0
    for _ in range(15):
        delay = limiter.when("ns/c")
        clock.now += delay  # waiting out each delay refills the bucket: backoff decides
    assert delay == pytest.approx(0.005 * 2**14)


# -- queue ----------------------------------------------------------------------------------


def test_adds_of_a_waiting_key_collapse() -> None:
    queue = WorkQueue(name="t")
    for _ in range(5):
        queue.add("ns/a")
    queue.add("ns/b")
    queue.add("ns/a", bulk=True)
    assert len(queue) == 2
    assert queue.get(timeout=1) == "ns/a"
    assert queue.get(timeout=1) == "ns/b"
    assert queue.get(timeout=0.05) is None


def test_key_added_while_processing_is_requeued_on_done() -> None:
    queue = WorkQueue(name="t")
    queue.add("ns/a")
    assert queue.get(timeout=1) == "ns/a"
    queue.add("ns/a")
    queue.add("ns/a")
    # Marked dirty, not queued: no second worker can take it while the first holds it.
    assert len(queue) == 0
    assert queue.get(timeout=0.05) is None
    queue.done("ns/a")
    assert len(queue) == 1
    assert queue.get(timeout=1) == "ns/a"
    queue.done("ns/a")
    assert queue.get(timeout=0.05) is None


def test_bulk_lane_never_starves_a_live_add() -> None:
    queue = WorkQueue(name="t")
    for i in range(10_000):
        queue.add(f"bulk/{i}", bulk=True)
    queue.add("live/fresh")
    assert queue.get(timeout=1) == "live/fresh"
    assert queue.get(timeout=1) == "bulk/0"


def test_live_add_promotes_a_key_waiting_in_the_bulk_lane() -> None:
    queue = WorkQueue(name="t")
    for i in range(1000):
        queue.add(f"ns/{i}", bulk=True)
    queue.add("ns/999")
    assert len(queue) == 1000
    assert queue.bulk_len() == 999
    assert queue.get(timeout=1) == "ns/999"
    assert queue.get(timeout=1) == "ns/0"


def test_live_add_of_a_held_bulk_key_requeues_it_live() -> None:
    queue = WorkQueue(name="t")
    queue.add("ns/a", bulk=True)
    queue.add("ns/b", bulk=True)
    assert queue.get(timeout=1) == "ns/a"
    queue.add("ns/a", bulk=True)
    queue.add("ns/a")  # promoted while held: done() must put it in the live lane
    queue.done("ns/a")
    assert queue.bulk_len() == 1
    assert queue.get(timeout=1) == "ns/a"


def test_add_after_delivers_once_due() -> None:
    queue = WorkQueue(name="t")
    queue.add_after("ns/a", 0.05)
    queue.add_after("ns/a", 30)  # a later due time does not postpone the earlier one
    assert len(queue) == 0
    assert queue.get(timeout=DEADLINE) == "ns/a"
    queue.shutdown()


def test_shutdown_wakes_getters_and_ignores_adds() -> None:
    queue = WorkQueue(name="t")
    got: list[str | None] = []
    getter = threading.Thread(target=lambda: got.append(queue.get()))
    getter.start()
    time.sleep(0.05)
    queue.shutdown()
    getter.join(DEADLINE)
    assert got == [None]
    queue.add("ns/a")
    assert len(queue) == 0
    assert queue.shutting_down


# -- workers --------------------------------------------------------------------------------


def test_a_key_is_never_held_by_two_workers() -> None:
    queue = WorkQueue(name="t")
    stop = threading.Event()
    lock = threading.Lock()
    in_process: set[str] = set()
    overlaps: list[str] = []
    processed: dict[str, int] = {}

    def process(key: str) -> None:
        with lock:
            if key in in_process:
                overlaps.append(key)
            in_process.add(key)
        time.sleep(0.001)
        with lock:
            in_process.discard(key)
            processed[key] = processed.get(key, 0) + 1

    threads = run_workers(queue, process=process, workers=8, stop=stop)
    keys = [f"ns/{i}" for i in range(5)]

    def producer() -> None:
        for n in range(400):
            queue.add(keys[n % len(keys)], bulk=n % 3 == 0)

    producers = [threading.Thread(target=producer) for _ in range(4)]
    for p in producers:
        p.start()
    for p in producers:
        p.join()
    wait_for(lambda: len(queue) == 0 and queue.processing() == 0)
    stop.set()
    for t in threads:
        t.join(DEADLINE)
    assert overlaps == []
    assert set(processed) == set(keys)


def test_failures_back_off_then_drop_after_15_in_a_row() -> None:
    registry = CollectorRegistry()
    metrics = WorkQueueMetrics(registry=registry)
    # No overall bucket delay, tiny backoff: the test checks counts, not time.
    limiter = RateLimiter(base_delay=0.0001, max_delay=0.001, qps=1e6, burst=1000)
    queue = WorkQueue(name="drops", rate_limiter=limiter, metrics=metrics)
    stop = threading.Event()
    attempts: list[str] = []
    dropped: list[tuple[str, str]] = []

    def process(key: str) -> None:
        attempts.append(key)
        raise RuntimeError("hub says no")

    threads = run_workers(
        queue,
        process=process,
        workers=2,
        stop=stop,
        on_drop=lambda key, exc: dropped.append((key, str(exc))),
    )
    queue.add("ns/bad")
    wait_for(lambda: len(dropped) == 1)
    time.sleep(0.1)  # give a wrongly scheduled 16th attempt the chance to show
    assert attempts == ["ns/bad"] * 15
    assert dropped == [("ns/bad", "hub says no")]
    assert queue.num_requeues("ns/bad") == 0  # forgotten: its next change starts afresh
    assert sample(registry, "mcsync_workqueue_drops_total", "drops") == 1.0
    assert sample(registry, "workqueue_retries_total", "drops") == 14.0

    # It comes back on its next change, with a fresh budget.
    queue.add("ns/bad")
    wait_for(lambda: len(dropped) == 2)
    assert len(attempts) == 30
    stop.set()
    for t in threads:
        t.join(DEADLINE)


def test_success_forgets_failures() -> None:
    limiter = RateLimiter(base_delay=0.0001, max_delay=0.001, qps=1e6, burst=1000)
    queue = WorkQueue(name="t", rate_limiter=limiter)
    stop = threading.Event()
    calls: list[str] = []
    done = threading.Event()

    def process(key: str) -> None:
        calls.append(key)
        if len(calls) < 3:
            raise RuntimeError("not yet")
        done.set()

    threads = run_workers(queue, process=process, workers=1, stop=stop)
    queue.add("ns/a")
    assert done.wait(DEADLINE)
    wait_for(lambda: queue.processing() == 0)
    assert queue.num_requeues("ns/a") == 0
    stop.set()
    for t in threads:
        t.join(DEADLINE)


def test_stop_lets_the_key_in_hand_finish_and_drains_nothing_else() -> None:
    queue = WorkQueue(name="t")
    stop = threading.Event()
    started = threading.Event()
    release = threading.Event()
    finished: list[str] = []

    def process(key: str) -> None:
        started.set()
        release.wait(DEADLINE)
        finished.append(key)

    threads = run_workers(queue, process=process, workers=1, stop=stop)
    queue.add("ns/first")
    assert started.wait(DEADLINE)
    for i in range(10):
        queue.add(f"ns/later-{i}")
    stop.set()
    release.set()
    for t in threads:
        t.join(DEADLINE)
        assert not t.is_alive()
    assert finished == ["ns/first"]
    assert len(queue) == 10


def test_queue_shutdown_stops_workers_after_the_key_in_hand() -> None:
    queue = WorkQueue(name="t")
    stop = threading.Event()
    started = threading.Event()
    release = threading.Event()
    finished: list[str] = []

    def process(key: str) -> None:
        started.set()
        release.wait(DEADLINE)
        finished.append(key)

    threads = run_workers(queue, process=process, workers=1, stop=stop)
    queue.add("ns/first")
    assert started.wait(DEADLINE)
    queue.add("ns/second")
    queue.shutdown()
    release.set()
    for t in threads:
        t.join(DEADLINE)
        assert not t.is_alive()
    assert finished == ["ns/first"]  # the key in hand finished; the waiting one was not taken
    assert not stop.is_set()  # the queue's shutdown alone ended the workers


def test_metrics_count_adds_depth_and_durations() -> None:
    registry = CollectorRegistry()
    queue = WorkQueue(name="m", metrics=WorkQueueMetrics(registry=registry))
    queue.add("ns/a")
    queue.add("ns/a")
    queue.add("ns/b", bulk=True)
    assert sample(registry, "workqueue_adds_total", "m") == 2.0
    assert sample(registry, "workqueue_depth", "m") == 2.0
    key = queue.get(timeout=1)
    assert key == "ns/a"
    assert sample(registry, "workqueue_depth", "m") == 1.0
    assert sample(registry, "workqueue_longest_running_processor_seconds", "m") >= 0.0
    queue.done(key)
    assert sample(registry, "workqueue_queue_duration_seconds_count", "m") == 1.0
    assert sample(registry, "workqueue_work_duration_seconds_count", "m") == 1.0
    assert sample(registry, "workqueue_longest_running_processor_seconds", "m") == 0.0
