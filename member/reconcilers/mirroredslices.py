"""MirroredSliceReconciler: one key → the EndpointSlices that mirror every source cluster's
slices of it (SPEC §2.8).

`reconcile("namespace/name")` reads top to bottom:

1. Nothing to import here — no hub import, out of scope, or the key's ServiceImport is
   someone else's → delete every managed slice of the key.
2. Our derived Service is not in the cache yet → wait: it is the owner every slice names,
   and its arrival queues this key again.
3. Compare the desired slices (`member.importspec.desired_slices`, one per source slice
   whose cluster serves a port of the import) with the managed slices of the key, by name:
   create the missing, update the differing, delete the rest. An unchanged slice is never
   rewritten, so one endpoint change in a source cluster — one changed source slice — costs
   exactly one EndpointSlice write here, as the Kubernetes EndpointSlice reconciler's
   changes do.
"""

from __future__ import annotations

import logging
from typing import Unpack

from member.importspec import (
    create_body,
    derived_service_name,
    desired_slices,
    is_managed,
    matches,
    overlay,
)
from member.reconcilers.importbase import ImportDeps, ImportReconciler, ManagedIndex

__all__ = ["MirroredSliceReconciler"]

logger = logging.getLogger(__name__)

KIND = "EndpointSlice"


class MirroredSliceReconciler(ImportReconciler):
    CONTROLLER = "mirroredslices"
    KIND = KIND
    SPAN = "reconcile mirrored EndpointSlices"

    def __init__(self, *, slices: ManagedIndex, **deps: Unpack[ImportDeps]) -> None:
        """`slices`: the managed EndpointSlices by key; `deps`: every import reconciler's."""
        super().__init__(**deps)
        self._slices = slices

    def _reconcile(self, key: str) -> str:
        namespace, _, name = key.partition("/")
        existing = {n: s for n, s in self._slices.objects(key).items() if is_managed(s)}
        owner_import = self._service_imports.get(key)
        imported = self._imports.get(key)
        owner = self._services.get(f"{namespace}/{derived_service_name(name)}")

        # 1. Nothing of ours may exist for the key here.
        if (
            imported is None
            or not self._scope.allows(key)
            or (owner_import is not None and not is_managed(owner_import))
        ):
            for slice_name, obj in existing.items():
                self.check_write(KIND, "delete")
                self._writer.delete(namespace, slice_name, uid=obj["metadata"].get("uid"))
            if existing:
                logger.info(
                    "%s: %d mirrored EndpointSlices deleted",
                    key,
                    len(existing),
                    extra=self.fields(key),
                )
                return "deleted"
            return "absent"

        # 2. The owner first.
        if owner is None or not is_managed(owner):
            return "waiting"

        # 3. Minimal writes, slice by slice.
        desired = desired_slices(imported, self._imports.slices(key), owner=owner)
        writes = 0
        for slice_name, want in desired.items():
            have = existing.get(slice_name)
            if have is None:
                self.check_write(KIND, "create")
                self._writer.create(create_body(want))
                writes += 1
            elif not matches(want, have):
                self.check_write(KIND, "update")
                self._writer.replace(overlay(have, want))
                writes += 1
        for slice_name, obj in existing.items():
            if slice_name not in desired:
                self.check_write(KIND, "delete")
                self._writer.delete(namespace, slice_name, uid=obj["metadata"].get("uid"))
                writes += 1
        if writes:
            logger.info("%s: %d mirrored EndpointSlice writes", key, writes, extra=self.fields(key))
            return "written"
        return "up_to_date"
