"""The mass-withdrawal guard: one broken cluster must not empty the fleet
(docs/reference.md#failover).

A hub record of this cluster with no ServiceExport behind it is an orphan, and the agent
withdraws it (docs/reference.md#export-path). That is right for one record and ruinous for all of
them at once: stop an agent, lose the cluster's ServiceExports behind its back (a CRD migration gone
wrong), start it again, and its start-up repair withdraws every export, after which every other
cluster deletes the ServiceImports, derived Services and slices within a second. So:

* A repair — agent start, a relist of the hub's feed or of the ServiceExports, a new
  leadership term — that would withdraw more than half of the cluster's exports on the hub,
  when it has at least `MIN_EXPORTS`, withdraws none of them (`should_hold`). The agent
  logs it once, counts it (`mcsync_agent_withdrawals_held_total`), shows how many it holds
  (`mcsync_agent_withdrawal_held_exports`) and reports the hold in its heartbeats, so the
  cluster's record on the hub carries `WithdrawalHeld`. The slices of the held exports are
  kept too.
* The agent retries the held repair at every heartbeat (`recheck`): once the ServiceExports
  are back (no longer more than half missing) it goes through as an ordinary repair, the few
  orphans left are withdrawn, and the heartbeat reports no hold. When the hub answers a beat
  that reported the hold with the admin's one-shot allowance (`mcsync clusters
  allow-withdrawal NAME`), `allow` lets exactly the orphans of that repair go; a later
  repair is judged afresh.
* Every replica judges at each of its heartbeats, leader or standby: they all heartbeat
  for the same cluster and the hub keeps what the last beat said, so a standby that did not
  judge would clear the leader's `WithdrawalHeld` every other beat. Their caches are the
  same (informers run on every replica), so their judgments agree. Only the leader
  withdraws, so an allowance that reaches a standby cannot be used: it says so in a log
  line and keeps reporting the hold (the admin allows again; see docs/reliability.md).
* An ordinary unexport — a ServiceExport deleted while its informer watches, a live
  DELETED event — is never held (`note_unexport`), and is not counted in a repair's share.
* A ServiceExport API that errors (the CRD missing, the version no longer served, 5xx)
  means "cannot see", never "nothing is exported": while any ServiceExport informer is
  failing no orphan is withdrawn at all, whatever the share (`cannot_see`). The refused
  keys are queued again once it can see (the next heartbeat's `recheck`).

How a repair is recognised without a flag on every queued key: the orphans are counted
from the caches (`orphans()`: the in-scope hub records with no ServiceExport), and the
judgment is redone whenever one of the informers behind those caches has delivered a new
list (`generation()`, their list counters) and at each explicit repair (`judge`). A list is
counted as its cache is swapped, so a worker that sees a relist's cache also sees a new
generation: no orphan of a relist can be withdrawn under the judgment of the cache before
it. Between lists the judgment stands, so an orphan reconcile costs one set lookup;
counting costs one pass over the caches, once per list.

Thread-safe: reconciler workers ask `permit`, the heartbeat thread `recheck` and `allow`,
informer threads `note_*`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime

from member.metrics import AgentMetrics
from shared.models import WithdrawalHold
from shared.timefmt import utcnow
from shared.withdrawalrule import MIN_EXPORTS, should_hold

__all__ = ["MIN_EXPORTS", "WithdrawalGuard", "should_hold"]

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class _Hold:
    would_withdraw: int
    exports: int
    since: datetime


class WithdrawalGuard:
    """Decides whether an orphan may be withdrawn now (module docstring)."""

    def __init__(
        self,
        *,
        cluster_id: str,
        orphans: Callable[[], tuple[set[str], int]],
        generation: Callable[[], Hashable],
        cannot_see: Callable[[], str | None],
        on_release: Callable[[], None],
        metrics: AgentMetrics,
        synced: Callable[[], bool] = lambda: True,
        leading: Callable[[], bool] = lambda: True,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        """`orphans()` answers (the in-scope hub keys with no ServiceExport, the number of
        in-scope hub records); `generation()` changes whenever a list behind those caches
        was delivered; `cannot_see()` names the ServiceExport informer that is failing, or
        None; `on_release()` queues a repair (the refused orphans go through then);
        `synced()` says the caches are filled (nothing is judged before), `leading()` that
        this replica is the one that withdraws."""
        self._cluster_id = cluster_id
        self._orphans = orphans
        self._generation = generation
        self._cannot_see = cannot_see
        self._on_release = on_release
        self._synced = synced
        self._leading = leading
        self._metrics = metrics
        self._clock = clock
        self._lock = threading.Lock()
        self._judged: Hashable = object()  # the generation of the last judgment: none yet
        self._hold: _Hold | None = None
        self._unexported: set[str] = set()  # live DELETEs of ServiceExports: never held
        self._allowed: set[str] = set()  # orphans an admin let go (`allow`)
        self._refused = False  # an orphan was refused since the last release
        self._blind: str | None = None  # the failing informer last logged

    # -- the ServiceExport informers' events ----------------------------------------------

    def note_unexport(self, key: str) -> None:
        """A ServiceExport was deleted while watched: an ordinary unexport, never held."""
        with self._lock:
            self._unexported.add(key)

    def note_export(self, key: str) -> None:
        """`key` has a ServiceExport (again): whatever was noted of it no longer applies."""
        with self._lock:
            self._unexported.discard(key)
            self._allowed.discard(key)

    def withdrawn(self, key: str) -> None:
        """The hub no longer holds `key` (withdrawn, or found gone)."""
        with self._lock:
            self._unexported.discard(key)
            self._allowed.discard(key)

    # -- the decision ---------------------------------------------------------------------

    def permit(self, key: str) -> bool:
        """May the orphan `key` (a hub record with no ServiceExport) be withdrawn now?"""
        with self._lock:
            if key in self._unexported:
                return True
        if not self._synced():
            with self._lock:
                self._refused = True  # queued again once judged (`recheck`)
            return False
        blind = self._cannot_see()
        if blind is not None:
            self._refuse_blind(blind)
            return False
        released = False
        with self._lock:
            generation = self._generation()
            if generation != self._judged:
                released = self._judge_locked(generation)
            held = self._hold is not None and key not in self._allowed
            if held:
                self._refused = True
        if released:
            self._release()
        return not held

    def judge(self) -> None:
        """A repair starts (start, new term, relist, the hub back): judge it now. Not
        before every cache behind the count is filled: the hub's feed often lists before
        the ServiceExports do, and every record would then look like an orphan (the count
        said in the log and the hold would be wrong); `recheck` judges once they are."""
        if not self._synced():
            return
        if self._cannot_see() is not None:
            return  # nothing is withdrawn meanwhile (`permit`); judged once it can see
        with self._lock:
            released = self._judge_locked(self._generation())
        if released:
            self._release()

    def recheck(self) -> WithdrawalHold | None:
        """Judge again (each heartbeat, on every replica): answers the hold to report, None
        when none is held. Keys refused while the ServiceExports could not be seen are
        queued again once they can."""
        if not self._synced():
            return self.held()
        blind = self._cannot_see()
        if blind is None:
            with self._lock:
                released = self._judge_locked(self._generation())
                if self._hold is None and self._refused:
                    self._refused, released = False, True
            if released:
                self._release()
        return self.held()

    def held(self) -> WithdrawalHold | None:
        """The repair held now, as the heartbeat reports it."""
        with self._lock:
            hold = self._hold
        if hold is None:
            return None
        return WithdrawalHold(
            would_withdraw=hold.would_withdraw, exports=hold.exports, since=hold.since
        )

    def allow(self) -> None:
        """The hub handed over an admin's one-shot allowance: the held repair goes through
        (its orphans, once); a later repair is judged afresh."""
        if not self._leading():
            logger.warning(
                "the hub handed this replica, which does not lead, the admin's allowance to "
                "withdraw: it is used up and the leader still holds the repair; run `mcsync "
                "clusters allow-withdrawal %s` again",
                self._cluster_id,
                extra={"cluster": self._cluster_id},
            )
            return
        with self._lock:
            hold = self._hold
            if hold is None:
                return
            orphans, _ = self._orphans()
            self._allowed |= orphans - self._unexported
            self._hold = None
            self._refused = False
        self._metrics.withdrawal_held_exports.set(0)
        logger.warning(
            "an admin allowed the held withdrawal: withdrawing the %d exports of cluster %s "
            "that have no ServiceExport",
            hold.would_withdraw,
            self._cluster_id,
            extra={"cluster": self._cluster_id},
        )
        self._on_release()

    # -- internals ------------------------------------------------------------------------

    def _judge_locked(self, generation: Hashable) -> bool:
        """Count the orphans and hold or release; True when a hold was released (the caller
        then queues a repair, outside the lock)."""
        self._judged = generation
        orphans, exports = self._orphans()
        would = len(orphans - self._unexported - self._allowed)
        previous = self._hold
        if should_hold(would_withdraw=would, exports=exports):
            since = previous.since if previous is not None else self._clock()
            self._hold = _Hold(would_withdraw=would, exports=exports, since=since)
            self._metrics.withdrawal_held_exports.set(would)
            if previous is None:
                self._metrics.withdrawals_held.inc()
                logger.error(
                    "withdrawal held: this repair would withdraw %d of cluster %s's %d exports "
                    "on the hub at once (more than half): none is withdrawn until their "
                    "ServiceExports come back or an admin runs `mcsync clusters "
                    "allow-withdrawal %s`",
                    would,
                    self._cluster_id,
                    exports,
                    self._cluster_id,
                    extra={"cluster": self._cluster_id},
                )
            return False
        if previous is None:
            return False
        self._hold = None
        self._refused = False
        self._metrics.withdrawal_held_exports.set(0)
        logger.warning(
            "withdrawal no longer held: %d of cluster %s's %d exports have no ServiceExport "
            "now; the repair goes through",
            would,
            self._cluster_id,
            exports,
            extra={"cluster": self._cluster_id},
        )
        return True

    def _refuse_blind(self, blind: str) -> None:
        with self._lock:
            self._refused = True
            first = blind != self._blind
            self._blind = blind
        if first:
            logger.warning(
                "no orphan is withdrawn while the ServiceExports cannot be listed (%s fails): "
                "cannot see is not nothing exported",
                blind,
                extra={"cluster": self._cluster_id},
            )

    def _release(self) -> None:
        with self._lock:
            self._blind = None
        self._on_release()
