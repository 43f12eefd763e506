"""How long to wait before trying again: one backoff policy and one `Retry-After` reader.

Every retry loop of the house (the agent's hub client and informers, the CLI's watch, the
hub's change listener, feed reader and SQLite start-up) paces itself with `Backoff`, so
the formula exists once and means the same everywhere:

* **exponential growth to a cap** — attempt `n` (0 for the first retry) may wait up to
  `min(cap, base * 2**n)`: a quick first retry for a blip, patience for an outage;
* **full jitter** — the wait is drawn uniformly from `[0, that ceiling]` (AWS Architecture
  Blog, "Exponential Backoff And Jitter", 2015). A fleet that lost the hub at the same
  instant then comes back spread over the whole window instead of in waves; of the
  schemes measured there, full jitter did the least work and finished soonest. A jitter
  of ±20 % around the ceiling, or `[ceiling/2, ceiling]`, keeps the waves.

The module answers delays and never sleeps: each loop waits its own way (`time.sleep`, a
stop `Event`, `asyncio.sleep`), and a test asks for the numbers without waiting.

The default randomness is the `random` module's own generator, which Python re-seeds in a
forked child; hub workers forked from one parent therefore do not jitter in step, as they
would with a generator made here at import. Tests pass a seeded `random.Random`.

`retry_after` reads RFC 9110 §10.2.3's `Retry-After` (delay-seconds or an HTTP-date, in
any of the three date forms a recipient must accept), clamped so that a confused proxy
cannot park a worker for an hour, and ignoring what it cannot read: a bad header costs the
caller nothing but the server's hint.

Why not tenacity or stamina: the loops differ in everything but the delay (an attempt
budget, a time budget, none; a stop event; async or not; reset on success), so a retry
decorator would reshape each of them around a function to save one line of arithmetic,
and neither library reads an HTTP-date `Retry-After`. `shared` is imported by all three
programs; it stays dependency-free.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["DEFAULT_RETRY_AFTER_MAX", "Backoff", "Retries", "retry_after"]

DEFAULT_RETRY_AFTER_MAX = 300.0
"""The longest `Retry-After` believed (seconds) when a caller names no maximum."""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with a cap and full jitter; attempt 0 is the first retry."""

    base: float
    cap: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.base) and self.base > 0):
            raise ValueError(f"backoff base must be a positive number of seconds, got {self.base}")
        if not (math.isfinite(self.cap) and self.cap >= self.base):
            raise ValueError(
                f"backoff cap must be a finite number of seconds >= base {self.base}, "
                f"got {self.cap}"
            )

    def ceiling(self, attempt: int) -> float:
        """The longest wait before retry `attempt`: `min(cap, base * 2**attempt)`, unjittered."""
        if attempt < 0:
            raise ValueError(f"attempt counts from 0, got {attempt}")
        # Compare exponents first: 2**attempt overflows a float long before a loop that
        # keeps failing for days stops counting.
        if attempt >= math.log2(self.cap / self.base):
            return self.cap
        return min(self.cap, self.base * 2**attempt)

    def delay(self, attempt: int, *, rng: random.Random | None = None) -> float:
        """Full jitter: a wait drawn uniformly from `[0, ceiling(attempt)]`."""
        ceiling = self.ceiling(attempt)
        return rng.uniform(0.0, ceiling) if rng is not None else random.uniform(0.0, ceiling)

    def wait(
        self, attempt: int, *, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """The wait before retry `attempt` when the server may have said when to come back.

        Never sooner than the server asked (`retry_after`, already clamped by
        `retry_after()`), and never sooner than our own jittered delay: a fleet told the
        same `Retry-After` still comes back spread out rather than all at that second.
        """
        own = self.delay(attempt, rng=rng)
        return own if retry_after is None else max(own, retry_after)


class Retries:
    """A `Backoff` and the failures in a row so far, for a loop that retries until it
    succeeds: `next()` after each failure answers the wait, `reset()` after a success."""

    def __init__(self, policy: Backoff, *, rng: random.Random | None = None) -> None:
        self.policy = policy
        self._rng = rng
        self._failures = 0

    @property
    def failures(self) -> int:
        """Failures since the last `reset()`."""
        return self._failures

    def next(self, *, retry_after: float | None = None) -> float:
        """Count one more failure; answer how long to wait before the next try."""
        wait = self.policy.wait(self._failures, retry_after=retry_after, rng=self._rng)
        self._failures += 1
        return wait

    def reset(self) -> None:
        self._failures = 0


def retry_after(
    value: str | None,
    now: datetime | None = None,
    *,
    maximum: float = DEFAULT_RETRY_AFTER_MAX,
) -> float | None:
    """Seconds a `Retry-After` header value asks to wait, or None when there is none to obey.

    `value` is delay-seconds (`120`) or an HTTP-date (`Sun, 06 Nov 1994 08:49:37 GMT`, or
    the obsolete RFC 850 and asctime forms), read against `now` (default: this instant,
    UTC). A date in the past answers 0 (retry now); anything longer than `maximum`
    answers `maximum`. Unreadable values (`1.5`, `-3`, `soon`, a 31 February) answer None,
    so the caller falls back to its own backoff.
    """
    if maximum < 0:
        raise ValueError(f"the longest Retry-After must be >= 0 seconds, got {maximum}")
    if now is not None and now.tzinfo is None:
        raise ValueError("now must carry a timezone")
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        return min(float(text), maximum)  # float(), not int(): a 5,000-digit value is inf
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # HTTP-dates are GMT; asctime does not say so
    seconds = (moment - (now or datetime.now(UTC))).total_seconds()
    return min(max(seconds, 0.0), maximum)
