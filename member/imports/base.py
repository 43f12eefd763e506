"""What the three import reconcilers share (docs/reference.md#import-path): scope, the write gate,
the span.

The ServiceImport, derived-Service and mirrored-EndpointSlice reconcilers each read top to
bottom on their own (`member.imports.serviceimport`, `.derivedservice`,
`.mirroredslices`). This module holds only what would otherwise be written three times:

* `ImportScope` — may this cluster hold imports of a key at all? Its namespace exists here
  (namespace sameness) and is not being deleted, is watched (`--namespace`) and is not
  denied (`--deny-namespace`).
  Out of scope means "nothing of ours may exist for the key", so the reconcilers delete
  what they made there (a namespace newly denied, say) rather than leave it behind.
* `ImportReconciler` — the controllers' instrumented pass (`member.reconcilers.instrumented`)
  with the import lag observed after a write, and `check_write()`: a replica that lost its
  Lease stops writing at once (`NotLeading`, as for exports), and a write is counted by
  kind and operation.
* `ManagedIndex` — managed objects of a kind by the Service key they belong to (their
  `multicluster.kubernetes.io/service-name` label and namespace), kept by the informer's
  handler, so a reconcile of one key never scans every slice of the cluster.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, NotRequired, Protocol, TypedDict, Unpack

from opentelemetry import trace

from member.export.serviceexport import Lister
from member.imports.importfeed import ImportView, index_add, index_discard
from member.imports.importmetrics import ImportMetrics
from member.imports.importowners import DerivedServices, InTheWay
from member.kube.importobjects import ObjectWriter
from member.metrics import AgentMetrics
from member.reconcilers.instrumented import NotLeading, run_reconcile
from shared.constants import LABEL_MCS_SERVICE_NAME
from shared.timefmt import utcnow

__all__ = ["ImportDeps", "ImportReconciler", "ImportScope", "ManagedIndex", "NamespaceLister"]


class NamespaceLister(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...


class ImportScope:
    """Which keys this cluster imports: namespace exists, watched, not denied."""

    def __init__(
        self,
        *,
        namespaces: NamespaceLister,
        watched: Iterable[str],
        denied: Iterable[str],
    ) -> None:
        self._namespaces = namespaces
        self._watched = frozenset(watched)
        self._denied = frozenset(denied)

    def allows(self, key: str) -> bool:
        return self.holds(key.partition("/")[0])

    def holds(self, namespace: str) -> bool:
        """The cluster may hold imports in `namespace`: it exists here, is not being
        deleted, is watched and not denied."""
        if namespace in self._denied:
            return False
        if self._watched and namespace not in self._watched:
            return False
        found = self._namespaces.get(namespace)
        if found is None:
            return False
        # A namespace being deleted takes its objects along and refuses new ones (403).
        terminating = (found.get("status") or {}).get("phase") == "Terminating"
        return not terminating and not (found.get("metadata") or {}).get("deletionTimestamp")


def service_key(obj: dict[str, Any]) -> str | None:
    """ "namespace/<Service name>" of a managed object, from its MCS service-name label."""
    metadata = obj.get("metadata") or {}
    name = (metadata.get("labels") or {}).get(LABEL_MCS_SERVICE_NAME)
    namespace = metadata.get("namespace")
    return sys.intern(f"{namespace}/{name}") if name and namespace else None


class ManagedIndex:
    """Service key → names of the managed objects of one kind; fed by `observe()`."""

    def __init__(self, lister: NamespaceLister) -> None:
        self._lister = lister
        self._lock = threading.Lock()
        self._names: dict[str, tuple[str, ...]] = {}

    def observe(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> set[str]:
        """Update the index for one change; answers the Service keys it touches."""
        touched: set[str] = set()
        with self._lock:
            for obj, present in ((old, False), (new, True)):
                key = service_key(obj) if obj is not None else None
                if obj is None or key is None:
                    continue
                touched.add(key)
                name = sys.intern(str((obj.get("metadata") or {}).get("name")))
                if present:
                    index_add(self._names, key, name)
                else:
                    index_discard(self._names, key, name)
        return touched

    def objects(self, key: str) -> dict[str, dict[str, Any]]:
        """name → cached object, of the managed objects of `key`'s Service."""
        namespace = key.partition("/")[0]
        with self._lock:
            names = sorted(self._names.get(key, ()))
        found: dict[str, dict[str, Any]] = {}
        for name in names:
            obj = self._lister.get(f"{namespace}/{name}")
            if obj is not None:
                found[name] = obj
        return found

    def get(self, key: str, name: str) -> dict[str, Any] | None:
        """The cached managed object `name` of `key`'s Service; None when there is none."""
        with self._lock:
            if name not in self._names.get(key, ()):
                return None
        return self._lister.get(f"{key.partition('/')[0]}/{name}")

    def at(self, namespaced_name: str) -> dict[str, Any] | None:
        """The cached object "namespace/name", whichever key (if any) its labels name."""
        return self._lister.get(namespaced_name)

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._names)


# Outcomes that wrote this cluster's objects toward the hub's state: the import lag's end.
WROTE = frozenset({"created", "updated", "written"})


def _always() -> bool:
    return True


class ImportDeps(TypedDict):
    """What every import reconciler is built with: the hub's view, this cluster's
    ServiceImports and Services, the scope, the writer, the metrics, the write gate
    (default: always), the tracer (default: the agent's), the finder of a key's derived
    Service (default: over `services` alone) and the foreign objects in the way (shared by
    the three; default: this reconciler's own, recording no Events)."""

    imports: ImportView
    service_imports: Lister
    services: Lister
    scope: ImportScope
    writer: ObjectWriter
    metrics: AgentMetrics
    import_metrics: ImportMetrics
    may_write: NotRequired[Callable[[], bool]]
    tracer: NotRequired[trace.Tracer | None]
    derived: NotRequired[DerivedServices]
    in_the_way: NotRequired[InTheWay]


class ImportReconciler:
    """Base of the import reconcilers: `reconcile(key)` wraps the subclass's `_reconcile`."""

    CONTROLLER = "import"
    SPAN = "reconcile import"
    KIND = "ServiceImport"  # the object kind it writes: the import lag's label

    def __init__(self, **deps: Unpack[ImportDeps]) -> None:
        self._imports = deps["imports"]
        self._service_imports = deps["service_imports"]
        self._services = deps["services"]
        self._scope = deps["scope"]
        self._writer = deps["writer"]
        self._metrics = deps["metrics"]
        self._import_metrics = deps["import_metrics"]
        self._may_write = deps.get("may_write", _always)
        self._tracer = deps.get("tracer") or trace.get_tracer("mcsync.agent")
        self._derived = deps.get("derived") or DerivedServices(
            managed=self._services, service_imports=self._service_imports
        )
        self._in_the_way = deps.get("in_the_way") or InTheWay()
        # Per key, the newest hub change whose lag was observed: a change counts once.
        self._lag_seen: dict[str, datetime] = {}
        self._lag_lock = threading.Lock()

    def reconcile(self, key: str) -> None:
        """Bring this kind's objects of `key` in line with the hub; raises to be retried."""

        def succeeded(outcome: str) -> None:
            if outcome in WROTE:
                self._observe_lag(key)

        run_reconcile(
            lambda: self._reconcile(key),
            tracer=self._tracer,
            metrics=self._metrics,
            controller=self.CONTROLLER,
            span_name=self.SPAN,
            attributes={"mcsync.key": key},
            succeeded=succeeded,
        )

    def _reconcile(self, key: str) -> str:
        raise NotImplementedError

    def _observe_lag(self, key: str) -> None:
        """One import-lag data point for the newest hub change of `key` not yet counted:
        commit on the hub (the feed's `mcsync.io/changed-at`) to written here."""
        changed = self._imports.changed_at(key)
        if changed is None:
            return
        with self._lag_lock:
            seen = self._lag_seen.get(key)
            if seen is not None and seen >= changed:
                return
            self._lag_seen[key] = changed
        lag_ms = (utcnow() - changed).total_seconds() * 1000
        # Clocks of hub and agent differ a little; a change is never written before it.
        self._import_metrics.lag.labels(self.KIND).observe(max(lag_ms, 0.0))

    def fields(self, key: str) -> dict[str, str]:
        """Structured fields of a decision's log line (docs/reference.md#observability: one line,
        with the key)."""
        return {"key": key, "controller": self.CONTROLLER}

    def warn_not_ours(
        self,
        key: str,
        found: dict[str, Any],
        *,
        api_version: str,
        kind: str,
        reason: str,
        message: str,
        log: str,
    ) -> None:
        """One Warning Event on an object that is not mcsync's where `key` needs one of
        ours (`InTheWay.warn` says it once per object), and one log line then: `log` with
        the key and the object's name in it ("%s: … %s …"), logged by the reconciler's
        module."""
        if self._in_the_way.warn(
            {"apiVersion": api_version, "kind": kind, **found}, reason=reason, message=message
        ):
            name = (found.get("metadata") or {}).get("name")
            logging.getLogger(type(self).__module__).warning(
                log, key, name, extra=self.fields(key)
            )

    def check_write(self, kind: str, operation: str) -> None:
        """Before each write: raise `NotLeading` when this replica may not write; count it."""
        if not self._may_write():
            raise NotLeading(f"not leading: no {operation} of a {kind}")
        self._import_metrics.writes.labels(kind, operation).inc()
