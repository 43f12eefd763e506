"""Retry rate limiters for the work queue (docs/reference.md#export-path), after client-go's
`workqueue` package.

Two independent limits are combined by taking the longer delay, as client-go's
`DefaultControllerRateLimiter` does:

* per key, exponential backoff: 5 ms, 10 ms, 20 ms, … capped at 1000 s, so one broken
  object backs off without slowing the others;
* overall, a token bucket (10 qps, burst 100), so a mass failure (the hub is down and 10,000
  keys fail at once) cannot turn into a retry storm.

They are kept apart from the queue so each can be tested by its numbers alone (no sleeps):
`when()` answers a delay, it never waits. The clock is injectable for the same reason.

The per-key backoff is not `shared.backoff.Retries`, the pacing of the house's other retry
loops, though it uses the same formula (`Backoff.ceiling`): it keeps a count per key, with
`forget` and `num_requeues`, under a lock for many workers; and it is unjittered, as
client-go's `ItemExponentialFailureRateLimiter` is. Jitter spreads the retries of many
processes that failed together; here the keys of one process are spread by the token
bucket, and docs/reference.md#export-path names the exact delays, which the tests check as numbers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from shared.backoff import Backoff

DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 1000.0
DEFAULT_QPS = 10.0
DEFAULT_BURST = 100


class ExponentialBackoff:
    """Per-key delay `base * 2**failures`, capped at `max_delay`; `forget` resets a key."""

    def __init__(
        self, *, base_delay: float = DEFAULT_BASE_DELAY, max_delay: float = DEFAULT_MAX_DELAY
    ) -> None:
        self._policy = Backoff(base=base_delay, cap=max_delay)
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()

    def when(self, key: str) -> float:
        with self._lock:
            exponent = self._failures.get(key, 0)
            self._failures[key] = exponent + 1
        return self._policy.ceiling(exponent)

    def forget(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        with self._lock:
            return self._failures.get(key, 0)


class TokenBucket:
    """Overall limit: `qps` tokens a second, at most `burst` saved; `reserve()` answers the wait.

    Like golang.org/x/time/rate's `Reserve`: each call takes a token now, going into debt when
    none is left, and answers how long the caller must wait for its token to exist.
    """

    def __init__(
        self,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if qps <= 0 or burst <= 0:
            raise ValueError("qps and burst must be positive")
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
            self._last = now
            self._tokens -= 1.0
            if self._tokens >= 0:
                return 0.0
            return -self._tokens / self._qps


class RateLimiter:
    """client-go's default controller rate limiter: max(per-key backoff, overall bucket)."""

    def __init__(
        self,
        *,
        base_delay: float = DEFAULT_BASE_DELAY,
        max_delay: float = DEFAULT_MAX_DELAY,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._backoff = ExponentialBackoff(base_delay=base_delay, max_delay=max_delay)
        self._bucket = TokenBucket(qps=qps, burst=burst, clock=clock)

    def when(self, key: str) -> float:
        """Count one more failure of `key` and answer how long to wait before retrying it."""
        return max(self._backoff.when(key), self._bucket.reserve())

    def forget(self, key: str) -> None:
        """The key succeeded (or was dropped): its next failure starts again at the base."""
        self._backoff.forget(key)

    def num_requeues(self, key: str) -> int:
        """Failures of `key` since it was last forgotten."""
        return self._backoff.num_requeues(key)
