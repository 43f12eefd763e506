"""The agent's work queue: client-go semantics, plus a low-priority lane for bulk work.

Informers say *which* object changed by adding its key ("namespace/name"); workers take keys
and reconcile the object's current state. The queue promises what docs/reference.md#export-path
asks:

* **dedupe** — a key added while it is already waiting collapses into the waiting entry;
* **one worker per key** — a key added while a worker holds it is only marked dirty, and goes
  back into the queue when that worker calls `done()`; so two workers never hold one key;
* **retries** — `add_rate_limited()` re-adds a key after the delay its `RateLimiter` answers
  (per-key exponential backoff under an overall token bucket), `forget()` resets it;
* **two lanes** — `add(key, bulk=True)` (relists, startup repair) waits in a bulk lane that
  `get()` serves only when the live lane is empty, and a live add of a key waiting in the bulk
  lane moves it to the live lane. A startup repair of 10,000 keys therefore never delays a
  fresh change by more than the key each worker has in hand (docs/reference.md#export-path).

Why not `queue.Queue`: it neither dedupes nor knows which keys are in process. The structure
follows client-go's `workqueue.Type` (queue + dirty set + processing set under one lock) so
its reasoning carries over. Metrics use client-go's names so existing dashboards work.

`run_workers()` is the loop every controller needs around a queue: get, process, retry or
drop, done. Stopping is by a `threading.Event`; a worker finishes the key in hand and exits,
and nothing else is drained (the keys left behind come back on the next start's relist).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from member.ratelimit import RateLimiter

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "RateLimiter",
    "WorkQueue",
    "WorkQueueMetrics",
    "run_workers",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 15
# How often an idle worker looks at its stop event. Workers are stopped by an Event that the
# queue does not know about (a leader that steps down stops its workers but keeps the queue).
_WORKER_POLL_SECONDS = 0.2
# client-go's buckets for queue and work durations: 10 ns … 10 s, one per decade.
_DURATION_BUCKETS = tuple(1e-8 * 10**i for i in range(10))


class WorkQueueMetrics:
    """client-go's work queue metrics (label `name`), plus `mcsync_workqueue_drops_total`.

    One instance serves any number of queues; each queue labels its samples with its name.
    Registered in the registry passed in, never in prometheus_client's global default, so
    tests and several agents in one process do not collide.
    """

    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.depth = Gauge(
            "workqueue_depth", "Current depth of the work queue.", ["name"], registry=registry
        )
        self.adds = Counter(
            "workqueue_adds_total",
            "Keys added to the work queue (collapsed duplicates are not counted).",
            ["name"],
            registry=registry,
        )
        self.retries = Counter(
            "workqueue_retries_total",
            "Keys re-added after a failure (rate limited).",
            ["name"],
            registry=registry,
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long a key waits in the queue before a worker takes it.",
            ["name"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long a worker holds a key.",
            ["name"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress that has not finished (sum over keys held).",
            ["name"],
            registry=registry,
        )
        self.longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-held key has been held.",
            ["name"],
            registry=registry,
        )
        self.drops = Counter(
            "mcsync_workqueue_drops_total",
            "Keys dropped after failing too many times in a row (they return on their next "
            "change or relist).",
            ["name"],
            registry=registry,
        )


class WorkQueue:
    """A deduplicating, two-lane, rate-limited queue of string keys. Thread-safe."""

    def __init__(
        self,
        *,
        name: str,
        rate_limiter: RateLimiter | None = None,
        metrics: WorkQueueMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._rate_limiter = rate_limiter if rate_limiter is not None else RateLimiter()
        self._metrics = metrics
        self._clock = clock

        # One lock, two conditions: workers wait for keys, the delay thread for due times.
        # Separate conditions so a notify meant for a worker can never wake only the delay
        # thread (and leave the key unserved).
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._delay_wakeup = threading.Condition(self._lock)

        # OrderedDicts as FIFO sets: O(1) append, pop-left and removal from the middle
        # (needed to promote a key from the bulk lane).
        self._live: OrderedDict[str, None] = OrderedDict()
        self._bulk: OrderedDict[str, None] = OrderedDict()
        # Keys that need processing, with their lane (True = bulk). A key is dirty from its
        # add until a worker takes it; a key dirty *and* processing waits for done().
        self._dirty: dict[str, bool] = {}
        self._processing: dict[str, float] = {}  # key -> when a worker took it
        self._added_at: dict[str, float] = {}  # key -> when it became dirty (queue latency)
        self._shutting_down = False

        # Delayed adds: a heap of (due, seq, key); `_due` holds each key's earliest due time so
        # that a superseded heap entry is recognised and skipped.
        self._delayed: list[tuple[float, int, str]] = []
        self._due: dict[str, float] = {}
        self._seq = itertools.count()
        self._delay_thread: threading.Thread | None = None

        if metrics is not None:
            metrics.unfinished_work.labels(name).set_function(self._unfinished_seconds)
            metrics.longest_running.labels(name).set_function(self._longest_running_seconds)
            # This queue's series exist from start at 0 (docs/reference.md#observability): a retry
            # or a drop is then an increase that `rate()`, `increase()` and an `increase(...) > 0`
            # alert see.
            metrics.depth.labels(name).set(0)
            for counter in (metrics.adds, metrics.retries, metrics.drops):
                counter.labels(name)
            metrics.queue_duration.labels(name)
            metrics.work_duration.labels(name)

    # -- adding ---------------------------------------------------------------------------

    def add(self, key: str, *, bulk: bool = False) -> None:
        """Queue `key` (live lane, or the bulk lane when `bulk`); collapses into a waiting key."""
        with self._lock:
            self._add_locked(key, bulk=bulk)

    def add_after(self, key: str, delay: float, *, bulk: bool = False) -> None:
        """Queue `key` once `delay` seconds have passed (at once when `delay` <= 0)."""
        with self._lock:
            if self._shutting_down:
                return
            if delay <= 0:
                self._add_locked(key, bulk=bulk)
                return
            due = self._clock() + delay
            current = self._due.get(key)
            if current is not None and current <= due:
                return  # already due sooner; one delayed entry per key is enough
            self._due[key] = due
            heapq.heappush(self._delayed, (due, next(self._seq), key))
            self._ensure_delay_thread()
            self._delay_wakeup.notify()

    def add_rate_limited(self, key: str) -> float:
        """Re-queue a failed key after its rate-limited delay; answers that delay (seconds)."""
        delay = self._rate_limiter.when(key)
        if self._metrics is not None:
            self._metrics.retries.labels(self.name).inc()
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """Stop tracking `key`'s failures (after a success, or when giving up on it)."""
        self._rate_limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        """How many times `key` failed since it was last forgotten."""
        return self._rate_limiter.num_requeues(key)

    def drop(self, key: str) -> None:
        """Give up on `key` after too many failures: forget its backoff and count the drop."""
        self.forget(key)
        if self._metrics is not None:
            self._metrics.drops.labels(self.name).inc()

    # -- taking ---------------------------------------------------------------------------

    def get(self, *, timeout: float | None = None) -> str | None:
        """Take the next key (live lane first); None on shutdown or when `timeout` passes.

        The caller owns the key until it calls `done(key)`.
        """
        deadline = None if timeout is None else self._clock() + timeout
        with self._lock:
            while not self._live and not self._bulk and not self._shutting_down:
                if deadline is None:
                    self._ready.wait()
                    continue
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return None
                self._ready.wait(remaining)
            if self._shutting_down:
                # Graceful shutdown drains nothing: keys still waiting are left to the next
                # start's relist, so a stopping agent does not start new work.
                return None
            lane = self._live if self._live else self._bulk
            key, _ = lane.popitem(last=False)
            del self._dirty[key]
            now = self._clock()
            self._processing[key] = now
            added_at = self._added_at.pop(key, now)
            if self._metrics is not None:
                self._metrics.queue_duration.labels(self.name).observe(max(0.0, now - added_at))
                self._metrics.depth.labels(self.name).set(len(self._live) + len(self._bulk))
            return key

    def done(self, key: str) -> None:
        """Release `key`; if it was added again meanwhile, it goes back into its lane now."""
        with self._lock:
            started = self._processing.pop(key, None)
            if started is not None and self._metrics is not None:
                self._metrics.work_duration.labels(self.name).observe(
                    max(0.0, self._clock() - started)
                )
            bulk = self._dirty.get(key)
            if bulk is not None and not self._shutting_down:
                # Re-queued only now, not at add time: that is what keeps a second worker
                # from taking a key whose first worker has not finished.
                self._enqueue_locked(key, bulk=bulk)

    # -- lifecycle ------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop handing out keys: `get()` answers None, adds are ignored. Idempotent."""
        with self._lock:
            self._shutting_down = True
            self._ready.notify_all()
            self._delay_wakeup.notify_all()

    @property
    def shutting_down(self) -> bool:
        with self._lock:
            return self._shutting_down

    def __len__(self) -> int:
        """Keys waiting in either lane (not those delayed or held by a worker)."""
        with self._lock:
            return len(self._live) + len(self._bulk)

    def bulk_len(self) -> int:
        """Keys waiting in the bulk lane."""
        with self._lock:
            return len(self._bulk)

    def processing(self) -> int:
        """Keys held by workers right now."""
        with self._lock:
            return len(self._processing)

    # -- internals (caller holds self._lock) ----------------------------------------------

    def _add_locked(self, key: str, *, bulk: bool) -> None:
        if self._shutting_down:
            return
        lane_is_bulk = self._dirty.get(key)
        if lane_is_bulk is not None:
            if lane_is_bulk and not bulk:
                # A live change to a key waiting behind a relist: promote it, or the fresh
                # change would wait for the whole bulk lane.
                self._dirty[key] = False
                if key in self._bulk:  # absent when a worker holds it: done() uses the lane
                    del self._bulk[key]
                    self._live[key] = None
                    self._ready.notify()
            return
        if self._metrics is not None:
            self._metrics.adds.labels(self.name).inc()
        self._dirty[key] = bulk
        self._added_at[key] = self._clock()
        if key in self._processing:
            return  # done() queues it; queuing now would let a second worker take it
        self._enqueue_locked(key, bulk=bulk)

    def _enqueue_locked(self, key: str, *, bulk: bool) -> None:
        (self._bulk if bulk else self._live)[key] = None
        if self._metrics is not None:
            self._metrics.depth.labels(self.name).set(len(self._live) + len(self._bulk))
        self._ready.notify()

    def _ensure_delay_thread(self) -> None:
        if self._delay_thread is None:
            self._delay_thread = threading.Thread(
                target=self._run_delayed, name=f"workqueue-{self.name}-delay", daemon=True
            )
            self._delay_thread.start()

    def _run_delayed(self) -> None:
        with self._lock:
            while not self._shutting_down:
                now = self._clock()
                while self._delayed and self._delayed[0][0] <= now:
                    due, _, key = heapq.heappop(self._delayed)
                    if self._due.get(key) != due:
                        continue  # superseded by an earlier due time for the same key
                    del self._due[key]
                    self._add_locked(key, bulk=False)
                timeout = self._delayed[0][0] - now if self._delayed else None
                self._delay_wakeup.wait(timeout)

    def _unfinished_seconds(self) -> float:
        with self._lock:
            now = self._clock()
            return sum(now - started for started in self._processing.values())

    def _longest_running_seconds(self) -> float:
        with self._lock:
            if not self._processing:
                return 0.0
            return self._clock() - min(self._processing.values())


def run_workers(
    queue: WorkQueue,
    *,
    process: Callable[[str], None],
    workers: int,
    stop: threading.Event,
    max_retries: int = DEFAULT_MAX_RETRIES,
    on_drop: Callable[[str, BaseException], None] | None = None,
) -> list[threading.Thread]:
    """Start `workers` threads that take keys from `queue` and call `process(key)`.

    Success forgets the key's failures. A raise re-queues the key rate-limited, unless that
    was its `max_retries`-th failure in a row: then it is dropped (error log, drops metric,
    `on_drop(key, exc)`). Workers exit when `stop` is set or the queue shuts down, after
    finishing the key in hand. Answers the started (daemon) threads, for joining.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    threads = []
    for index in range(workers):
        thread = threading.Thread(
            target=_worker,
            kwargs={
                "queue": queue,
                "process": process,
                "stop": stop,
                "max_retries": max_retries,
                "on_drop": on_drop,
            },
            name=f"{queue.name}-worker-{index}",
            daemon=True,
        )
        thread.start()
        threads.append(thread)
    return threads


def _worker(
    *,
    queue: WorkQueue,
    process: Callable[[str], None],
    stop: threading.Event,
    max_retries: int,
    on_drop: Callable[[str, BaseException], None] | None,
) -> None:
    while not stop.is_set():
        key = queue.get(timeout=_WORKER_POLL_SECONDS)
        if key is None:
            if queue.shutting_down:
                return
            continue
        try:
            _process_one(
                queue=queue, key=key, process=process, max_retries=max_retries, on_drop=on_drop
            )
        finally:
            queue.done(key)


def _process_one(
    *,
    queue: WorkQueue,
    key: str,
    process: Callable[[str], None],
    max_retries: int,
    on_drop: Callable[[str, BaseException], None] | None,
) -> None:
    try:
        process(key)
    except Exception as exc:
        failures = queue.num_requeues(key) + 1
        if failures < max_retries:
            delay = queue.add_rate_limited(key)
            logger.warning(
                "%s: %s failed (%d in a row), retrying in %.3fs: %s",
                queue.name,
                key,
                failures,
                delay,
                exc,
                extra={"key": key, "queue": queue.name},
            )
            return
        queue.drop(key)
        logger.error(
            "%s: dropping %s after %d failures in a row; it returns on its next change or "
            "relist: %s",
            queue.name,
            key,
            failures,
            exc,
            extra={"key": key, "queue": queue.name},
        )
        if on_drop is not None:
            try:
                on_drop(key, exc)
            except Exception:
                logger.exception("%s: on_drop failed for %s", queue.name, key)
        return
    queue.forget(key)
