"""`shared.backoff`: the one backoff policy (growth, cap, full jitter) and `Retry-After`."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from shared.backoff import Backoff, Retries, retry_after

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def test_ceiling_doubles_from_base_to_the_cap() -> None:
    policy = Backoff(base=0.5, cap=30.0)
    assert [policy.ceiling(n) for n in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


def test_ceiling_of_a_loop_that_fails_for_days_is_the_cap() -> None:
    assert Backoff(base=0.005, cap=1000.0).ceiling(100_000) == 1000.0


def test_full_jitter_spans_zero_to_the_ceiling() -> None:
    """Full jitter, not `[ceiling/2, ceiling]` nor ±20 %: waits fall anywhere below the
    ceiling, so clients that failed together come back spread over the whole window."""
    policy = Backoff(base=1.0, cap=8.0)
    rng = random.Random(17)
    for attempt in (0, 2, 5):
        ceiling = policy.ceiling(attempt)
        draws = [policy.delay(attempt, rng=rng) for _ in range(500)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert min(draws) < 0.1 * ceiling
        assert max(draws) > 0.9 * ceiling


def test_the_same_seed_gives_the_same_waits() -> None:
    policy = Backoff(base=0.2, cap=5.0)
    first = [policy.delay(n, rng=random.Random(3)) for n in range(6)]
    again = [policy.delay(n, rng=random.Random(3)) for n in range(6)]
    assert first == again


def test_wait_is_never_sooner_than_retry_after_nor_than_our_own_delay() -> None:
    policy = Backoff(base=1.0, cap=4.0)
    assert policy.wait(0, retry_after=7.0, rng=random.Random(1)) == 7.0
    own = policy.delay(2, rng=random.Random(1))
    assert policy.wait(2, retry_after=0.0, rng=random.Random(1)) == own
    assert policy.wait(2, retry_after=None, rng=random.Random(1)) == own


def test_retries_grow_until_reset() -> None:
    policy = Backoff(base=1.0, cap=4.0)
    retries = Retries(policy, rng=random.Random(5))
    waits = [retries.next() for _ in range(5)]
    assert retries.failures == 5
    assert all(w <= policy.ceiling(n) for n, w in enumerate(waits))
    retries.reset()
    assert retries.failures == 0
    assert retries.next() <= 1.0  # back to the first ceiling
    assert retries.next(retry_after=9.0) == 9.0


@pytest.mark.parametrize(
    ("base", "cap"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0), (1.0, float("inf")), (float("nan"), 1.0)]
)
def test_a_policy_that_makes_no_sense_is_refused(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(base=base, cap=cap)


def test_attempts_count_from_zero() -> None:
    with pytest.raises(ValueError, match="from 0"):
        Backoff(base=1.0, cap=2.0).ceiling(-1)


# -- Retry-After -----------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [("0", 0.0), ("120", 120.0), (" 7 ", 7.0)])
def test_delta_seconds(value: str, seconds: float) -> None:
    assert retry_after(value, NOW) == seconds


def test_delta_seconds_beyond_the_maximum_are_clamped() -> None:
    assert retry_after("3600", NOW, maximum=15.0) == 15.0
    assert retry_after("9" * 5000, NOW, maximum=15.0) == 15.0


@pytest.mark.parametrize(
    "form",
    [
        "%a, %d %b %Y %H:%M:%S GMT",  # IMF-fixdate, what servers send
        "%A, %d-%b-%y %H:%M:%S GMT",  # obsolete RFC 850
        "%a %b %d %H:%M:%S %Y",  # obsolete asctime (no zone: GMT)
    ],
)
def test_http_date_in_each_form_a_recipient_must_accept(form: str) -> None:
    assert retry_after((NOW + timedelta(seconds=42)).strftime(form), NOW) == 42.0


def test_http_date_in_the_past_means_now() -> None:
    assert retry_after("Sun, 06 Nov 1994 08:49:37 GMT", NOW) == 0.0


def test_http_date_far_ahead_is_clamped() -> None:
    assert retry_after("Fri, 01 Jan 2100 00:00:00 GMT", NOW, maximum=15.0) == 15.0


def test_http_date_without_now_reads_the_clock() -> None:
    ahead = datetime.now(UTC) + timedelta(hours=1)
    answer = retry_after(ahead.strftime("%a, %d %b %Y %H:%M:%S GMT"), maximum=7200.0)
    assert answer is not None and 3500.0 < answer <= 3600.0


@pytest.mark.parametrize(
    "value",
    [None, "", "   ", "soon", "1.5", "-3", "+3", "\uff15", "Sun, 31 Feb 2026 08:49:37 GMT"],
)
def test_unreadable_values_are_ignored(value: str | None) -> None:
    assert retry_after(value, NOW) is None


def test_a_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        retry_after("Sun, 06 Nov 1994 08:49:37 GMT", datetime(2026, 1, 1))
