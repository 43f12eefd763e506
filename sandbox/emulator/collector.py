"""The two kube-controller-manager controllers whose deletions the agent must live with.

- **Garbage collector** (`ownerReferences`, background propagation): when an object's
  owners are all gone (matched by uid, as the real collector does), the object is deleted
  shortly after, through the registry, so finalizers hold it and watchers see the usual
  events. Chains follow naturally: a deleted dependent is itself an owner that is now gone.
  An object created with owners that do not exist is deleted too. A delete with
  `propagationPolicy: Orphan` first drops the references (the registry does it with this
  collector's index); Foreground is treated as Background.
- **Namespace controller**: a Namespace marked Terminating has every object in it deleted
  (finalizers respected); once it is empty the Namespace itself goes.

Both are fed by a store listener that runs under the store lock in commit order: it only
updates the owner index and queues work; one daemon thread does the deleting, so a write
answers before its cascade runs, as with the real controllers. The owner index makes each
deletion cost proportional to its dependents, not to the number of stored objects.
"""

from __future__ import annotations

import queue
import threading
from collections import Counter, defaultdict

from sandbox.emulator.errors import KubeError
from sandbox.emulator.registry import Registry
from sandbox.emulator.resources import NAMESPACES, ResourceCatalog
from sandbox.emulator.store import Obj, ObjKey, StoredEvent

_STOP = ("stop",)
# ("dependent", storage_key, namespace, name) | ("namespace", name) | ("finalize", name)
Work = tuple[str, ...]


def _owner_uids(obj: Obj) -> frozenset[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return frozenset(r["uid"] for r in refs if isinstance(r, dict) and r.get("uid"))


class GarbageCollector:
    """Deletes dependents of deleted owners and the contents of terminating namespaces."""

    def __init__(self, registry: Registry, catalog: ResourceCatalog) -> None:
        self.registry = registry
        self.store = registry.store
        self.catalog = catalog
        self._live: dict[str, ObjKey] = {}  # uid -> key of every stored object
        self._dependents: defaultdict[str, set[ObjKey]] = defaultdict(set)  # owner uid -> keys
        self._owners: dict[ObjKey, frozenset[str]] = {}
        self._terminating: set[str] = set()  # namespaces being emptied
        self._in_namespace: Counter[str] = Counter()  # stored objects per namespace
        self._work: queue.Queue[Work] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._pending = 0
        self._pending_lock = threading.Lock()
        self.store.add_listener(self._observe)
        registry.dependents = self.dependents_of
        self._thread = threading.Thread(target=self._run, name="kube-emulator-gc", daemon=True)
        self._thread.start()

    # -- listener (under the store lock: index and queue only) -----------------------------

    def _observe(self, event: StoredEvent) -> None:
        meta = event.obj.get("metadata") or {}
        uid = meta.get("uid")
        key: ObjKey = (event.storage_key, meta.get("namespace") or "", meta.get("name") or "")
        if event.type == "DELETED":
            if uid:
                self._live.pop(uid, None)
                for dependent in sorted(self._dependents.pop(uid, set())):
                    self._queue(("dependent", *dependent))
            for owner in self._owners.pop(key, frozenset()):
                self._dependents.get(owner, set()).discard(key)
            if key[1]:
                self._in_namespace[key[1]] -= 1
                if key[1] in self._terminating and self._in_namespace[key[1]] <= 0:
                    self._queue(("finalize", key[1]))
            if event.storage_key == NAMESPACES.storage_key:
                self._terminating.discard(key[2])
            return
        if uid:
            self._live[uid] = key
        if event.type == "ADDED" and key[1]:
            self._in_namespace[key[1]] += 1
        owners = _owner_uids(event.obj)
        previous = self._owners.get(key, frozenset())
        if owners != previous:
            for owner in previous - owners:
                self._dependents.get(owner, set()).discard(key)
            for owner in owners:
                self._dependents[owner].add(key)
            if owners:
                self._owners[key] = owners
            else:
                self._owners.pop(key, None)
        if owners and not any(o in self._live for o in owners):
            self._queue(("dependent", *key))  # created with owners that do not exist
        if (event.storage_key == NAMESPACES.storage_key and meta.get("deletionTimestamp")
                and key[2] not in self._terminating):
            self._terminating.add(key[2])
            self._queue(("namespace", key[2]))

    def _queue(self, work: Work) -> None:
        with self._pending_lock:
            self._pending += 1
            self._idle.clear()
        self._work.put(work)

    # -- worker ----------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            work = self._work.get()
            if work == _STOP:
                return
            try:
                if work[0] == "dependent":
                    self._collect(work[1], work[2], work[3])
                elif work[0] == "namespace":
                    self._empty_namespace(work[1])
                else:
                    self.registry.finalize_namespace(work[1])
            except KubeError:
                pass  # gone or changed meanwhile: a later event queues it again if needed
            finally:
                with self._pending_lock:
                    self._pending -= 1
                    if self._pending == 0:
                        self._idle.set()

    def _collect(self, storage_key: str, namespace: str, name: str) -> None:
        """Delete the object if none of its owners exists any more."""
        rt = self.catalog.by_plural(storage_key)
        with self.store.transaction():
            obj = self.store.get((storage_key, namespace, name))
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                return
            owners = _owner_uids(obj)
            if not owners or any(o in self._live for o in owners):
                return
            self.registry.delete(rt, namespace or None, name,
                                 {"preconditions": {"uid": obj["metadata"]["uid"]}})

    def _empty_namespace(self, namespace: str) -> None:
        """Delete what is left in a terminating namespace; remove it once empty."""
        for storage_key, ns, name in self.store.keys_in_namespace(namespace):
            obj = self.store.get((storage_key, ns, name))
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            try:
                self.registry.delete(self.catalog.by_plural(storage_key), ns, name)
            except KubeError:
                continue
        self.registry.finalize_namespace(namespace)

    def dependents_of(self, uid: str) -> list[ObjKey]:
        """The objects naming `uid` among their owners (call under the store lock)."""
        return sorted(self._dependents.get(uid, set()))

    # -- control ---------------------------------------------------------------------------

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until every queued deletion ran (tests: "the cascade has happened")."""
        return self._idle.wait(timeout)

    def stop(self) -> None:
        self._work.put(_STOP)
        self._thread.join(5)
