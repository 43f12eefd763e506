"""The agent beats at least three times per hub TTL (docs/reference.md#failover), whatever its flag
says.

One late or lost heartbeat must never make a cluster Stale (a Stale cluster's endpoints are
withdrawn fleet-wide), so the interval in use is `--heartbeat-interval` or a third of the TTL
the hub answers, whichever is shorter, and jitter never draws a wait past that third. The
loop runs against a fake hub and a stop event that records each wait instead of sleeping.
"""

from __future__ import annotations

import logging
import random
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from member.heartbeat import BEATS_PER_TTL, HEARTBEAT_JITTER, HeartbeatLoop, VersionGate
from member.metrics import AgentMetrics
from shared.models import HeartbeatResponse, WithdrawalHold
from shared.version import __version__


class TtlHub:
    """Answers every heartbeat with `ttl` (None: a hub older than docs/reference.md#failover) and
    records them."""

    def __init__(self, ttl: float | None, *, allowed: bool = False) -> None:
        self.ttl = ttl
        self.allowed = allowed
        self.holds: list[WithdrawalHold | None] = []

    def heartbeat(
        self, *, withdrawal_held: WithdrawalHold | None = None, **_: Any
    ) -> HeartbeatResponse:
        self.holds.append(withdrawal_held)
        return HeartbeatResponse(
            hub_version=__version__,
            min_agent_version="0.0.0",
            server_time=datetime.now(UTC),
            state="Ready",
            cluster_ttl_seconds=self.ttl,
            withdrawal_allowed=self.allowed,
        )


class RecordingStop(threading.Event):
    """Records each wait; sets itself after `waits` of them, without sleeping."""

    def __init__(self, waits: int) -> None:
        super().__init__()
        self.waits: list[float] = []
        self._limit = waits

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        if len(self.waits) >= self._limit:
            self.set()
        return self.is_set()


def loop_for(hub: TtlHub, interval: float, **kwargs: Any) -> HeartbeatLoop:
    return HeartbeatLoop(
        hub=hub,
        interval=interval,
        gate=VersionGate(),  # type: ignore[arg-type]
        rng=random.Random(7),
        **kwargs,
    )


@pytest.mark.parametrize(
    ("flag", "ttl", "used"),
    [
        pytest.param(30.0, 90.0, 30.0, id="flag-is-a-third-of-the-ttl"),
        pytest.param(10.0, 90.0, 10.0, id="flag-shorter-kept"),
        pytest.param(30.0, 6.0, 2.0, id="flag-too-long-lowered"),
        pytest.param(30.0, None, 30.0, id="hub-without-ttl"),
        pytest.param(30.0, 0.0, 30.0, id="nonsense-ttl-ignored"),
        pytest.param(30.0, float("nan"), 30.0, id="nan-ttl-ignored"),
    ],
)
def test_the_interval_in_use(flag: float, ttl: float | None, used: float) -> None:
    loop = loop_for(TtlHub(ttl), flag)
    assert loop.beat_once()
    assert loop.interval == pytest.approx(used)


@pytest.mark.parametrize(("flag", "ttl"), [(30.0, 90.0), (30.0, 6.0), (2.0, 6.0), (1.0, 6.0)])
def test_no_wait_is_longer_than_a_third_of_the_ttl(flag: float, ttl: float) -> None:
    """Jitter draws beats earlier, never later than TTL/3: every TTL window holds three."""
    stop = RecordingStop(500)
    loop_for(TtlHub(ttl), flag).run(stop)
    assert max(stop.waits) <= ttl / BEATS_PER_TTL
    used = min(flag, ttl / BEATS_PER_TTL)
    assert min(stop.waits) >= used * (1 - HEARTBEAT_JITTER)
    assert min(stop.waits) < used * 0.9  # still jittered: agents started together drift apart


def test_without_a_ttl_the_jitter_is_as_before() -> None:
    stop = RecordingStop(500)
    loop_for(TtlHub(None), 30.0).run(stop)
    assert max(stop.waits) > 30.0 * 1.1


def test_a_lowered_interval_is_said_once_naming_the_flag_and_the_ttl(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = TtlHub(6.0)
    metrics = AgentMetrics(registry=CollectorRegistry())
    loop = loop_for(hub, 30.0, metrics=metrics)
    assert metrics.heartbeat_interval._value.get() == 30.0
    with caplog.at_level(logging.INFO, logger="member.heartbeat"):
        for _ in range(3):
            loop.beat_once()
    lines = [r.getMessage() for r in caplog.records if "--heartbeat-interval" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "30s" in lines[0] and "TTL 6s" in lines[0] and "every 2s" in lines[0]
    assert metrics.heartbeat_interval._value.get() == 2.0

    hub.ttl = 90.0  # the hub's TTL was raised: the flag's interval again, and no line
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="member.heartbeat"):
        loop.beat_once()
    assert loop.interval == 30.0
    assert not [r for r in caplog.records if "--heartbeat-interval" in r.getMessage()]


@pytest.mark.parametrize(
    ("held", "allowed", "calls"),
    [
        pytest.param(True, True, 1, id="hold-reported-and-allowed"),
        pytest.param(True, False, 0, id="hold-reported-not-allowed"),
        pytest.param(False, True, 0, id="allowance-without-a-hold-is-not-ours"),
    ],
)
def test_the_beat_carries_the_hold_and_hands_on_the_allowance(
    held: bool, allowed: bool, calls: int
) -> None:
    hold = WithdrawalHold(would_withdraw=12, exports=20, since=datetime.now(UTC))
    hub = TtlHub(90.0, allowed=allowed)
    allowances: list[None] = []
    loop = loop_for(
        hub,
        30.0,
        withdrawal_hold=lambda: hold if held else None,
        on_allowed=lambda: allowances.append(None),
    )
    assert loop.beat_once()
    assert hub.holds == [hold if held else None]
    assert len(allowances) == calls
