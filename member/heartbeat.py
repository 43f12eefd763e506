"""Heartbeats to the hub, and the version check they carry (docs/reference.md#failover).

Every `--heartbeat-interval` the agent POSTs a heartbeat; the hub marks the cluster `Ready`
(or `Stale` when they stop) and answers its own version and `minAgentVersion`. An agent
older than that minimum **stops exporting**: `VersionGate.supported` turns False, the export
reconciler refuses to PUT (the ServiceExport says `Ready=False/Failed` and why), a log line
says it once per change, and `mcsync_agent_version_supported` drops to 0. Withdrawals and
finalizer removal still run: refusing them would block ServiceExport deletion for a reason
the user cannot fix.

Until the first answer the gate is open: the hub's own validation still applies to every
PUT, and a hub that is down must not make a fresh agent look unsupported. The agent does
wait for its first heartbeat to be answered or to fail (`first_beat`, at most
`FIRST_BEAT_WAIT_SECONDS`) before its export workers start, so that a reachable hub's
verdict on the version comes before the first export, not in a race with it.

The last heartbeat's outcome also feeds `/readyz` ("hub reachable"). Heartbeats run on every
replica, leader or not: liveness is about the agent, not about who holds the Lease.

The wait between beats is the interval ±20 %, drawn anew each time (client-go's
`wait.JitterUntil` does the like for its periodic loops). Agents started together — a fleet
rolled out at once, or a benchmark's 50 — would otherwise beat in lock-step for ever: every
interval the hub takes a burst of one request per cluster, and a change that lands in that
burst waits behind it (bench 10 saw its p99 tail there).

Heartbeats vs the hub's TTL (docs/reference.md#failover). A cluster whose heartbeats stop for its
TTL goes `Stale`, and a Stale cluster's endpoints are withdrawn from every importing cluster: one
late or lost heartbeat must never come near that. Each answer carries the hub's
`--cluster-ttl`, and the agent beats at least three times per TTL: the interval used is
`--heartbeat-interval` or a third of the TTL, whichever is shorter (one log line when the
TTL lowers the flag's interval), and no jittered wait is longer than a third of the TTL —
jitter only draws beats earlier there, never later. A hub that does not say its TTL (older
than docs/reference.md#failover) leaves the flag's interval as it is.

Each beat also carries the mass-withdrawal guard's hold (`member.export.withdrawalguard`,
docs/reference.md#failover): `withdrawal_hold()` is asked just before the beat (the guard re-checks
the held repair then, so a hold whose ServiceExports came back is reported cleared at once), and an
answer that says `withdrawal_allowed` to a beat that reported a hold is handed to `on_allowed()`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from member.export.invalidexports import InvalidExportsReporter
from member.hubclient import HubClient, HubError, HubRejected
from member.metrics import AgentMetrics
from shared import constants
from shared.models import WithdrawalHold
from shared.version import __version__, is_older

__all__ = ["BEATS_PER_TTL", "HEARTBEAT_JITTER", "HeartbeatLoop", "VersionGate"]

HEARTBEAT_JITTER = constants.HEARTBEAT_JITTER
"""Each wait between heartbeats is the interval times a factor drawn from 1 ± this."""
BEATS_PER_TTL = constants.HEARTBEATS_PER_TTL
"""The agent beats at least this often per hub TTL (docs/reference.md#failover): no wait exceeds TTL
/ this."""
_MIN_WAIT_SECONDS = 0.1
# How long the export workers wait, at start, for the first heartbeat's outcome: long enough
# for a hub that answers, short enough that a hub that hangs does not hold the agent.
FIRST_BEAT_WAIT_SECONDS = 10.0
"""No wait is shorter, whatever TTL a hub answers: a bad answer must not make a busy loop."""

logger = logging.getLogger(__name__)


def refusal_advice(exc: HubRejected, cluster: str) -> str:
    """What the operator does about a refused heartbeat: a token the hub does not know (401)
    or a cluster it does not have (404) means the cluster was deregistered, or registered
    again (which replaces its token); a 403 means a token of another cluster."""
    register = (f"register it again (`mcsync clusters register {cluster} --token-file FILE`, "
                "admin token) and give this agent the new token (--token-file or "
                "MCSYNC_HUB_TOKEN)")
    if exc.code == 401:
        return (f"; the hub does not know this agent's token: if cluster {cluster} was "
                f"deregistered or registered anew, {register}")
    if exc.code == 404:
        return f"; the hub has no cluster {cluster}: {register}"
    if exc.code == 403:
        return (f"; the token is not cluster {cluster}'s: check --cluster-id and --token-file "
                "(MCSYNC_CLUSTER_ID, MCSYNC_TOKEN_FILE)")
    return ""


class VersionGate:
    """Whether this agent may export, given the hub's minAgentVersion. Thread-safe."""

    def __init__(
        self, *, metrics: AgentMetrics | None = None, agent_version: str = __version__
    ) -> None:
        self.agent_version = agent_version
        self._metrics = metrics
        self._lock = threading.Lock()
        self._min_version: str | None = None
        self._supported = True
        # Called (outside the lock) when `supported` flips: the agent re-queues its
        # ServiceExports, since an export reconciled before the hub's first answer (or
        # before an upgrade of the hub's minimum) would otherwise keep its old Ready.
        self.on_change: Callable[[], None] | None = None

    @property
    def supported(self) -> bool:
        with self._lock:
            return self._supported

    @property
    def reason(self) -> str:
        """Why exporting stopped (one sentence), or "" while supported."""
        with self._lock:
            if self._supported:
                return ""
            return (
                f"This agent (version {self.agent_version}) is older than the hub's minimum "
                f"agent version {self._min_version}; upgrade the mcsync agent to export again."
            )

    def update(self, min_agent_version: str) -> None:
        try:
            supported = not is_older(self.agent_version, min_agent_version)
        except ValueError:
            logger.error(
                "hub answered a minAgentVersion that is not a version (%r); ignoring it",
                min_agent_version,
            )
            return
        with self._lock:
            flipped = supported != self._supported
            changed = flipped or self._min_version is None
            self._supported = supported
            self._min_version = min_agent_version
        if flipped and self.on_change is not None:
            self.on_change()
        if self._metrics is not None:
            self._metrics.version_supported.set(1 if supported else 0)
        if changed and not supported:
            logger.error(
                "agent version %s is older than the hub's minAgentVersion %s: exporting "
                "stops until the agent is upgraded",
                self.agent_version,
                min_agent_version,
            )
        elif changed:
            logger.info(
                "agent version %s is supported by the hub (minAgentVersion %s)",
                self.agent_version,
                min_agent_version,
            )


class HeartbeatLoop:
    """POSTs a heartbeat every `interval` seconds until stopped."""

    def __init__(
        self,
        *,
        hub: HubClient,
        interval: float,
        gate: VersionGate,
        metrics: AgentMetrics | None = None,
        on_recovered: Callable[[], None] | None = None,
        import_counts: Callable[[], tuple[int, int]] | None = None,
        withdrawal_hold: Callable[[], WithdrawalHold | None] | None = None,
        on_allowed: Callable[[], None] | None = None,
        rng: random.Random | None = None,
        on_clusterset: Callable[[str | None], None] | None = None,
        invalid_exports: InvalidExportsReporter | None = None,
    ) -> None:
        """`on_recovered` is called (on the heartbeat thread) when the hub answers again
        after failed heartbeats: the agent repairs then, since keys that failed too often
        during the outage were dropped from the queue (docs/reference.md#export-path: they come back
        on a relist or change; this is that relist's moral equivalent for the hub side).

        `withdrawal_hold` answers the repair held by the mass-withdrawal guard (None: none);
        `on_allowed` is called when the hub answers a beat that reported one with the
        admin's one-shot allowance (module docstring)."""
        self._hub = hub
        self._on_recovered = on_recovered
        # docs/reference.md#export-path: each answer's clusterset name, for the About API's
        # clusterset.k8s.io.
        self._on_clusterset = on_clusterset
        # (imported ServiceImports, imported endpoints) for the heartbeat; None: no import.
        self._import_counts = import_counts
        self._withdrawal_hold = withdrawal_hold
        # docs/reference.md#flags: the cluster's Valid=False ServiceExports, sent when they changed.
        self._invalid_exports = invalid_exports
        self._on_allowed = on_allowed
        self._configured = interval
        self._interval = interval
        self._ttl: float | None = None
        self._rng = rng if rng is not None else random.Random()
        self._gate = gate
        self._metrics = metrics
        self._last_ok: float | None = None
        self._last_problem = "no heartbeat sent yet"
        self._last_ok_before = False  # the first success is a start, not a recovery
        self._lock = threading.Lock()
        # Set once the first heartbeat was answered or failed (module doc).
        self.first_beat = threading.Event()
        if metrics is not None:
            metrics.heartbeat_interval.set(interval)

    @property
    def reachable(self) -> bool:
        """True when the last heartbeat was answered 2xx."""
        with self._lock:
            return self._last_problem == ""

    @property
    def problem(self) -> str:
        with self._lock:
            return self._last_problem

    def beat_once(self) -> bool:
        """One heartbeat; True when the hub answered it. Never raises."""
        try:
            counts = self._import_counts() if self._import_counts is not None else None
            hold = self._withdrawal_hold() if self._withdrawal_hold is not None else None
            reporter = self._invalid_exports
            invalid = reporter.pending() if reporter is not None else None
            answer = self._hub.heartbeat(
                agent_version=self._gate.agent_version,
                imports=counts,
                withdrawal_held=hold,
                invalid_exports=invalid,
            )
        except HubRejected as exc:
            # 401/403/404: a wrong token or an unregistered cluster — the operator's to fix,
            # and not something retrying sooner would help.
            self._failed(
                f"the hub refused the heartbeat: {exc.message}"
                f"{refusal_advice(exc, self._hub.config.cluster_id)}",
                level=logging.ERROR,
            )
            return False
        except HubError as exc:
            self._failed(f"the hub is unreachable: {exc}", level=logging.WARNING)
            return False
        with self._lock:
            was_down = self._last_problem != ""
            self._last_problem = ""
            self._last_ok = time.monotonic()
        if self._metrics is not None:
            self._metrics.heartbeats.labels("ok").inc()
            self._metrics.hub_reachable.set(1)
        if self._invalid_exports is not None:
            self._invalid_exports.answered(invalid)
        self._gate.update(answer.min_agent_version)
        self._learn_ttl(answer.cluster_ttl_seconds)
        if self._on_clusterset is not None:
            self._on_clusterset(answer.clusterset_name)
        if hold is not None and answer.withdrawal_allowed and self._on_allowed is not None:
            try:
                self._on_allowed()
            except Exception:
                logger.exception("letting the held withdrawal through failed")
        if was_down:
            logger.info("heartbeat answered by the hub (version %s)", answer.hub_version)
            if self._on_recovered is not None and self._last_ok_before:
                try:
                    self._on_recovered()
                except Exception:
                    logger.exception("repair after the hub came back failed")
        self._last_ok_before = True
        return True

    @property
    def interval(self) -> float:
        """The interval in use: `--heartbeat-interval`, or a third of the hub's TTL when
        that is shorter."""
        with self._lock:
            return self._interval

    def next_wait(self) -> float:
        """Seconds until the next heartbeat: the interval, jittered, never past a third of
        the hub's TTL (module docstring)."""
        with self._lock:
            interval, ttl = self._interval, self._ttl
        wait = interval * self._rng.uniform(1 - HEARTBEAT_JITTER, 1 + HEARTBEAT_JITTER)
        if ttl is not None:
            wait = min(wait, ttl / BEATS_PER_TTL)
        return max(wait, _MIN_WAIT_SECONDS)

    def _learn_ttl(self, ttl: float | None) -> None:
        """Adopt the TTL a heartbeat answer gave (None or nonsense: keep the last one)."""
        if ttl is None:
            return
        if not ttl > 0:  # also NaN
            logger.warning("hub answered a cluster TTL that is not positive (%r); ignoring it", ttl)
            return
        with self._lock:
            if ttl == self._ttl:
                return
            self._ttl = ttl
            self._interval = min(self._configured, ttl / BEATS_PER_TTL)
            lowered = self._interval < self._configured
        if self._metrics is not None:
            self._metrics.heartbeat_interval.set(self._interval)
        if lowered:
            logger.warning(
                "--heartbeat-interval %gs is more than a third of the hub's cluster TTL %gs: "
                "heartbeating every %gs instead, so that one late heartbeat never makes this "
                "cluster Stale",
                self._configured,
                ttl,
                self._interval,
            )

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.beat_once()
            self.first_beat.set()
            stop.wait(self.next_wait())

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="heartbeat", daemon=True)
        thread.start()
        return thread

    def _failed(self, problem: str, *, level: int) -> None:
        with self._lock:
            repeated = problem == self._last_problem
            self._last_problem = problem
        if self._metrics is not None:
            self._metrics.heartbeats.labels("error").inc()
            self._metrics.hub_reachable.set(0)
        logger.log(logging.DEBUG if repeated else level, "heartbeat failed: %s", problem)
