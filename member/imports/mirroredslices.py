"""MirroredSliceReconciler: one key → the EndpointSlices that mirror every source cluster's
slices of it (docs/reference.md#import-path).

`reconcile("namespace/name")` reads top to bottom:

1. Nothing to import here — no hub import, out of scope, or the key's ServiceImport is
   someone else's → delete every slice of ours of the key: owned by our derived Service's
   uid (`member.imports.importowners`); a slice with our labels and any other owner, or none, is
   never ours.
2. Our derived Service is not in the cache yet → wait: it is the owner every slice names,
   and its arrival queues this key again.
3. Which slices to look at. A hub feed event of one source slice names it
   (`ChangedSlices`, marked by the importer as it queues the key): then that slice alone,
   so an endpoint change costs the same at 50 source clusters as at 2. Anything else — the
   hub's ServiceImport (its ports cut every slice), a relist or startup repair, a managed
   slice's own event (a user's edit, or our write coming back), the owner, the namespace,
   a retry — looks at every slice of the key, and deletes the managed ones no source wants.
4. Per slice, the desired `MirroredSlice` (`member.imports.importspec.mirrored_slice`) against the
   slice of ours of that name: create the missing, update the differing, delete the
   unwanted. An unchanged slice is never rewritten, so one changed source slice costs
   exactly one EndpointSlice write here, as the Kubernetes EndpointSlice reconciler's
   changes do. A slice that is not ours on a name we need is left alone: a foreign one
   with one Warning Event, an orphan of our earlier derived Service (being collected)
   without; either holds up that slice alone, and its change or deletion queues the key
   again (`InTheWay`). A foreign slice with our labels elsewhere is warned about too.
5. Cluster selection (docs/reference.md#cluster-selection): for an import with cluster
   selectors, the slices of clusters outside the active set are desired with every
   endpoint `ready: false, serving: false` (`member.imports.selection.masked`). When the
   active set changed since the key's last reconcile, every slice of the key is looked
   at, and only those whose readiness changes differ from what is there: one write each.
6. Each write stands alone: one the API server refuses (a source cluster's slice it finds
   invalid, a name taken by an object we cannot see) is logged and the others are
   written; the reconcile then fails with `SliceWriteErrors`, so the work queue retries
   the key with backoff, and the retry writes only what is still not as it should be.

"Differing" is cheap on the common path: the reconciler remembers, per slice, the
resourceVersion it last found or made equal to which desired tuple. The same
resourceVersion and an equal tuple need no comparison; otherwise the full field-wise
`matches` decides (a user's edit changes the resourceVersion, so it is always seen), on
the cached slice with its endpoints unpacked (`member.transform.unpacked`: the informer
holds them packed), which is also the base of an update.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Set as AbstractSet
from typing import Any, Unpack

from member.controller import (
    DERIVED_SERVICES,
    HELD_BY_SLICE,
    HUB_IMPORTS,
    MIRRORED_SLICES,
    NAMESPACES,
    SERVICE_IMPORTS,
    Controller,
    Event,
    Mapper,
    Watch,
)
from member.imports.base import ImportDeps, ImportReconciler, ManagedIndex
from member.imports.importfeed import SliceRef
from member.imports.importowners import is_orphan_of
from member.imports.importspec import (
    MirroredSlice,
    SourceSlice,
    create_body,
    desired_slices,
    is_managed,
    matches,
    mirrored_body,
    mirrored_slice,
    mirrored_slice_name,
    overlay,
    owned_by,
)
from member.imports.keys import ImportKeys, leading_only
from member.imports.selection import ImportSelections, masked
from member.reconcilers.instrumented import NotLeading
from member.transform import unpacked
from member.workqueue import WorkQueue

__all__ = [
    "ChangedSlices",
    "MirroredSliceReconciler",
    "SliceWriteErrors",
    "mirroredslices_controller",
]

logger = logging.getLogger(__name__)

KIND = "EndpointSlice"
REASON_NOT_OURS = "EndpointSliceNotManaged"


class SliceWriteErrors(Exception):
    """Some of a key's mirrored-slice writes failed (the others were made); retry the key."""

    def __init__(self, key: str, failures: dict[str, str]) -> None:
        self.failures = failures
        detail = "; ".join(f"{name}: {why}" for name, why in sorted(failures.items()))
        super().__init__(f"{key}: {len(failures)} mirrored EndpointSlice writes failed: {detail}")


class ChangedSlices:
    """Per key, the source slices changed since the key's last mirrored-slice reconcile, or
    "every slice" (`mark(key, None)`, which no later mark narrows). Marked before the key is
    queued; taken by the reconcile. A key with no mark — a retry after a failure, say — is
    reconciled whole: looking at every slice is never wrong, only slower."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, set[SliceRef] | None] = {}

    def mark(self, key: str, ref: SliceRef | None) -> None:
        with self._lock:
            if ref is None:
                self._pending[key] = None
                return
            refs = self._pending.setdefault(key, set())
            if refs is not None:
                refs.add(ref)

    def take(self, key: str) -> frozenset[SliceRef] | None:
        """The slices to reconcile for `key`; None for all of them."""
        with self._lock:
            refs = self._pending.pop(key, None)
        return frozenset(refs) if refs else None


def _rv(obj: dict[str, Any]) -> str | None:
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return str(value) if value is not None else None


class MirroredSliceReconciler(ImportReconciler):
    CONTROLLER = "mirroredslices"
    KIND = KIND
    SPAN = "reconcile mirrored EndpointSlices"

    def __init__(
        self,
        *,
        slices: ManagedIndex,
        changed: ChangedSlices | None = None,
        selection: ImportSelections | None = None,
        **deps: Unpack[ImportDeps],
    ) -> None:
        """`slices`: the managed EndpointSlices by key; `changed`: the slices the importer
        named as it queued a key (default: none, every reconcile looks at the whole key);
        `selection`: the keys' cluster selection (None: every cluster's endpoints are
        used); `deps`: every import reconciler's."""
        super().__init__(**deps)
        self._slices = slices
        self._changed = changed if changed is not None else ChangedSlices()
        self._selection = selection
        # key -> the active clusters its slices were last reconciled for (selecting keys).
        self._applied: dict[str, frozenset[str]] = {}
        # key -> mirrored slice name -> (resourceVersion, the desired slice it equals). Only
        # a key's own reconcile touches its entry (one worker per key).
        self._equal: dict[str, dict[str, tuple[str | None, MirroredSlice]]] = {}

    def _reconcile(self, key: str) -> str:
        refs = self._changed.take(key)
        namespace, _, name = key.partition("/")
        owner_import = self._service_imports.get(key)
        imported = self._imports.get(key)
        owner = self._derived.ours(key, owner_import)

        # 1. Nothing of ours may exist for the key here.
        if (
            imported is None
            or not self._scope.allows(key)
            or (owner_import is not None and not is_managed(owner_import))
        ):
            self._equal.pop(key, None)
            self._applied.pop(key, None)
            if self._selection is not None:
                self._selection.forget(key)
            ours = self._owned(key, owner)
            for slice_name, obj in ours.items():
                self.check_write(KIND, "delete")
                self._writer.delete(namespace, slice_name, uid=obj["metadata"].get("uid"))
            if ours:
                logger.info(
                    "%s: %d mirrored EndpointSlices deleted",
                    key,
                    len(ours),
                    extra=self.fields(key),
                )
                return "deleted"
            return "absent"

        # 2. The owner first.
        if owner is None:
            return "waiting"
        owner_name = str(owner["metadata"]["name"])
        active = self._active(key, imported)
        if refs is not None and self._applied.get(key) != active:
            refs = None  # a switch: every slice's readiness may change

        # 3. The changed source slices, or every slice of the key.
        synced: dict[str, SourceSlice] = {}  # a live change's sources: their sync latency
        desired: dict[str, MirroredSlice | None]
        existing: dict[str, dict[str, Any]]
        if refs is None:
            sources = self._imports.slices(key)
            for each in sources:  # each source cluster's sync-latency series, from 0
                self._import_metrics.sync_latency.labels(each.cluster)
            desired = {
                n: self._gated(want, active)
                for n, want in desired_slices(imported, sources, owner=owner).items()
            }
            existing = self._owned(key, owner)
            self._warn_foreign(key, owner, desired.keys())
            equal = self._equal[key] = {
                n: seen for n, seen in self._equal.get(key, {}).items() if n in desired
            }
        else:
            desired, existing = {}, {}
            for ref in refs:
                slice_name = mirrored_slice_name(name, ref.cluster, ref.name, derived=owner_name)
                source = self._imports.slice(namespace, ref)
                if source is not None:
                    synced[slice_name] = source
                desired[slice_name] = self._gated(
                    mirrored_slice(imported, source, owner=owner) if source is not None else None,
                    active,
                )
                have = self._slices.get(key, slice_name)
                if have is not None and owned_by(have, owner):
                    existing[slice_name] = have
            equal = self._equal.setdefault(key, {})

        # 4. Minimal writes, slice by slice; 6. each on its own.
        writes, held, failures = 0, 0, dict[str, str]()
        for slice_name in sorted(desired.keys() | existing.keys()):
            want, have = desired.get(slice_name), existing.get(slice_name)
            if want is not None and have is None:
                found = self._slices.at(f"{namespace}/{slice_name}")
                if found is not None and owned_by(found, owner):
                    have = found  # ours, though its labels no longer say whose
                elif found is not None:
                    self._hold(key, owner, found)
                    held += 1
                    continue
            try:
                if not self._write(key, want, have, equal):
                    continue
            except NotLeading:
                raise
            except Exception as exc:
                failures[slice_name] = str(exc) or type(exc).__name__
                logger.warning(
                    "%s: mirrored EndpointSlice %s not written: %s",
                    key,
                    slice_name,
                    failures[slice_name],
                    extra=self.fields(key),
                )
                continue
            writes += 1
            if slice_name in synced:
                self._observe_sync(synced[slice_name])
        if active is None:
            self._applied.pop(key, None)
        else:
            self._applied[key] = active
        if writes:
            logger.info("%s: %d mirrored EndpointSlice writes", key, writes, extra=self.fields(key))
        if failures:
            raise SliceWriteErrors(key, failures)
        if writes:
            return "written"
        return "blocked" if held else "up_to_date"

    def _active(self, key: str, imported: Any) -> frozenset[str] | None:
        """5. The clusters whose endpoints may be ready here; None: every cluster's."""
        if self._selection is None:
            return None
        selection = self._selection.evaluate(key, imported)
        return frozenset(selection.active_clusters) if selection is not None else None

    @staticmethod
    def _gated(want: MirroredSlice | None, active: frozenset[str] | None) -> MirroredSlice | None:
        """`want`, its endpoints not ready when its cluster is outside `active`."""
        if want is None or active is None or want.cluster in active:
            return want
        return masked(want)

    def _write(
        self,
        key: str,
        want: MirroredSlice | None,
        have: dict[str, Any] | None,
        equal: dict[str, tuple[str | None, MirroredSlice]],
    ) -> bool:
        """Make one slice of ours what `want` says; answers whether it wrote."""
        namespace = key.partition("/")[0]
        if want is None and have is not None:
            self.check_write(KIND, "delete")
            name = str(have["metadata"]["name"])
            self._writer.delete(namespace, name, uid=have["metadata"].get("uid"))
            equal.pop(name, None)
        elif want is not None and have is None:
            self.check_write(KIND, "create")
            answer = self._writer.create(create_body(mirrored_body(want)))
            equal[want.name] = (_rv(answer), want)
        elif want is not None and have is not None and not self._equals(equal, want, have):
            self.check_write(KIND, "update")
            answer = self._writer.replace(overlay(unpacked(have), mirrored_body(want)))
            equal[want.name] = (_rv(answer), want)
        else:
            return False
        return True

    def _observe_sync(self, source: SourceSlice) -> None:
        """One end-to-end sync latency: `source` changed in its cluster at
        `source.observed` (its agent's clock) and is mirrored here now
        (docs/reference.md#observability)."""
        series = self._import_metrics.sync_latency.labels(source.cluster)
        if source.observed is not None:
            series.observe(max(time.time() - source.observed, 0.0))

    def _owned(self, key: str, owner: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        """The slices of `key` that are ours: owned by our derived Service `owner`."""
        if owner is None:
            return {}
        return {n: s for n, s in self._slices.objects(key).items() if owned_by(s, owner)}

    def _hold(self, key: str, owner: dict[str, Any], found: dict[str, Any]) -> None:
        """A slice not ours holds a name we need: leave it (warned about unless it is an
        orphan of ours being collected), and queue `key` again when it changes or goes."""
        owner_meta = owner["metadata"]
        if not is_orphan_of(
            found, kind="Service", name=owner_meta["name"], uid=owner_meta.get("uid")
        ):
            self._warn(key, found, blocked=True)
        self._in_the_way.hold(key, KIND, found)

    def _warn_foreign(
        self, key: str, owner: dict[str, Any], desired: AbstractSet[str]
    ) -> None:
        """Warn about the slices of `key` carrying our labels that are not ours (nor
        orphans of ours) on names we do not need; those on names we need `_in_the_way_of`
        warns about."""
        owner_meta = owner["metadata"]
        for slice_name, found in self._slices.objects(key).items():
            if slice_name in desired or owned_by(found, owner):
                continue
            if not is_orphan_of(
                found, kind="Service", name=owner_meta["name"], uid=owner_meta.get("uid")
            ):
                self._warn(key, found, blocked=False)

    def _warn(self, key: str, found: dict[str, Any], *, blocked: bool) -> None:
        then = (
            "the source slice it would mirror waits until it is gone"
            if blocked
            else "it is not part of the import"
        )
        message = (
            f"this EndpointSlice carries mcsync's labels or name for {key} but is not "
            "mcsync's (no ownerReference to its derived Service), so mcsync leaves it "
            f"alone; {then}"
        )
        self.warn_not_ours(
            key, found, api_version="discovery.k8s.io/v1", kind=KIND, reason=REASON_NOT_OURS,
            message=message, log="%s: EndpointSlice %s is not mcsync's, left alone",
        )

    @staticmethod
    def _equals(
        equal: dict[str, tuple[str | None, MirroredSlice]],
        want: MirroredSlice,
        have: dict[str, Any],
    ) -> bool:
        """Is `have` what `want` says? Remembered per resourceVersion; else field by field."""
        seen = (_rv(have), want)
        if equal.get(want.name) == seen:
            return True
        if not matches(mirrored_body(want), unpacked(have)):
            return False
        equal[want.name] = seen
        return True


def mirroredslices_controller(
    reconciler: ImportReconciler,
    queue: WorkQueue,
    keys: ImportKeys,
    changed: ChangedSlices,
) -> Controller:
    """The mirrored-slice controller: for the managed EndpointSlices, watching the hub's
    import feed (a source slice's change names that slice, step 3), the cluster's
    ServiceImports and the derived Services when an owner appeared, went, went foreign or
    changed its uid, Namespaces, and the slices that held a key up. Every key it queues is
    marked in `changed` first: the one source slice of a hub change, else the whole key."""

    def whole(mapper: Mapper) -> Mapper:
        def mark(event: Event) -> list[tuple[str, bool]]:
            found = list(mapper(event))
            for key, _ in found:
                changed.mark(key, None)
            return found

        return mark

    def hub(event: Event) -> list[tuple[str, bool]]:
        found = keys.hub(event)
        for change in found:
            changed.mark(change.key, change.source)
        return [(change.key, change.bulk) for change in found]

    return Controller(
        name="mirroredslices",
        queue=queue,
        reconcile=leading_only(reconciler),
        for_=Watch(MIRRORED_SLICES, whole(keys.of_managed)),
        watches=(
            Watch(HUB_IMPORTS, hub),
            Watch(SERVICE_IMPORTS, whole(keys.of_owner_change)),
            Watch(DERIVED_SERVICES, whole(keys.of_managed_owner_change)),
            Watch(NAMESPACES, whole(keys.in_namespace)),
            Watch(HELD_BY_SLICE, whole(keys.of_object)),
        ),
    )
