"""How the import side's events name queue keys: the mappers the three import controllers
declare (`member.controller`; docs/reference.md#import-path).

Every key is "namespace/name" of the imported Service, and a key outside the agent's
`--namespace` scope is never queued. The mappers here only read: the indexes the keys come
from (the hub's `ImportView`, the managed objects' `ManagedIndex`) are fed by the
importer's observers before any mapper runs, and what a mapper answers depends only on the
event and on caches. Which controller takes which of these is said beside each reconciler
(`serviceimport_controller`, `derivedservice_controller`, `mirroredslices_controller`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from member.controller import Event
from member.imports.base import ImportReconciler, service_key
from member.imports.importfeed import ImportView, SliceRef, services_of, slice_ref
from member.imports.importspec import is_managed
from member.informer import namespaced_key
from member.reconcilers.instrumented import NotLeading

__all__ = ["HubChange", "ImportKeys", "leading_only"]

logger = logging.getLogger(__name__)

Keys = list[tuple[str, bool]]


class HubChange(NamedTuple):
    """One key a change of the hub's import feed touches. `source`: the one source slice
    that changed (None: the whole key). `slices_only`: the change concerns the key's
    mirrored slices alone (a source slice of a key whose derived Service is here already,
    or any source slice of a relist)."""

    key: str
    bulk: bool
    source: SliceRef | None
    slices_only: bool


def _same_owner(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """True when an event leaves an owner (our ServiceImport for the derived Service, the
    derived Service for the slices) what its dependents read of it: there, ours or not, and
    its uid (their ownerReference). A status write or a user's edit of a field is such an
    event; their reconciles would find nothing to do."""
    if old is None or new is None:
        return False
    return is_managed(old) == is_managed(new) and _uid(old) == _uid(new)


def _uid(obj: dict[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("uid")


@dataclass(frozen=True)
class ImportKeys:
    """The import side's event → key rules. `watched`: the key's namespace is in the
    agent's scope; `owner_here`: the key's derived Service is ours in the cache (its slices
    need nothing else to be reconciled)."""

    view: ImportView
    watched: Callable[[str], bool]
    owner_here: Callable[[str], bool]

    def hub(self, event: Event) -> list[HubChange]:
        """The keys a change of the hub's import feed touches. A live change of a key whose
        derived Service is not here yet concerns all three: its slices wait for that owner,
        and the owner for its ServiceImport, so all three go to the live lane, or the change
        would wait behind a cold start's bulk lanes."""
        obj = event.obj
        is_slice = obj is not None and obj.get("kind") == "EndpointSliceExport"
        changes: list[HubChange] = []
        for key in services_of(event.old, event.new):
            if not self.watched(key):
                continue
            if is_slice and (event.from_relist or self.owner_here(key)):
                changes.append(HubChange(key, event.from_relist, slice_ref(obj), True))
            else:
                changes.append(HubChange(key, event.from_relist, None, False))
        return changes

    def hub_spec(self, event: Event) -> Keys:
        """A hub change that concerns more than the slices: its ServiceImport's spec shapes
        the ServiceImport and the derived Service."""
        return [(c.key, c.bulk) for c in self.hub(event) if not c.slices_only]

    def of_object(self, event: Event) -> Keys:
        """The object's own "namespace/name" (a ServiceImport is named as its Service)."""
        obj = event.obj
        if obj is None:
            return []
        key = namespaced_key(obj)
        return [(key, event.from_relist)] if self.watched(key) else []

    def of_owner_change(self, event: Event) -> Keys:
        """`of_object`, when the owner appeared, went, went foreign or changed its uid
        (an update that leaves it that concerns its dependents not)."""
        return [] if _same_owner(event.old, event.new) else self.of_object(event)

    def of_managed(self, event: Event) -> Keys:
        """The keys a managed object's labels name, before and after the event."""
        keys = {service_key(o) for o in (event.old, event.new) if o is not None}
        return [(k, event.from_relist) for k in sorted(k for k in keys if k is not None)
                if self.watched(k)]

    def of_managed_owner_change(self, event: Event) -> Keys:
        """`of_managed`, when the managed object (an owner) appeared, went, went foreign or
        changed its uid."""
        return [] if _same_owner(event.old, event.new) else self.of_managed(event)

    def of_managed_added(self, event: Event) -> Keys:
        """`of_managed`, for an object that appeared."""
        return self.of_managed(event) if event.old is None else []

    def in_namespace(self, event: Event) -> Keys:
        """Every key the hub imports in the Namespace of the event: a namespace created later
        receives its imports, one deleted takes them along."""
        obj = event.obj
        if obj is None:
            return []
        namespace = str((obj.get("metadata") or {}).get("name"))
        return [(k, event.from_relist) for k in sorted(self.view.keys_in(namespace))
                if self.watched(k)]


def leading_only(reconciler: ImportReconciler) -> Callable[[str], None]:
    """`reconciler.reconcile`, where a key abandoned because this replica stopped leading is
    not an error: the next term's repair queues every key again."""

    def reconcile(key: str) -> None:
        try:
            reconciler.reconcile(key)
        except NotLeading:
            logger.debug("%s: abandoned, this replica stopped leading", key)

    return reconcile
