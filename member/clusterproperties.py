"""What an agent knows of the fleet's cluster properties (docs/reference.md#cluster-properties).

Cluster selection (docs/reference.md#cluster-selection) decides tiers from properties only:
this cluster's own `ClusterProperty` objects (for `@SameAsImporter@`) and those of every
cluster whose exports it imports. The reconcilers read them through `FleetProperties`, a
read-only view, so that selection code does not care where the values come from (the
agent's own About API reads, the hub's import feed) and tests can hand it a plain dict.

`own()` is this cluster's properties as last read from its About API; `of(cluster)` is
another cluster's as the import feed last carried them, or None when the feed has not
carried that cluster (it exports nothing this cluster imports, or is not known yet) — not
the same as `{}` (a known cluster with no properties), so selection can tell "unknown"
from "matches nothing".

`subscribe(callback)` registers a callback called with the set of cluster ids whose
properties changed (this cluster's own id included when its own changed), after the view
already answers the new values: the importing side re-queues the import keys those
clusters export. Callbacks run on the thread that applied the change and must not block.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Protocol, runtime_checkable

__all__ = [
    "FleetProperties",
    "FleetPropertiesView",
    "PropertiesChanged",
]

logger = logging.getLogger(__name__)

PropertiesChanged = Callable[[frozenset[str]], None]


@runtime_checkable
class FleetProperties(Protocol):
    """Read-only cluster properties: this cluster's own, and those of the clusters whose
    exports it imports."""

    def own(self) -> Mapping[str, str]:
        """This cluster's properties (name → value)."""
        ...

    def of(self, cluster: str) -> Mapping[str, str] | None:
        """`cluster`'s properties, or None when they are not known here."""
        ...


class FleetPropertiesView:
    """The concrete `FleetProperties`: fed by the agent's About API reads (`set_own`) and
    by the import feed (`set_cluster`, `forget_cluster`, `replace_all` on a relist).

    Values are held as immutable mappings, replaced whole, so readers on other threads
    never see half an update and need no lock; writers serialise on `_lock`. A write that
    changes nothing notifies nobody, so an unchanged re-read or a repeated feed event costs
    no reconcile.
    """

    def __init__(self, cluster_id: str, own: Mapping[str, str] | None = None) -> None:
        self.cluster_id = cluster_id
        self._own: Mapping[str, str] = MappingProxyType(dict(own or {}))
        self._others: dict[str, Mapping[str, str]] = {}
        self._lock = threading.Lock()
        self._subscribers: list[PropertiesChanged] = []

    # -- FleetProperties ------------------------------------------------------------------
    def own(self) -> Mapping[str, str]:
        return self._own

    def of(self, cluster: str) -> Mapping[str, str] | None:
        if cluster == self.cluster_id:
            return self._own
        return self._others.get(cluster)

    # -- subscription ---------------------------------------------------------------------
    def subscribe(self, callback: PropertiesChanged) -> None:
        """Call `callback(changed_cluster_ids)` after every change that alters a value."""
        with self._lock:
            self._subscribers.append(callback)

    def _notify(self, changed: Iterable[str]) -> None:
        ids = frozenset(changed)
        if not ids:
            return
        for callback in list(self._subscribers):
            try:
                callback(ids)
            except Exception:  # one subscriber's bug must not stop the feed thread
                logger.exception("cluster-properties subscriber failed")

    # -- writers --------------------------------------------------------------------------
    def set_own(self, values: Mapping[str, str]) -> bool:
        """This cluster's own properties, as read from its About API; True when changed."""
        with self._lock:
            if dict(self._own) == dict(values):
                return False
            self._own = MappingProxyType(dict(values))
        self._notify((self.cluster_id,))
        return True

    def set_cluster(self, cluster: str, values: Mapping[str, str]) -> bool:
        """Another cluster's properties, as the import feed carries them; True when changed."""
        if cluster == self.cluster_id:
            return False  # our own come from our About API, never second-hand
        with self._lock:
            held = self._others.get(cluster)
            if held is not None and dict(held) == dict(values):
                return False
            self._others[cluster] = MappingProxyType(dict(values))
        self._notify((cluster,))
        return True

    def forget_cluster(self, cluster: str) -> bool:
        """The feed no longer carries `cluster` (deregistered); True when it was known."""
        with self._lock:
            if self._others.pop(cluster, None) is None:
                return False
        self._notify((cluster,))
        return True

    def replace_all(self, clusters: Mapping[str, Mapping[str, str]]) -> frozenset[str]:
        """After a relist: the feed's full state; answers (and notifies) the changed ids."""
        with self._lock:
            fresh = {c: v for c, v in clusters.items() if c != self.cluster_id}
            changed = {c for c in self._others.keys() - fresh.keys()}
            changed |= {c for c, v in fresh.items()
                        if c not in self._others or dict(self._others[c]) != dict(v)}
            self._others = {c: MappingProxyType(dict(v)) for c, v in fresh.items()}
        ids = frozenset(changed)
        self._notify(ids)
        return ids

