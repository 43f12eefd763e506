"""`hub.store.clusterstate`: a cluster's state from its heartbeat, as a MemberCluster says it
and as an export (or a ServiceImport entry) says it. The store's readers all use it; the
store tests (`test_store_clusters.test_heartbeat_and_state`) check that on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hub.store.clusterstate import ClusterStates, export_cluster_state

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=90)


@pytest.mark.parametrize(
    ("last_heartbeat", "cluster", "export"),
    [
        (None, "Pending", "Ready"),  # registered, never heard from: its agent writes
        (NOW, "Ready", "Ready"),
        (NOW - TTL, "Ready", "Ready"),  # the TTL itself is still in time
        (NOW - TTL - timedelta(microseconds=1), "Stale", "Stale"),
        (NOW + timedelta(seconds=5), "Ready", "Ready"),  # another replica's clock ahead
    ],
)
def test_state_from_the_heartbeat(
    last_heartbeat: datetime | None, cluster: str, export: str
) -> None:
    states = ClusterStates(TTL, NOW)
    assert states.of_cluster(last_heartbeat) == cluster
    assert states.of_export(last_heartbeat) == export
    assert export_cluster_state(cluster) == export


def test_one_instant_for_every_row_of_an_answer() -> None:
    states = ClusterStates(TTL)
    assert states.now <= datetime.now(UTC)
    old = states.now - TTL
    assert [states.of_cluster(old) for _ in range(3)] == ["Ready"] * 3
