"""Lease leader election (docs/reference.md#flags HA) against the emulator, with short durations."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from member.kube.leader import LeaderElector
from tests.kube.fixtures import KubeCluster
from tests.kube.support import wait_for

DEADLINE = 30.0
NAMESPACE = "mcsync-system"
LEASE = "mcsync-agent"


@dataclass
class Candidate:
    elector: LeaderElector
    stop: threading.Event
    thread: threading.Thread
    log: list[str] = field(default_factory=list)

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(DEADLINE)
        assert not self.thread.is_alive()


@pytest.fixture
def candidates(kube_cluster: KubeCluster) -> Iterator[list[Candidate]]:
    started: list[Candidate] = []
    yield started
    for candidate in started:
        candidate.stop.set()
    for candidate in started:
        candidate.thread.join(DEADLINE)


def start(
    cluster: KubeCluster,
    started: list[Candidate],
    identity: str,
    *,
    lease_duration: float = 2.0,
    renew_deadline: float = 1.5,
    retry_period: float = 0.2,
) -> Candidate:
    log: list[str] = []
    elector = LeaderElector(
        api=cluster.api_client(),
        namespace=NAMESPACE,
        name=LEASE,
        identity=identity,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
        on_started_leading=lambda: log.append("started"),
        on_stopped_leading=lambda: log.append("stopped"),
    )
    stop = threading.Event()
    thread = threading.Thread(target=elector.run, args=(stop,), daemon=True)
    thread.start()
    candidate = Candidate(elector=elector, stop=stop, thread=thread, log=log)
    started.append(candidate)
    return candidate


def holder(cluster: KubeCluster) -> str | None:
    lease = cluster.state.get("leases", NAMESPACE, LEASE)
    return None if lease is None else lease["spec"].get("holderIdentity")


def leaders(group: list[Candidate]) -> list[Candidate]:
    return [c for c in group if c.elector.is_leader]


def test_exactly_one_leader(kube_cluster: KubeCluster, candidates: list[Candidate]) -> None:
    a = start(kube_cluster, candidates, "a")
    b = start(kube_cluster, candidates, "b")
    wait_for(lambda: len(leaders(candidates)) == 1, timeout=DEADLINE, what="a leader")
    # Watch the pair through several renewals: never two leaders, the Lease names the one.
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        assert len(leaders(candidates)) <= 1
        time.sleep(0.02)
    [leader] = leaders(candidates)
    assert holder(kube_cluster) == leader.elector.identity
    assert leader.log == ["started"]
    other = b if leader is a else a
    assert other.log == []
    lease = kube_cluster.state.get("leases", NAMESPACE, LEASE)
    assert lease is not None and lease["spec"]["leaseDurationSeconds"] == 2


def test_stopped_leader_is_replaced_after_the_lease_expires(
    kube_cluster: KubeCluster, candidates: list[Candidate]
) -> None:
    a = start(kube_cluster, candidates, "a")
    wait_for(lambda: a.elector.is_leader, timeout=DEADLINE, what="a to lead")
    b = start(kube_cluster, candidates, "b")
    a.halt()  # stops renewing, does not release: b must wait out the lease
    assert a.log == ["started", "stopped"]
    assert holder(kube_cluster) == "a"
    wait_for(lambda: b.elector.is_leader, timeout=DEADLINE, what="b to take over")
    assert holder(kube_cluster) == "b"
    lease = kube_cluster.state.get("leases", NAMESPACE, LEASE)
    assert lease is not None and lease["spec"]["leaseTransitions"] == 1
    assert b.log == ["started"]


def test_release_hands_over_at_once(kube_cluster: KubeCluster, candidates: list[Candidate]) -> None:
    # A lease far longer than the test's deadline: only release() can explain a takeover.
    durations = {"lease_duration": 120.0, "renew_deadline": 60.0, "retry_period": 0.2}
    a = start(kube_cluster, candidates, "a", **durations)
    wait_for(lambda: a.elector.is_leader, timeout=DEADLINE, what="a to lead")
    b = start(kube_cluster, candidates, "b", **durations)
    a.stop.set()
    a.elector.release()
    a.thread.join(DEADLINE)
    assert not a.elector.is_leader
    assert a.log == ["started", "stopped"]
    wait_for(lambda: b.elector.is_leader, timeout=DEADLINE, what="b to take over")
    assert holder(kube_cluster) == "b"


def test_release_while_running_stops_competing(
    kube_cluster: KubeCluster, candidates: list[Candidate]
) -> None:
    a = start(kube_cluster, candidates, "a")
    wait_for(lambda: a.elector.is_leader, timeout=DEADLINE, what="a to lead")
    a.elector.release()  # without setting stop: run() must return, not re-take the lease
    a.thread.join(DEADLINE)
    assert not a.thread.is_alive()
    assert holder(kube_cluster) == ""
    assert a.log == ["started", "stopped"]


def test_conflict_on_renew_does_not_crash(
    kube_cluster: KubeCluster, candidates: list[Candidate]
) -> None:
    a = start(kube_cluster, candidates, "a")
    wait_for(lambda: a.elector.is_leader, timeout=DEADLINE, what="a to lead")
    kube_cluster.state.inject_conflict("leases", NAMESPACE, LEASE, times=2)
    wait_for(
        lambda: any(r.code == 409 for r in kube_cluster.state.requests()),
        timeout=DEADLINE,
        what="a renewal to get 409",
    )
    renewals = kube_cluster.state.count("update", "leases")
    wait_for(
        lambda: kube_cluster.state.count("update", "leases") >= renewals + 3,
        timeout=DEADLINE,
        what="renewals to go on",
    )
    assert a.thread.is_alive()
    assert a.elector.is_leader
    assert a.log == ["started"]


def test_lost_renewals_step_down_and_compete_again(
    kube_cluster: KubeCluster, candidates: list[Candidate]
) -> None:
    a = start(kube_cluster, candidates, "a")
    wait_for(lambda: a.elector.is_leader, timeout=DEADLINE, what="a to lead")
    kube_cluster.state.pause(close_watches=False)  # every renewal fails past renew_deadline
    try:
        wait_for(lambda: not a.elector.is_leader, timeout=DEADLINE, what="a to step down")
        assert a.log == ["started", "stopped"]
    finally:
        kube_cluster.state.unpause()
    wait_for(lambda: a.elector.is_leader, timeout=DEADLINE, what="a to lead again")
    assert a.log == ["started", "stopped", "started"]


def test_durations_must_be_ordered(kube_cluster: KubeCluster) -> None:
    with pytest.raises(ValueError):
        LeaderElector(
            api=kube_cluster.api_client(),
            namespace=NAMESPACE,
            name=LEASE,
            identity="a",
            lease_duration=1.0,
            renew_deadline=2.0,
            retry_period=0.5,
            on_started_leading=lambda: None,
            on_stopped_leading=lambda: None,
        )
