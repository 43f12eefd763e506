"""Pure helpers for the ServiceExport's status conditions (`Valid`, `Conflict`, `Ready`).

The reconciler computes the conditions it wants and asks `status_changed()` whether a write
is needed; writes happen only on a change (docs/reference.md#export-path), so an informer resync or
a no-op reconcile costs no API call and no new resourceVersion (which would wake every watcher and
re-enqueue the key, a write loop in waiting).

What counts as a change: a condition added or removed, or a different `status`, `reason`,
`message` — the reference's list — and also a different `observedGeneration`. The reference names
the first four; we add the generation because a condition that claims to describe an older
generation of the ServiceExport misleads `kubectl wait` users, and it only moves when the
user edits the ServiceExport's spec (rare, and a real change). `lastTransitionTime` is never
compared: it is kept when the status did not flip (Kubernetes' `meta.SetStatusCondition`
rule) and set to now when it did.

Conditions are plain dicts in Kubernetes' wire form, because they live in a ServiceExport
read as JSON; `condition_from_hub()` adapts a hub `Condition` model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from shared.models import Condition
from shared.timefmt import format_millis

__all__ = [
    "CONDITION_ORDER",
    "condition_from_hub",
    "find_condition",
    "make_condition",
    "merge_conditions",
    "status_changed",
]

# The order conditions are written in, so a status diff reads the same every time.
CONDITION_ORDER = ("Valid", "Conflict", "Ready")
_COMPARED = ("status", "reason", "message", "observedGeneration")


def find_condition(
    conditions: Sequence[Mapping[str, Any]] | None, type_: str
) -> dict[str, Any] | None:
    """The condition of `type_` in `conditions`, or None."""
    for condition in conditions or ():
        if condition.get("type") == type_:
            return dict(condition)
    return None


def make_condition(
    *, type_: str, status: str, reason: str, message: str, observed_generation: int | None
) -> dict[str, Any]:
    """A condition without `lastTransitionTime` (`merge_conditions` sets it)."""
    condition: dict[str, Any] = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
    }
    if observed_generation is not None:
        condition["observedGeneration"] = observed_generation
    return condition


def condition_from_hub(condition: Condition, *, observed_generation: int | None) -> dict[str, Any]:
    """The hub's verdict as a ServiceExport condition, with our object's generation
    (docs/reference.md#export-path)."""
    return make_condition(
        type_=condition.type,
        status=condition.status,
        reason=condition.reason,
        message=condition.message,
        observed_generation=observed_generation,
    )


def merge_conditions(
    existing: Sequence[Mapping[str, Any]] | None,
    desired: Sequence[Mapping[str, Any]],
    *,
    remove: Sequence[str] = (),
    now: datetime,
) -> list[dict[str, Any]]:
    """`existing` with each `desired` condition set and the types in `remove` dropped.

    A desired condition keeps the existing `lastTransitionTime` when its status did not
    change, else gets `now`. Conditions of other types (someone else's) are kept as they are.
    Managed types come first in `CONDITION_ORDER`.
    """
    wanted = {d["type"]: dict(d) for d in desired}
    dropped = set(remove) - set(wanted)
    result: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    by_type = {str(e.get("type")): dict(e) for e in existing or ()}
    for type_, condition in wanted.items():
        old = by_type.get(type_)
        if old is not None and old.get("status") == condition.get("status") and old.get(
            "lastTransitionTime"
        ):
            condition["lastTransitionTime"] = old["lastTransitionTime"]
        else:
            condition["lastTransitionTime"] = _rfc3339(now)
        result.append(condition)
    for type_, old in by_type.items():
        if type_ not in wanted and type_ not in dropped:
            others.append(old)
    order = {t: i for i, t in enumerate(CONDITION_ORDER)}
    result.sort(key=lambda cond: order.get(str(cond["type"]), len(order)))
    return result + others


def status_changed(
    old: Sequence[Mapping[str, Any]] | None, new: Sequence[Mapping[str, Any]]
) -> bool:
    """True when a write is needed: a condition appeared, vanished, or changed (see doc)."""
    old_by_type = {str(c.get("type")): c for c in old or ()}
    new_by_type = {str(c.get("type")): c for c in new}
    if old_by_type.keys() != new_by_type.keys():
        return True
    for type_, condition in new_by_type.items():
        previous = old_by_type[type_]
        if any(previous.get(field) != condition.get(field) for field in _COMPARED):
            return True
    return False


def _rfc3339(moment: datetime) -> str:
    # Kubernetes' metav1.Time is second precision; the API server would truncate anyway.
    return format_millis(moment).split(".", 1)[0] + "Z"
