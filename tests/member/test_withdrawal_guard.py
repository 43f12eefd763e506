"""The mass-withdrawal guard's decision (docs/reference.md#failover), without Kubernetes or a hub.

A repair that would withdraw more than half of the cluster's exports on the hub, when it has
at least 10, withdraws none; ordinary unexports are never held; "cannot see" the
ServiceExports withdraws nothing at all; the held repair is retried at each heartbeat and
goes through once the ServiceExports are back or an admin allowed it, once. The caches
behind the guard are a fake here: a set of hub keys, a set of ServiceExport keys and a list
counter.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from member.export.withdrawalguard import MIN_EXPORTS, WithdrawalGuard, should_hold
from member.metrics import AgentMetrics

NOW = datetime(2026, 11, 28, 4, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("would_withdraw", "exports", "held"),
    [
        pytest.param(0, 0, False, id="nothing-on-the-hub"),
        pytest.param(9, 9, False, id="all-of-fewer-than-ten"),
        pytest.param(5, 10, False, id="exactly-half"),
        pytest.param(6, 10, True, id="more-than-half-of-ten"),
        pytest.param(10, 10, True, id="all-of-ten"),
        pytest.param(1, 10, False, id="one-of-ten"),
        pytest.param(50, 100, False, id="half-of-a-hundred"),
        pytest.param(51, 100, True, id="just-over-half-of-a-hundred"),
        pytest.param(10_000, 10_000, True, id="everything"),
    ],
)
def test_should_hold(would_withdraw: int, exports: int, held: bool) -> None:
    assert should_hold(would_withdraw=would_withdraw, exports=exports) is held
    assert MIN_EXPORTS == 10


class Caches:
    """The agent's caches as the guard sees them."""

    def __init__(self, hub: int, exported: int) -> None:
        self.hub = {f"shop/svc-{i}" for i in range(hub)}
        self.exports = {f"shop/svc-{i}" for i in range(exported)}
        self.lists = 0
        self.blind: str | None = None
        self.releases = 0

    def orphans(self) -> tuple[set[str], int]:
        return self.hub - self.exports, len(self.hub)

    def relist(self, *, exported: int) -> None:
        """The ServiceExport informer relisted and found `exported` of them."""
        self.exports = {f"shop/svc-{i}" for i in range(exported)}
        self.lists += 1

    def guard(
        self, metrics: AgentMetrics, *, leading: bool = True, synced: bool = True
    ) -> WithdrawalGuard:
        def release() -> None:
            self.releases += 1

        return WithdrawalGuard(
            cluster_id="east",
            orphans=self.orphans,
            generation=lambda: self.lists,
            cannot_see=lambda: self.blind,
            on_release=release,
            metrics=metrics,
            synced=lambda: synced,
            leading=lambda: leading,
            clock=lambda: NOW,
        )


def held_total(metrics: AgentMetrics) -> float:
    return float(metrics.withdrawals_held._value.get())


def held_now(metrics: AgentMetrics) -> float:
    return float(metrics.withdrawal_held_exports._value.get())


@pytest.fixture
def metrics() -> AgentMetrics:
    return AgentMetrics(registry=CollectorRegistry())


def test_the_series_exist_from_the_start_at_zero(metrics: AgentMetrics) -> None:
    Caches(hub=0, exported=0).guard(metrics)
    assert metrics.registry.get_sample_value("mcsync_agent_withdrawals_held_total") == 0
    assert metrics.registry.get_sample_value("mcsync_agent_withdrawal_held_exports") == 0


def test_a_small_repair_goes_through(metrics: AgentMetrics) -> None:
    caches = Caches(hub=20, exported=15)
    guard = caches.guard(metrics)
    guard.judge()
    assert all(guard.permit(key) for key in caches.hub - caches.exports)
    assert guard.recheck() is None
    assert held_total(metrics) == 0 and caches.releases == 0


def test_a_mass_repair_withdraws_none_logs_counts_and_reports_once(
    metrics: AgentMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    caches = Caches(hub=20, exported=4)
    guard = caches.guard(metrics)
    with caplog.at_level(logging.INFO, logger="member.export.withdrawalguard"):
        guard.judge()
        guard.judge()  # the same repair judged again (the hub relisted): one hold
        assert not any(guard.permit(key) for key in caches.hub - caches.exports)
        hold = guard.recheck()
    assert hold is not None
    assert (hold.would_withdraw, hold.exports, hold.since) == (16, 20, NOW)
    assert held_total(metrics) == 1 and held_now(metrics) == 16
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "16 of cluster east's 20 exports" in line
    assert "mcsync clusters allow-withdrawal east" in line


def test_ordinary_unexports_are_never_held_nor_counted(metrics: AgentMetrics) -> None:
    caches = Caches(hub=20, exported=20)
    guard = caches.guard(metrics)
    guard.judge()
    # 15 ServiceExports deleted while watched: 15 live DELETE events.
    for i in range(15):
        key = f"shop/svc-{i}"
        caches.exports.discard(key)
        guard.note_unexport(key)
    guard.judge()  # a hub relist meanwhile: the unexports are not a repair's share
    assert all(guard.permit(f"shop/svc-{i}") for i in range(15))
    assert guard.recheck() is None and held_total(metrics) == 0


def test_a_relist_is_judged_without_an_explicit_repair(metrics: AgentMetrics) -> None:
    """A ServiceExport relist that lost most of them: the first orphan asked about sees a new
    list generation and holds, before any on_list callback runs."""
    caches = Caches(hub=20, exported=20)
    guard = caches.guard(metrics)
    guard.judge()
    caches.relist(exported=2)
    assert not guard.permit("shop/svc-19")
    assert held_total(metrics) == 1


def test_the_held_repair_goes_through_once_the_service_exports_are_back(
    metrics: AgentMetrics,
) -> None:
    caches = Caches(hub=20, exported=4)
    guard = caches.guard(metrics)
    guard.judge()
    assert guard.recheck() is not None
    caches.relist(exported=17)  # most came back; three are still missing
    assert guard.recheck() is None
    assert caches.releases == 1  # the repair is queued again: the three are withdrawn
    assert all(guard.permit(f"shop/svc-{i}") for i in range(17, 20))
    assert held_now(metrics) == 0 and held_total(metrics) == 1
    assert guard.recheck() is None and caches.releases == 1


def test_an_allowance_lets_that_repair_through_once(metrics: AgentMetrics) -> None:
    caches = Caches(hub=20, exported=4)
    guard = caches.guard(metrics)
    guard.judge()
    assert guard.recheck() is not None
    guard.allow()
    assert caches.releases == 1 and held_now(metrics) == 0
    assert all(guard.permit(key) for key in caches.hub - caches.exports)
    assert guard.recheck() is None  # the next heartbeat clears the hub's condition
    # They are withdrawn; then a new export set, and a later mass repair is judged afresh.
    for key in caches.hub - caches.exports:
        guard.withdrawn(key)
    caches.hub = {f"shop/new-{i}" for i in range(30)}
    caches.exports = set(caches.hub)
    guard.judge()
    caches.relist(exported=0)
    caches.exports = set()
    assert not guard.permit("shop/new-1")
    assert held_total(metrics) == 2


def test_an_allowance_without_a_hold_does_nothing(metrics: AgentMetrics) -> None:
    caches = Caches(hub=20, exported=20)
    guard = caches.guard(metrics)
    guard.allow()
    assert caches.releases == 0


@pytest.mark.parametrize("orphans", [1, 16], ids=["one-orphan", "most-orphans"])
def test_cannot_see_withdraws_nothing_until_it_can(metrics: AgentMetrics, orphans: int) -> None:
    caches = Caches(hub=20, exported=20 - orphans)
    caches.blind = "serviceexports[*]"
    guard = caches.guard(metrics)
    guard.judge()
    assert not guard.permit("shop/svc-19")
    assert guard.recheck() is None  # not a mass withdrawal: nothing for an admin to allow
    assert caches.releases == 0
    caches.blind = None
    # The next heartbeat: it can see again. One orphan: the refused key is queued again and
    # goes; most of them: now judged, the repair is a mass withdrawal and held.
    hold = guard.recheck()
    assert caches.releases == (1 if orphans == 1 else 0)
    assert (hold is None) is (orphans == 1)
    assert guard.permit("shop/svc-19") is (orphans == 1)


def test_an_ordinary_unexport_goes_through_even_when_blind(metrics: AgentMetrics) -> None:
    """A live DELETE event was seen, so the ServiceExport is known to be gone."""
    caches = Caches(hub=20, exported=19)
    guard = caches.guard(metrics)
    guard.note_unexport("shop/svc-19")
    caches.blind = "serviceexports[*]"
    assert guard.permit("shop/svc-19")


def test_a_service_export_that_comes_back_drops_its_note(metrics: AgentMetrics) -> None:
    caches = Caches(hub=20, exported=20)
    guard = caches.guard(metrics)
    guard.note_unexport("shop/svc-0")
    guard.note_export("shop/svc-0")  # re-created; a later loss of it is a repair's
    caches.relist(exported=0)
    assert not guard.permit("shop/svc-0")


def test_every_replica_judges_at_its_heartbeat(metrics: AgentMetrics) -> None:
    """A standby never repairs, but it heartbeats for the same cluster: it must report the
    same hold as the leader, or its beats would clear the hub's condition."""
    caches = Caches(hub=20, exported=4)
    standby = caches.guard(metrics, leading=False)
    hold = standby.recheck()
    assert hold is not None and (hold.would_withdraw, hold.exports) == (16, 20)


def test_nothing_is_judged_before_the_caches_are_filled(
    metrics: AgentMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    # The hub's feed listed first (its list starts a repair) while the ServiceExport
    # informer has not listed yet: every hub record looks like an orphan.
    caches = Caches(hub=20, exported=0)
    synced = False
    guard = WithdrawalGuard(
        cluster_id="east", orphans=caches.orphans, generation=lambda: caches.lists,
        cannot_see=lambda: None, on_release=lambda: None, metrics=metrics,
        synced=lambda: synced, clock=lambda: NOW,
    )
    with caplog.at_level(logging.INFO, logger="member.export.withdrawalguard"):
        guard.judge()
        assert guard.recheck() is None
        assert not guard.permit("shop/svc-0")  # nothing is withdrawn unseen, either
        assert held_total(metrics) == 0
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

        # The ServiceExports listed: 12 of 20 missing is judged as 12, said once.
        caches.relist(exported=8)
        synced = True
        guard.judge()
    hold = guard.recheck()
    assert hold is not None and (hold.would_withdraw, hold.exports) == (12, 20)
    assert held_total(metrics) == 1 and held_now(metrics) == 12
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "12 of cluster east's 20 exports" in line


def test_an_allowance_that_reaches_a_standby_is_said_and_the_hold_stays(
    metrics: AgentMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    caches = Caches(hub=20, exported=4)
    standby = caches.guard(metrics, leading=False)
    assert standby.recheck() is not None
    with caplog.at_level(logging.WARNING, logger="member.export.withdrawalguard"):
        standby.allow()
    assert standby.recheck() is not None  # still reported: the leader still holds it
    assert caches.releases == 0
    assert "run `mcsync clusters allow-withdrawal east` again" in caplog.text
