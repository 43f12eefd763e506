"""A restarted agent resumes each import's cluster selection from its ServiceImport's
annotations (docs/reference.md#cluster-selection): the tier it was on, and since when a
better tier has qualified (`mcsync.io/failback-pending-since`), so a restart never fails
back at once past `failbackDelaySeconds`."""

from __future__ import annotations

import pytest

from shared.clusterselection import (
    ANNOTATION_ACTIVE_CLUSTERS,
    ANNOTATION_CLUSTER_SELECTOR_RESULTS,
    ANNOTATION_FAILBACK_PENDING_SINCE,
    SelectionState,
    pending_since_text,
    resumed_state,
    select,
)
from tests.shared.test_selection_core import ALL_UP, IMPORTER, PROPS, SELECTORS, policy

RESULTS = '[{"clusters":["c1","c2"]},{"clusters":["c3","c4"]}]'
WALL = 1_800_000_000.0  # the wall clock at the restart
NOW = 50.0  # the restarted process's monotonic clock
EVERYONE = ("c1", "c2", "c3", "c4")


def recorded(active: str, pending: str | None = None) -> dict[str, str]:
    out = {ANNOTATION_CLUSTER_SELECTOR_RESULTS: RESULTS, ANNOTATION_ACTIVE_CLUSTERS: active}
    if pending is not None:
        out[ANNOTATION_FAILBACK_PENDING_SINCE] = pending
    return out


def test_the_pending_time_reads_back_as_written() -> None:
    text = pending_since_text([(0, WALL - 12.25)])
    assert text == "1=2027-01-15T07:59:47.750Z"  # the tier numbered as its selector
    assert pending_since_text([]) is None
    state = resumed_state(recorded("c3,c4", text), 2, EVERYONE, NOW, WALL)
    assert state == SelectionState(1, ((0, pytest.approx(NOW - 12.25)),))  # type: ignore[arg-type]


def test_a_restart_mid_wait_fails_back_when_the_wait_ends_not_at_once() -> None:
    pending = pending_since_text([(0, WALL - 20)])
    state = resumed_state(recorded("c3,c4", pending), 2, EVERYONE, NOW, WALL)
    first = select(SELECTORS, policy(), IMPORTER, PROPS, ALL_UP, state, NOW)
    assert (first.active, first.switch) == (1, None)  # still tier 2: 10 s of 30 left
    assert first.wake_at == pytest.approx(NOW + 10)
    later = select(SELECTORS, policy(), IMPORTER, PROPS, ALL_UP, first.state, NOW + 10)
    assert (later.active, later.switch) == (0, "failback")


def test_without_a_pending_time_the_wait_starts_at_the_restart() -> None:
    # The better tier came up while the agent was down: nobody saw for how long.
    state = resumed_state(recorded("c3,c4"), 2, EVERYONE, NOW, WALL)
    assert state == SelectionState(1, ())
    chosen = select(SELECTORS, policy(), IMPORTER, PROPS, ALL_UP, state, NOW)
    assert (chosen.active, chosen.wake_at) == (1, NOW + 30)


def test_an_unreadable_pending_time_restarts_the_wait_rather_than_skipping_it() -> None:
    state = resumed_state(recorded("c3,c4", "1=yesterday"), 2, EVERYONE, NOW, WALL)
    assert state == SelectionState(1, ())


def test_a_pending_time_in_the_future_counts_as_now() -> None:
    pending = pending_since_text([(0, WALL + 3600)])
    state = resumed_state(recorded("c3,c4", pending), 2, EVERYONE, NOW, WALL)
    assert state == SelectionState(1, ((0, NOW),))


def test_fallback_is_resumed_and_leaving_it_is_damped() -> None:
    state = resumed_state(recorded(",".join(EVERYONE)), 2, EVERYONE, NOW, WALL)
    assert state == SelectionState(None, ())
    chosen = select(SELECTORS, policy(), IMPORTER, PROPS, ALL_UP, state, NOW)
    assert (chosen.active, chosen.switch) == (None, None)


def test_fallback_none_is_resumed_from_no_active_clusters() -> None:
    assert resumed_state(recorded(""), 2, (), NOW, WALL) == SelectionState(None, ())


@pytest.mark.parametrize("annotations", [
    None, {}, {ANNOTATION_ACTIVE_CLUSTERS: "c1,c2"},
    {ANNOTATION_CLUSTER_SELECTOR_RESULTS: "not json", ANNOTATION_ACTIVE_CLUSTERS: "c1"},
    # three selectors now, two recorded: the selectors changed, a new choice
    {ANNOTATION_CLUSTER_SELECTOR_RESULTS: RESULTS[:-1] + ',{"clusters":[]}]',
     ANNOTATION_ACTIVE_CLUSTERS: "c1,c2"},
], ids=["no-object", "no-annotations", "no-results", "bad-results", "other-selectors"])
def test_nothing_to_resume_is_a_new_choice(annotations: dict[str, str] | None) -> None:
    assert resumed_state(annotations, 2, EVERYONE, NOW, WALL) is None
