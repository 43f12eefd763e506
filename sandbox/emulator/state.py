"""One emulated cluster's state plus the test controls, usable in-process or over HTTP.

`EmulatorState` is what a test holds (`kube_cluster.state`): it owns the store and the
registry, and adds what only tests need — compact the history, close every watch, pause
the apiserver (503 to everything), count requests per verb and resource, make the next
update of an object fail with 409 — and small helpers to seed or inspect objects without
going through HTTP. The agent never sees any of this; the same controls are served under
`/emulator/…` for tests that drive an emulator running as a separate process.

A fresh cluster holds what a new real cluster holds that the agent may look at: the
Namespaces `default`, `kube-system`, `kube-public` and `kube-node-lease` (plus any the
caller names), and the CRDs of the custom resources it serves (the About API's
`ClusterProperty` only with `about_api=True`: its CRD is an optional install). The garbage
collector runs from the start; the EndpointSlice stand-in (`endpoints.py`) only when
given an address range.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from sandbox.emulator.collector import GarbageCollector
from sandbox.emulator.crds import crd_object
from sandbox.emulator.endpoints import EndpointSliceController
from sandbox.emulator.errors import KubeError
from sandbox.emulator.registry import Registry
from sandbox.emulator.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    DEFAULT_MCS_VERSIONS,
    NAMESPACES,
    ResourceCatalog,
    ResourceType,
)
from sandbox.emulator.selectors import FieldSelector, LabelSelector
from sandbox.emulator.store import Obj, Store

WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})
SYSTEM_NAMESPACES: tuple[str, ...] = ("default", "kube-system", "kube-public",
                                      "kube-node-lease")


@dataclass(frozen=True)
class RequestRecord:
    """One API request the emulator served (or refused), for assertions in tests."""

    verb: str  # get, list, watch, create, update, patch, delete
    resource: str  # plural, with "/status" for the subresource
    namespace: str | None
    name: str | None
    code: int


class EmulatorState:
    """Objects, history and test controls of one emulated member cluster."""

    def __init__(
        self,
        *,
        mcs_versions: tuple[str, ...] | list[str] = DEFAULT_MCS_VERSIONS,
        history: int = 1000,
        bookmark_interval: float = 5.0,
        default_watch_timeout: float = 1800.0,
        namespaces: tuple[str, ...] | list[str] = (),
        about_api: bool = False,
        service_ip_families: tuple[str, ...] = ("IPv4", "IPv6"),
        endpoint_cidr: str | None = None,
    ) -> None:
        self.catalog = ResourceCatalog(mcs_versions=mcs_versions, about_api=about_api)
        self.store = Store(history=history)
        self.registry = Registry(self.store)
        # The service CIDRs' families: ("IPv4",) makes a single-stack cluster.
        self.registry.allocator.families = tuple(service_ip_families)
        self.collector = GarbageCollector(self.registry, self.catalog)
        # Demo fleets only (`mcsync sandbox`): tests write the EndpointSlices they need.
        self.endpoints = (EndpointSliceController(self.registry, cidr=endpoint_cidr)
                          if endpoint_cidr else None)
        for namespace in dict.fromkeys((*SYSTEM_NAMESPACES, *namespaces)):
            self.create_namespace(namespace)
        for rt in self.catalog.custom_types:
            crd = crd_object(rt)
            for condition in crd["status"]["conditions"]:
                condition["lastTransitionTime"] = self.registry.clock()
            self.registry.create(CUSTOM_RESOURCE_DEFINITIONS, None, crd)
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        self._paused = threading.Event()
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._log: deque[RequestRecord] = deque(maxlen=10_000)

    @property
    def mcs_versions(self) -> tuple[str, ...]:
        return self.catalog.mcs_versions

    @property
    def resource_version(self) -> int:
        return self.store.resource_version

    # -- controls ------------------------------------------------------------------------

    def compact(self) -> int:
        """Drop the event history: a watch from any older resourceVersion now gets 410."""
        return self.store.compact()

    def close_watches(self) -> int:
        """End every open watch stream; answers how many were open."""
        return self.store.close_watches()

    def open_watches(self) -> int:
        return self.store.open_watches()

    def pause(self, *, close_watches: bool = True) -> None:
        """Simulate an apiserver outage: 503 to every API request until `unpause()`.

        Open watches are closed too (an outage breaks them), unless told otherwise.
        """
        self._paused.set()
        if close_watches:
            self.store.close_watches()

    def unpause(self) -> None:
        self._paused.clear()

    @property
    def paused(self) -> bool:
        return self._paused.is_set()

    def inject_conflict(self, resource: str, namespace: str | None, name: str,
                        times: int = 1) -> None:
        """The next `times` updates/patches of this object (main or status) answer 409."""
        self.registry.inject_conflict(self.catalog.by_plural(resource), namespace, name, times)

    # -- request accounting ----------------------------------------------------------------

    def record(self, record: RequestRecord) -> None:
        with self._lock:
            self._counts[(record.verb, record.resource)] += 1
            self._log.append(record)

    def request_counts(self) -> dict[tuple[str, str], int]:
        """{(verb, resource): count}, e.g. {("patch", "serviceexports/status"): 3}."""
        with self._lock:
            return dict(self._counts)

    def count(self, verb: str | None = None, resource: str | None = None) -> int:
        """Requests matching `verb` and `resource` (None matches any)."""
        with self._lock:
            return sum(
                n for (v, r), n in self._counts.items()
                if (verb is None or v == verb) and (resource is None or r == resource)
            )

    def writes(self, resource: str) -> int:
        """Create/update/patch/delete requests on `resource` (e.g. "services")."""
        return sum(self.count(v, resource) for v in WRITE_VERBS)

    def requests(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._log)

    def reset_request_counts(self) -> None:
        with self._lock:
            self._counts.clear()
            self._log.clear()

    # -- in-process object helpers (no HTTP, same rules, watchers see the events) ----------

    def _rt(self, resource: str) -> ResourceType:
        return self.catalog.by_plural(resource)

    def create(self, resource: str, namespace: str | None, obj: dict[str, Any]) -> Obj:
        """Create as the API does, except that a missing namespace is created first (a test
        seeding objects plays the operator who ran `kubectl create namespace`)."""
        rt = self._rt(resource)
        if rt.namespaced and namespace:
            self.create_namespace(namespace)
        return self.registry.create(rt, namespace, obj)

    def create_namespace(self, name: str) -> Obj:
        """The Namespace `name`, created unless it exists."""
        existing = self.get("namespaces", None, name)
        if existing is not None:
            return existing
        try:
            return self.registry.create(NAMESPACES, None, {"metadata": {"name": name}})
        except KubeError as exc:
            if exc.code != 409:
                raise
            return self.get("namespaces", None, name) or {}  # another thread won the race

    def wait_collected(self, timeout: float = 10.0) -> bool:
        """Wait until the garbage collector has run every deletion queued so far."""
        return self.collector.wait_idle(timeout)

    def close(self) -> None:
        """Stop the garbage collector thread (the server calls this when it stops)."""
        self.collector.stop()
        if self.endpoints is not None:
            self.endpoints.stop()

    def get(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        return self.store.get(self.registry.key(self._rt(resource), namespace, name))

    def list(self, resource: str, namespace: str | None = None) -> list[Obj]:
        return self.registry.list(
            self._rt(resource), namespace, labels=LabelSelector(), fields=FieldSelector()
        ).items

    def update(self, resource: str, namespace: str | None, obj: dict[str, Any], *,
               status: bool = False) -> Obj:
        name = obj["metadata"]["name"]
        return self.registry.update(self._rt(resource), namespace, name, obj, status=status)

    def delete(self, resource: str, namespace: str | None, name: str) -> Obj:
        return self.registry.delete(self._rt(resource), namespace, name)[0]
