"""Which import objects are the agent's, and which name a key's derived Service takes
(docs/reference.md#export-path, #import-path).

**Ownership is a chain of uids, never a label alone.** A ServiceImport is ours when it
carries `app.kubernetes.io/managed-by: mcsync`; a derived Service when it carries that
label *and* a controller ownerReference to our ServiceImport's uid; a mirrored
EndpointSlice when it carries the label and a controller ownerReference to our derived
Service's uid (`member.imports.importspec.owned_by`). Anyone can write a label; only the object we
created names our object's uid. Everything else is foreign: never updated, adopted or
deleted, whatever labels it carries.

A Service or slice that names one of *our* earlier owners — a derived Service of the key
whose ServiceImport was deleted and made again — is not foreign but an orphan: the garbage
collector removes it (its owner is gone), and the key waits for that rather than moving to
another name or warning anybody.

**Derived names never collide** (`DerivedServices.choose`). A key's derived Service is
`mcsync-` + 10 hex characters of SHA-256 of the Service name; when that name is taken by
another key's derived Service (40 bits collide: `s84a58` and `s255c6d` do) or by a foreign
object, 20, then 56. The choice is never stored: it is read from what exists, so it is the
same after a restart or relist — our Service on any of the names is the key's, whatever is
on the shorter names by then, and each key keeps its name and ClusterSetIP while imported.

**In the way** (`InTheWay`). A foreign object on a name we need is left alone with one
Warning Event per object (not one per retry: its uid is remembered), and the keys it holds
up are remembered by the object's name, so that its change or deletion queues them again:
the key completes as soon as the way is clear, without a restart. The importer feeds
`InTheWay.cleared()` every event of the kinds it watches for that purpose (the managed
Services and slices, and the export side's Services: every Service of the watched
namespaces).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from member.imports.importspec import DERIVED_PREFIX, SERVICEIMPORT_KIND, is_managed, owned_by
from shared.constants import LABEL_MCS_SERVICE_NAME

__all__ = ["DerivedChoice", "DerivedServices", "InTheWay", "Recorder", "is_orphan_of"]

_DERIVED_CHARS = (10, 20, 56)
# Foreign objects warned about (by uid) remembered at most; the oldest are forgotten first,
# and warned about again should they still be in the way.
_WARNED_MAX = 4096


class Lister(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...


class Recorder(Protocol):
    """`member.kube.events.EventRecorder`'s one call."""

    def record(self, obj: dict[str, Any], *, type: str, reason: str, message: str) -> None: ...


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _names(service_name: str) -> tuple[str, ...]:
    """`member.imports.importspec.derived_service_names`, from one SHA-256 (the hot path's cost)."""
    digest = hashlib.sha256(service_name.encode("utf-8")).hexdigest()
    return tuple(DERIVED_PREFIX + digest[:chars] for chars in _DERIVED_CHARS)


def is_orphan_of(obj: Mapping[str, Any] | None, *, kind: str, name: str, uid: str | None) -> bool:
    """True when `obj` carries our label and a controller ownerReference to a `kind` named
    `name` whose uid is not `uid` (the owner we have now, or None): one of ours from an
    owner since deleted, which the garbage collector is removing."""
    if obj is None or not is_managed(obj):
        return False
    for ref in _meta(obj).get("ownerReferences") or []:
        if (
            isinstance(ref, Mapping)
            and ref.get("controller")
            and ref.get("kind") == kind
            and ref.get("name") == name
            and ref.get("uid") != uid
        ):
            return True
    return False


@dataclass(frozen=True, slots=True)
class DerivedChoice:
    """Where a key's derived Service is, or goes.

    `name`: our derived Service's name, else the first free name; None when there is none
    (`awaiting` or every name in the way). `ours`: our derived Service, when it exists.
    `in_the_way`: the foreign objects on the names before `name`. `awaiting`: an orphan of
    the key on a name before `name`, which the garbage collector is removing: wait for it.
    """

    name: str | None
    ours: dict[str, Any] | None
    in_the_way: tuple[dict[str, Any], ...] = ()
    awaiting: dict[str, Any] | None = None


class DerivedServices:
    """Finds a key's derived Service among its names, and chooses the name of a new one.

    `managed`: the Services labelled managed-by mcsync (the importer's cache, corrected by
    our writes); `others`: every other Service of the watched namespaces (the export side's
    cache), None when it is not known (then a foreign Service without our label shows up as
    a refused create, retried); `service_imports`: the cluster's ServiceImports.
    """

    def __init__(
        self, *, managed: Lister, service_imports: Lister, others: Lister | None = None
    ) -> None:
        self._managed = managed
        self._others = others
        self._service_imports = service_imports

    def names(self, key: str) -> tuple[str, ...]:
        return _names(key.partition("/")[2])

    def ours(self, key: str, service_import: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Our derived Service of `key`: on one of its names, owned by `service_import`
        (which must be our ServiceImport of `key`; None: there is none, nor a Service)."""
        if service_import is None or not is_managed(service_import):
            return None
        namespace = key.partition("/")[0]
        for name in self.names(key):
            found = self._managed.get(f"{namespace}/{name}")
            if found is not None and owned_by(found, service_import):
                return found
        return None

    def choose(self, key: str, service_import: Mapping[str, Any]) -> DerivedChoice:
        """Our derived Service of `key` if it exists; else the first of its names that is
        free, skipping another key's derived Service and foreign objects
        (docs/reference.md#import-path)."""
        ours = self.ours(key, service_import)
        if ours is not None:
            return DerivedChoice(name=str(_meta(ours).get("name")), ours=ours)
        namespace, _, service = key.partition("/")
        uid = _meta(service_import).get("uid")
        in_the_way: list[dict[str, Any]] = []
        for name in self.names(key):
            found = self._managed.get(f"{namespace}/{name}")
            if found is None and self._others is not None:
                found = self._others.get(f"{namespace}/{name}")
            if found is None:
                return DerivedChoice(name=name, ours=None, in_the_way=tuple(in_the_way))
            if is_orphan_of(found, kind=SERVICEIMPORT_KIND, name=service, uid=uid):
                return DerivedChoice(name=None, ours=None, awaiting=found)
            if not self._derived_of_another_key(namespace, found):
                in_the_way.append(found)
        return DerivedChoice(name=None, ours=None, in_the_way=tuple(in_the_way))

    def _derived_of_another_key(self, namespace: str, service: Mapping[str, Any]) -> bool:
        """True when `service` is our derived Service of another key (by its uid chain)."""
        other = (_meta(service).get("labels") or {}).get(LABEL_MCS_SERVICE_NAME)
        if not other:
            return False
        owner = self._service_imports.get(f"{namespace}/{other}")
        return is_managed(owner) and owned_by(service, owner)


class InTheWay:
    """Foreign objects in the way of keys: one Warning Event each, and the keys queued
    again when such an object changes or goes (see the module doc)."""

    def __init__(self, events: Recorder | None = None) -> None:
        self._events = events
        self._lock = threading.Lock()
        # (kind, "namespace/name") -> the keys it holds up
        self._waiting: dict[tuple[str, str], set[str]] = {}
        self._warned: OrderedDict[tuple[str, str, str, str], None] = OrderedDict()

    def hold(self, key: str, kind: str, obj: Mapping[str, Any]) -> None:
        """`obj` (of `kind`) holds up `key`: queue `key` when `obj` changes or goes."""
        meta = _meta(obj)
        where = (kind, f"{meta.get('namespace')}/{meta.get('name')}")
        with self._lock:
            self._waiting.setdefault(where, set()).add(key)

    def warn(self, obj: dict[str, Any], *, reason: str, message: str) -> bool:
        """One Warning Event about the foreign `obj`, once per object (uid); answers True
        when it was recorded now."""
        meta = _meta(obj)
        where = f"{meta.get('namespace')}/{meta.get('name')}"
        seen = (str(obj.get("kind")), where, str(meta.get("uid")), reason)
        with self._lock:
            if seen in self._warned:
                self._warned.move_to_end(seen)
                return False
            self._warned[seen] = None
            while len(self._warned) > _WARNED_MAX:
                self._warned.popitem(last=False)
        if self._events is not None:
            self._events.record(obj, type="Warning", reason=reason, message=message)
        return True

    def cleared(self, kind: str, obj: Mapping[str, Any] | None) -> set[str]:
        """An event of `obj` (of `kind`): the keys it held up, to queue again (forgotten
        here; a reconcile that still finds it in the way holds them again)."""
        if obj is None:
            return set()
        meta = _meta(obj)
        with self._lock:
            if not self._waiting:
                return set()
            return self._waiting.pop((kind, f"{meta.get('namespace')}/{meta.get('name')}"), set())

    def waiting(self) -> int:
        """How many objects hold up keys now."""
        with self._lock:
            return len(self._waiting)
