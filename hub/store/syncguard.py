"""The hub's mass-withdrawal guard of a member's full-state sync (docs/reference.md#failover).

The agent guards its own repairs (`member.export.withdrawalguard`), but a broken or old agent —
or anything else holding a member token — can still send `PUT …/serviceexports` with
almost nothing in it, and a full-state sync withdraws whatever it does not list. So the
hub applies the same rule (`shared.withdrawalrule`) to the sync itself, before it writes
anything: a sync that would withdraw more than half of at least 10 stored exports is
refused (409, `SyncWithdrawalHeld`, naming the rule) and recorded on the cluster
(`clusters.sync_withdrawal_held`), which then carries `WithdrawalHeld` until

* a sync arrives that is not a mass withdrawal (the exports came back, or the member
  sends its whole set again): the hold clears, and with it an allowance given for it; or
* an admin allows it (`POST /clusters/{c}/allow-withdrawal`, the one allowance of both
  guards): the next such sync goes through, once, and the hold clears.

An ordinary DELETE of one export is never held: it is not a sync. The guard runs under
the cluster's sync lock (`synclock`), so two syncs cannot both pass on one allowance.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update

from hub.store import codec
from hub.store.context import StoreContext
from hub.store.errors import Conflict, NotFound
from hub.store.tables import clusters
from shared.models import WithdrawalHold, to_wire
from shared.timefmt import utcnow
from shared.withdrawalrule import MIN_EXPORTS, should_hold


class SyncWithdrawalHeld(Conflict):
    """A full-state sync held as a mass withdrawal: nothing of it was written."""


@dataclass(frozen=True)
class GuardOutcome:
    """A sync the guard let through: `allowed` when it took the admin's allowance."""

    allowed: bool = False


async def guard_sync(
    ctx: StoreContext, cluster_id: str, *, would_withdraw: int, stored: int, held: bool
) -> GuardOutcome:
    """Let the sync of `cluster_id` through, or raise SyncWithdrawalHeld (recording the
    hold). `held`: whether the cluster's row showed a hold of this guard when the sync
    read it; a sync that is no mass withdrawal and found none writes nothing here."""
    mass = should_hold(would_withdraw=would_withdraw, exports=stored)
    if not mass and not held:
        return GuardOutcome()
    refused: SyncWithdrawalHeld | None = None
    allowed = False
    async with ctx.write() as conn:
        query = select(
            clusters.c.withdrawal_held,
            clusters.c.sync_withdrawal_held,
            clusters.c.withdrawal_allowed,
        ).where(clusters.c.name == cluster_id, clusters.c.deleting.is_(False))
        row = (await conn.execute(ctx.locks.exclusive(query, of=clusters))).first()
        if row is None:
            raise NotFound(f"cluster {cluster_id!r} is not registered")
        agent_hold, sync_hold, allowance = row
        values: dict[str, object] = {}
        if not mass:
            values["sync_withdrawal_held"] = None
            if agent_hold is None:
                values["withdrawal_allowed"] = False  # the hold it was given for is gone
        elif allowance:
            values.update(sync_withdrawal_held=None, withdrawal_allowed=False)
            allowed = True
        else:
            since = (
                WithdrawalHold.model_validate_json(sync_hold).since
                if sync_hold is not None
                else utcnow()
            )
            hold = WithdrawalHold(would_withdraw=would_withdraw, exports=stored, since=since)
            values["sync_withdrawal_held"] = codec.canonical_json(to_wire(hold))
            refused = SyncWithdrawalHeld(
                f"held: this full-state sync would withdraw {would_withdraw} of cluster "
                f"{cluster_id!r}'s {stored} exports at once, more than half of at least "
                f"{MIN_EXPORTS} (the mass-withdrawal guard); nothing was written and the "
                "cluster carries WithdrawalHeld. Send the cluster's whole set of exports, "
                f"or let this withdrawal through once with `mcsync clusters allow-withdrawal "
                f"{cluster_id}`"
            )
        if values:
            await conn.execute(
                update(clusters).where(clusters.c.name == cluster_id).values(**values)
            )
    if refused is not None:
        raise refused
    return GuardOutcome(allowed=allowed)
