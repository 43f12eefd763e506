"""The selection core decides, per import, which tier's endpoints an importing cluster uses
(docs/reference.md#cluster-selection): the first tier with enough ready endpoints, failover
at once, failback only after the better tier has qualified for `failbackDelaySeconds`
without a break, and `fallback` when no tier qualifies. One row per outcome."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from shared.clusterselection import (
    ClusterSelectionPolicy,
    ClusterSelector,
    EndpointCounts,
    Selection,
    SelectionState,
    select,
)

# Tier 1: the importer's region; tier 2: any region.
SELECTORS = (
    ClusterSelector.model_validate(
        {"propertySelector": {"matchProperties": {"region": "@SameAsImporter@"}}}),
    ClusterSelector.model_validate(
        {"propertySelector": {"matchExpressions": [{"key": "region", "operator": "In",
                                                    "values": ["us"]}]}}),
)
IMPORTER = {"region": "eu"}
PROPS = {"c1": {"region": "eu"}, "c2": {"region": "eu"}, "c3": {"region": "us"},
         "c4": {"region": "us"}}


def counts(**per: tuple[int, int]) -> dict[str, EndpointCounts]:
    return {c: EndpointCounts(ready, total) for c, (ready, total) in per.items()}


ALL_UP = counts(c1=(2, 2), c2=(2, 2), c3=(2, 2), c4=(2, 2))
EU_DOWN = counts(c1=(0, 2), c2=(0, 0), c3=(2, 2), c4=(2, 2))
ALL_DOWN = counts(c1=(0, 2), c2=(0, 2), c3=(0, 2), c4=(0, 2))


@dataclass
class Row:
    endpoints: dict[str, EndpointCounts]
    previous: SelectionState | None
    now: float
    active: int | None
    active_clusters: tuple[str, ...]
    switch: str | None = None
    message: str | None = None
    since: tuple[tuple[int, float], ...] = ()
    wake_at: float | None = None
    policy: ClusterSelectionPolicy = field(default_factory=ClusterSelectionPolicy)
    properties: dict[str, dict[str, str] | None] = field(default_factory=lambda: dict(PROPS))


def policy(**values: object) -> ClusterSelectionPolicy:
    return ClusterSelectionPolicy.model_validate(values)


ROWS = {
    "first choice: tier 1, undamped": Row(ALL_UP, None, 0, 0, ("c1", "c2")),
    "first choice: tier 2 when tier 1 is down, no event": Row(EU_DOWN, None, 0, 1, ("c3", "c4")),
    "first choice waits for a ready endpoint: fallback, undecided": Row(
        ALL_DOWN, None, 0, None, ("c1", "c2", "c3", "c4")),
    "stays on tier 1": Row(ALL_UP, SelectionState(0), 5, 0, ("c1", "c2")),
    "failover is immediate": Row(
        EU_DOWN, SelectionState(0), 5, 1, ("c3", "c4"), "failover",
        "tier 1 (c1,c2) → tier 2 (c3,c4)"),
    "failover into fallback AllClusters": Row(
        ALL_DOWN, SelectionState(1), 5, None, ("c1", "c2", "c3", "c4"), "failover",
        "tier 2 (c3,c4) → fallback AllClusters (c1,c2,c3,c4)"),
    "failover into fallback None: no cluster": Row(
        ALL_DOWN, SelectionState(0), 5, None, (), "failover",
        "tier 1 (c1,c2) → fallback None ()", policy=policy(fallback="None")),
    "failback waits: the better tier qualifies now": Row(
        ALL_UP, SelectionState(1), 100, 1, ("c3", "c4"), since=((0, 100),), wake_at=130),
    "failback waits: still within the delay": Row(
        ALL_UP, SelectionState(1, ((0, 100),)), 129.9, 1, ("c3", "c4"), since=((0, 100),),
        wake_at=130),
    "failback after the delay": Row(
        ALL_UP, SelectionState(1, ((0, 100),)), 130, 0, ("c1", "c2"), "failback",
        "tier 2 (c3,c4) → tier 1 (c1,c2)"),
    "a dip restarts the wait": Row(
        EU_DOWN, SelectionState(1, ((0, 100),)), 120, 1, ("c3", "c4")),
    "failback delay 0: at once": Row(
        ALL_UP, SelectionState(1), 7, 0, ("c1", "c2"), "failback",
        "tier 2 (c3,c4) → tier 1 (c1,c2)", policy=policy(failbackDelaySeconds=0)),
    "leaving fallback is a failback: waits": Row(
        EU_DOWN, SelectionState(None), 50, None, ("c1", "c2", "c3", "c4"), since=((1, 50),),
        wake_at=80),
    "leaving fallback after the delay": Row(
        EU_DOWN, SelectionState(None, ((1, 50),)), 80, 1, ("c3", "c4"), "failback",
        "fallback AllClusters (c1,c2,c3,c4) → tier 2 (c3,c4)"),
    "the best tier whose wait is over wins": Row(
        ALL_UP, SelectionState(None, ((0, 60),  (1, 50))), 80, 1, ("c3", "c4"), "failback",
        "fallback AllClusters (c1,c2,c3,c4) → tier 2 (c3,c4)", since=((0, 60),), wake_at=90),
    "active tier broke, a better one qualifies: taken at once": Row(
        counts(c1=(1, 1), c3=(0, 2), c4=(0, 2)), SelectionState(1), 10, 0, ("c1", "c2"),
        "failback", "tier 2 (c3,c4) → tier 1 (c1,c2)"),
    "minReadyEndpoints: 3 ready needed, tier 1 has 2": Row(
        counts(c1=(1, 1), c2=(1, 1), c3=(3, 3)), None, 0, 1, ("c3", "c4"),
        policy=policy(minReadyEndpoints=3)),
    "minReadyPercent 50: 1 of 10 does not qualify": Row(
        counts(c1=(1, 10), c3=(1, 1)), None, 0, 1, ("c3", "c4"),
        policy=policy(minReadyPercent=50)),
    "minReadyPercent 50: 5 of 10 qualifies": Row(
        counts(c1=(5, 10), c3=(1, 1)), None, 0, 0, ("c1", "c2"),
        policy=policy(minReadyPercent=50)),
    "minReadyPercent rounds up: 3 of 5 needed at 50": Row(
        counts(c1=(2, 5), c3=(1, 1)), None, 0, 1, ("c3", "c4"),
        policy=policy(minReadyPercent=50)),
    "a Stale cluster's withdrawn endpoints count as none": Row(
        counts(c1=(0, 0), c2=(0, 0), c3=(1, 1)), SelectionState(0), 3, 1, ("c3", "c4"),
        "failover", "tier 1 (c1,c2) → tier 2 (c3,c4)"),
    "an empty tier never qualifies": Row(
        counts(c3=(1, 1)), None, 0, 1, ("c3",),
        properties={"c3": {"region": "us"}}),
    "a cluster leaving the active tier by a property change is not a move": Row(
        ALL_UP, SelectionState(0), 5, 0, ("c1",),
        properties={**PROPS, "c2": {"region": "us"}}),
    "a cluster joining the active tier is not a move": Row(
        ALL_UP, SelectionState(0), 5, 0, ("c1", "c2", "c3"),
        properties={**PROPS, "c3": {"region": "eu"}}),
    "unknown properties: in no tier, but in fallback AllClusters": Row(
        counts(c5=(1, 1)), None, 0, None, ("c1", "c2", "c3", "c4", "c5"),
        properties={**PROPS, "c5": None}),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_selection(row: Row) -> None:
    got: Selection = select(
        SELECTORS, row.policy, IMPORTER, row.properties, row.endpoints, row.previous, row.now)
    assert (got.active, got.active_clusters, got.switch, got.message) == (
        row.active, row.active_clusters, row.switch, row.message)
    assert got.wake_at == row.wake_at
    if got.state is not None:
        assert got.state == SelectionState(row.active, row.since)


def test_tiers_depend_on_properties_only_and_include_down_clusters() -> None:
    got = select(SELECTORS, ClusterSelectionPolicy(), IMPORTER, PROPS, ALL_DOWN, None, 0)
    assert got.tiers == (("c1", "c2"), ("c3", "c4"))
    assert got.state is None  # nothing ready yet: no choice made, so none to damp later


def test_a_decided_import_records_its_choice() -> None:
    got = select(SELECTORS, ClusterSelectionPolicy(), IMPORTER, PROPS, EU_DOWN, None, 0)
    assert got.state == SelectionState(1)
