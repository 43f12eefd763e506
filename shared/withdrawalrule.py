"""The mass-withdrawal rule (docs/reference.md#failover), one statement of it for the
agent's guard of its repairs (`member.export.withdrawalguard`) and the hub's guard of a member's
full-state sync (`hub.store.syncguard`): the same numbers must hold a withdrawal on both
sides, or one side would let through what the other calls a mass withdrawal."""

from __future__ import annotations

MIN_EXPORTS = 10
"""Below this many exports on the hub a withdrawal is never held."""


def should_hold(*, would_withdraw: int, exports: int) -> bool:
    """True when withdrawing `would_withdraw` of the cluster's `exports` hub records at once
    must withdraw none: more than half of them, and at least `MIN_EXPORTS` records."""
    return exports >= MIN_EXPORTS and 2 * would_withdraw > exports
