"""The heartbeat loop's pacing: jittered waits, so agents started together drift apart.

A fleet rolled out at once would otherwise beat in lock-step, one burst of requests per
interval on the hub (member/heartbeat.py says why). The loop runs against a fake hub and a
stop event that records each wait instead of sleeping.
"""

from __future__ import annotations

import random
import statistics
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from member.heartbeat import HEARTBEAT_JITTER, HeartbeatLoop, VersionGate
from shared.models import HeartbeatResponse
from shared.version import __version__

INTERVAL = 30.0


class FakeHub:
    def __init__(self) -> None:
        self.beats = 0

    def heartbeat(self, **_: Any) -> HeartbeatResponse:
        self.beats += 1
        return HeartbeatResponse(hub_version=__version__, min_agent_version="0.0.0",
                                 server_time=datetime.now(UTC), state="Ready")


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


def run_loop(seed: int, waits: int) -> tuple[FakeHub, list[float]]:
    hub = FakeHub()
    loop = HeartbeatLoop(hub=hub, interval=INTERVAL, gate=VersionGate(),  # type: ignore[arg-type]
                         rng=random.Random(seed))
    stop = RecordingStop(waits)
    loop.run(stop)
    return hub, stop.waits


def test_one_beat_per_wait_each_within_the_jitter_and_the_mean_is_the_interval() -> None:
    hub, waits = run_loop(seed=1, waits=2000)
    assert hub.beats == len(waits) == 2000
    low, high = INTERVAL * (1 - HEARTBEAT_JITTER), INTERVAL * (1 + HEARTBEAT_JITTER)
    assert all(low <= w <= high for w in waits)
    assert min(waits) < INTERVAL * 0.85 and max(waits) > INTERVAL * 1.15  # it uses the range
    assert statistics.fmean(waits) == pytest.approx(INTERVAL, rel=0.02)


def test_agents_started_together_drift_apart() -> None:
    """Two agents beginning in the same instant: after a few beats their beats are seconds
    apart instead of coinciding for ever."""
    _, first = run_loop(seed=1, waits=10)
    _, second = run_loop(seed=2, waits=10)
    apart = abs(sum(first) - sum(second))
    assert apart > 1.0
