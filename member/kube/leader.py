"""Leader election over a coordination.k8s.io/v1 Lease, with client-go's semantics.

Several agent replicas run per cluster (docs/reference.md#flags); only the leader exports. The rules
are client-go's `leaderelection` package, so operators can reason about them the usual way:

* A candidate takes the Lease when it does not exist (create), when its holder is empty (a
  leader released it), or when its record has not changed for `leaseDurationSeconds` *as
  observed on this replica's own monotonic clock* — never by comparing the holder's
  `renewTime` with our wall clock, so clock skew between nodes cannot cause two leaders.
* Every write carries the resourceVersion read just before (an update with a precondition),
  so two candidates racing for an expired Lease cannot both win: one gets 409 and stays a
  candidate.
* The leader renews every `retry_period`; when no renewal has succeeded for
  `renew_deadline` (< lease duration), it steps down *before* anyone else may take over.
  It also steps down at once when it sees another holder in the Lease.
* `release()` on graceful shutdown clears `holderIdentity`, so another replica takes over
  at its next retry instead of waiting out the lease.

`on_started_leading` / `on_stopped_leading` are called on the elector's thread, once per term,
and must return promptly (start or stop worker threads, set an Event). After stepping down
the elector competes again until `stop` is set.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s

from member.kube.client import ApiException, request_json

__all__ = ["LeaderElector"]

logger = logging.getLogger(__name__)

# client-go's JitterFactor for acquisition retries: spread candidates so they do not collide.
_JITTER = 1.2


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Competes for one Lease; tells the caller when this replica starts and stops leading."""

    def __init__(
        self,
        *,
        api: k8s.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        if not identity:
            raise ValueError("identity must not be empty")
        self._api = api
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._lease_seconds = max(1, math.ceil(lease_duration))
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._clock = clock
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"

        # Serialises lease writes: release() from the shutdown thread must never interleave
        # with a renewal from the elector thread (the renewal would re-take the lease).
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._leading = False
        # The last Lease spec seen, and when (our clock) it was first seen: the expiry clock.
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0

    @property
    def is_leader(self) -> bool:
        return self._leading

    # -- running --------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Acquire, lead, step down, compete again … until `stop` or `release()`. Never raises."""
        while not self._should_stop(stop):
            if not self._acquire(stop):
                break
            self._start_term()
            self._renew_until_lost(stop)
            self._end_term()
        # Leaving while leading (stop set): the term ends here; release() may follow.
        self._end_term()

    def release(self) -> None:
        """Give the Lease up now (graceful shutdown): clear its holder if it is still ours."""
        self._released.set()
        with self._lock:
            try:
                lease = self._get()
                if lease is not None and _spec(lease).get("holderIdentity") == self.identity:
                    spec = dict(_spec(lease))
                    spec.update(
                        holderIdentity="",
                        leaseDurationSeconds=1,
                        renewTime=_micro_time(),
                    )
                    lease["spec"] = spec
                    request_json(self._api, "PUT", self._path, body=lease)
                    logger.info("released lease %s/%s", self._namespace, self._name)
            except Exception as exc:
                # The lease then expires on its own after its duration.
                logger.warning(
                    "could not release lease %s/%s: %s", self._namespace, self._name, exc
                )
        self._end_term()

    # -- internals ------------------------------------------------------------------------

    def _should_stop(self, stop: threading.Event) -> bool:
        return stop.is_set() or self._released.is_set()

    def _acquire(self, stop: threading.Event) -> bool:
        logger.info("%s: trying to acquire lease %s/%s", self.identity, self._namespace, self._name)
        while not self._should_stop(stop):
            if self._try_acquire_or_renew():
                logger.info("%s: acquired lease %s/%s", self.identity, self._namespace, self._name)
                return True
            stop.wait(self._retry_period * (1 + random.random() * _JITTER))
        return False

    def _renew_until_lost(self, stop: threading.Event) -> None:
        last_renewed = self._clock()
        while not stop.wait(self._retry_period):
            if self._released.is_set():
                return
            if self._try_acquire_or_renew():
                last_renewed = self._clock()
                continue
            if self._observed_holder() not in ("", self.identity):
                logger.warning(
                    "%s: lease %s/%s taken by %s; stepping down",
                    self.identity,
                    self._namespace,
                    self._name,
                    self._observed_holder(),
                )
                return
            if self._clock() - last_renewed > self._renew_deadline:
                logger.warning(
                    "%s: could not renew lease %s/%s within %.1fs; stepping down",
                    self.identity,
                    self._namespace,
                    self._name,
                    self._renew_deadline,
                )
                return

    def _start_term(self) -> None:
        self._leading = True
        try:
            self._on_started()
        except Exception:
            logger.exception("%s: on_started_leading failed", self.identity)

    def _end_term(self) -> None:
        with self._lock:
            was_leading, self._leading = self._leading, False
        if was_leading:
            logger.info("%s: stopped leading", self.identity)
            try:
                self._on_stopped()
            except Exception:
                logger.exception("%s: on_stopped_leading failed", self.identity)

    def _observed_holder(self) -> str:
        return str((self._observed_spec or {}).get("holderIdentity") or "")

    def _get(self) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = request_json(self._api, "GET", self._path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return lease

    def _try_acquire_or_renew(self) -> bool:
        with self._lock:
            if self._released.is_set():
                return False
            try:
                return self._try_locked()
            except ApiException as exc:
                # 409: someone wrote the Lease since our read — lost this round, not an error.
                level = logging.INFO if exc.status == 409 else logging.WARNING
                logger.log(
                    level, "%s: lease update failed: %s %s", self.identity, exc.status, exc.reason
                )
                return False
            except Exception as exc:
                logger.warning(
                    "%s: lease update failed: %s: %s", self.identity, type(exc).__name__, exc
                )
                return False

    def _try_locked(self) -> bool:
        now_text = _micro_time()
        now = self._clock()
        lease = self._get()
        if lease is None:
            spec = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self._lease_seconds,
                "acquireTime": now_text,
                "renewTime": now_text,
                "leaseTransitions": 0,
            }
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._name, "namespace": self._namespace},
                "spec": spec,
            }
            created = request_json(
                self._api,
                "POST",
                f"/apis/coordination.k8s.io/v1/namespaces/{self._namespace}/leases",
                body=body,
            )
            self._observe(_spec(created), now)
            return True

        old = _spec(lease)
        if old != self._observed_spec:
            self._observe(old, now)
        holder = str(old.get("holderIdentity") or "")
        duration = float(old.get("leaseDurationSeconds") or self._lease_seconds)
        if holder and holder != self.identity and now < self._observed_at + duration:
            return False  # held by another replica, and not expired on our clock

        spec = dict(old)
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=self._lease_seconds,
            renewTime=now_text,
        )
        if holder != self.identity:
            spec["acquireTime"] = now_text
            spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
        lease["spec"] = spec
        # PUT with the resourceVersion we just read: the precondition that makes a race
        # between two candidates end with exactly one winner (the other gets 409).
        updated = request_json(self._api, "PUT", self._path, body=lease)
        self._observe(_spec(updated), now)
        return True

    def _observe(self, spec: dict[str, Any], now: float) -> None:
        self._observed_spec = spec
        self._observed_at = now


def _spec(lease: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = lease.get("spec") or {}
    return spec
