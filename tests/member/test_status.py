"""Pure tests of `member.status` (conditions) and `member.duration` (dedupe + clamp)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from member.duration import export_duration_ms, needs_observation
from member.status import (
    condition_from_hub,
    find_condition,
    make_condition,
    merge_conditions,
    status_changed,
)
from shared import conditions as c
from shared.constants import ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION
from shared.metrics import EXPORT_DURATION_NON_POSITIVE_MS, EXPORT_DURATION_RIGHT_BOUND_MS
from shared.models import Condition, InternalServiceExport

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def cond(
    type_: str, status: str, reason: str, message: str = "m", gen: int | None = 1
) -> dict[str, Any]:
    return make_condition(
        type_=type_, status=status, reason=reason, message=message, observed_generation=gen
    )


# -- conditions ------------------------------------------------------------------------------


def test_new_conditions_get_now_and_the_fixed_order() -> None:
    merged = merge_conditions(
        None,
        [cond(c.READY, c.TRUE, c.REASON_EXPORTED), cond(c.VALID, c.TRUE, c.REASON_VALID)],
        now=T0,
    )
    assert [m["type"] for m in merged] == [c.VALID, c.READY]
    assert all(m["lastTransitionTime"] == "2026-03-01T12:00:00Z" for m in merged)


def test_last_transition_time_kept_unless_status_flips() -> None:
    first = merge_conditions(
        None,
        [cond(c.VALID, c.TRUE, c.REASON_VALID), cond(c.READY, c.FALSE, c.REASON_PENDING)],
        now=T0,
    )
    second = merge_conditions(
        first,
        [
            cond(c.VALID, c.TRUE, c.REASON_VALID, message="other words"),
            cond(c.READY, c.TRUE, c.REASON_EXPORTED),
        ],
        now=T1,
    )
    valid = find_condition(second, c.VALID)
    ready = find_condition(second, c.READY)
    assert valid is not None and ready is not None
    assert valid["lastTransitionTime"] == "2026-03-01T12:00:00Z"  # same status: kept
    assert ready["lastTransitionTime"] == "2026-03-01T12:05:00Z"  # flipped: now


def test_remove_and_foreign_conditions() -> None:
    existing = [
        {**cond(c.CONFLICT, c.TRUE, c.PORT_CONFLICT), "lastTransitionTime": "x"},
        {"type": "SomeoneElses", "status": "True", "reason": "Theirs"},
    ]
    merged = merge_conditions(
        existing, [cond(c.VALID, c.FALSE, c.REASON_NO_SERVICE)], remove=[c.CONFLICT], now=T0
    )
    assert [m["type"] for m in merged] == [c.VALID, "SomeoneElses"]


@pytest.mark.parametrize(
    ("new", "changed"),
    [
        ([cond(c.VALID, c.TRUE, c.REASON_VALID)], False),
        ([cond(c.VALID, c.TRUE, c.REASON_VALID, message="other")], True),
        ([cond(c.VALID, c.FALSE, c.REASON_VALID)], True),
        ([cond(c.VALID, c.TRUE, "Other")], True),
        ([cond(c.VALID, c.TRUE, c.REASON_VALID, gen=2)], True),
        ([cond(c.VALID, c.TRUE, c.REASON_VALID), cond(c.READY, c.TRUE, c.REASON_EXPORTED)], True),
    ],
)
def test_status_changed(new: list[dict[str, Any]], changed: bool) -> None:
    old = merge_conditions(None, [cond(c.VALID, c.TRUE, c.REASON_VALID)], now=T0)
    assert status_changed(old, merge_conditions(old, new, now=T1)) is changed


def test_removed_condition_is_a_change() -> None:
    old = merge_conditions(None, [cond(c.VALID, c.TRUE, c.REASON_VALID)], now=T0)
    assert status_changed(old, merge_conditions(old, [], remove=[c.VALID], now=T1))


def test_last_transition_time_alone_is_no_change() -> None:
    old = [{**cond(c.VALID, c.TRUE, c.REASON_VALID), "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    new = [{**cond(c.VALID, c.TRUE, c.REASON_VALID), "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    assert not status_changed(old, new)


def test_condition_from_hub_takes_our_generation() -> None:
    hub = Condition(
        type=c.CONFLICT, status="True", reason=c.PORT_CONFLICT, message="ports differ",
        observed_generation=9, last_transition_time=T0,
    )
    mine = condition_from_hub(hub, observed_generation=2)
    assert mine == {
        "type": c.CONFLICT, "status": "True", "reason": c.PORT_CONFLICT,
        "message": "ports differ", "observedGeneration": 2,
    }


# -- duration dedupe and clamp ---------------------------------------------------------------


def record(
    *, service_rv: str = "42", observed: str | None = None, verdict: bool = True,
    since: datetime = T0,
) -> InternalServiceExport:
    annotations = {ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION: observed} if observed else {}
    conditions = (
        [{"type": c.CONFLICT, "status": "False", "reason": c.NO_CONFLICTS, "message": ""}]
        if verdict else []
    )
    return InternalServiceExport.model_validate(
        {
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7",
                         "annotations": annotations},
            "spec": {
                "serviceReference": {
                    "clusterId": "member-1", "namespace": "shop", "name": "web",
                    "resourceVersion": service_rv, "exportedSince": since.isoformat(),
                    "exportCreationTimestamp": T0.isoformat(),
                }
            },
            "status": {"conditions": conditions},
        }
    )


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, True),  # verdict, never observed
        ({"observed": "41"}, True),  # an older version was observed
        ({"observed": "42"}, False),  # this version was observed: never twice
        ({"verdict": False}, False),  # no verdict yet: nothing reported back
    ],
)
def test_needs_observation(kwargs: dict[str, Any], expected: bool) -> None:
    assert needs_observation(record(**kwargs)) is expected


@pytest.mark.parametrize(
    ("elapsed", "expected_ms"),
    [
        (timedelta(milliseconds=250), 250.0),
        (timedelta(0), EXPORT_DURATION_NON_POSITIVE_MS),
        (timedelta(seconds=-3), EXPORT_DURATION_NON_POSITIVE_MS),
        (timedelta(hours=1), EXPORT_DURATION_RIGHT_BOUND_MS),
        (timedelta(milliseconds=100000), EXPORT_DURATION_RIGHT_BOUND_MS),
    ],
)
def test_export_duration_clamped(elapsed: timedelta, expected_ms: float) -> None:
    assert export_duration_ms(record(since=T0), now=T0 + elapsed) == pytest.approx(expected_ms)
