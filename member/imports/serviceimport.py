"""ServiceImportReconciler: one key → this cluster's MCS ServiceImport
(docs/reference.md#import-path).

`reconcile("namespace/name")` reads top to bottom:

1. A ServiceImport of that name that mcsync does not manage → leave it alone, with one
   Warning Event (`ServiceImportNotManaged`) when the key becomes foreign and the
   `mcsync_agent_serviceimports_unmanaged` gauge; the other two reconcilers then write
   nothing for the key either (docs/reference.md#export-path). When it goes, the key is ours again.
2. The hub has no import of the key, or the key is out of scope here (namespace absent,
   not watched, denied) → delete our ServiceImport if there is one; explicitly, never
   trusting the garbage collector alone.
3. Create it, or update it when any field we state differs (`member.imports.importspec.matches`);
   an unchanged object is never rewritten. `spec.ips` comes from the derived Service's
   `clusterIPs`, so a derived Service event queues this key again to fill them in. An
   import with cluster selectors also carries the outcome of this cluster's selection
   (`member.imports.selection`): `mcsync.io/cluster-selector-results` (the clusters of each
   tier), `mcsync.io/active-clusters` and, while a failback waits,
   `mcsync.io/failback-pending-since` (docs/reference.md#cluster-selection).
4. Write `status` through the status subresource, again only when it differs:
   `clusters` and the `Ready` condition (`member.imports.importready`: Ready once the derived
   Service has its IPs and the mirrored slices are written, Pending before,
   IPFamilyNotSupported when the API server refused the derived Service's families).

Inputs are caches (the hub's imports, the cluster's ServiceImports and managed Services);
no reconcile reads the API server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Unpack

from member.controller import (
    DERIVED_SERVICES,
    HELD_BY_SERVICE,
    HUB_IMPORTS,
    MIRRORED_SLICES,
    NAMESPACES,
    SERVICE_IMPORTS,
    Controller,
    Watch,
)
from member.imports.base import ImportDeps, ImportReconciler, ManagedIndex
from member.imports.importready import FamilyRefusals, ready_condition
from member.imports.importspec import (
    OPTIONAL_IMPORT_FIELDS,
    create_body,
    desired_service_import,
    desired_service_import_status,
    desired_slices,
    is_managed,
    matches,
    overlay,
    owned_by,
)
from member.imports.keys import ImportKeys, leading_only
from member.imports.selection import ImportSelections
from member.kube.events import EventRecorder
from member.status import merge_conditions
from member.workqueue import WorkQueue
from shared.constants import MCS_GROUP
from shared.timefmt import utcnow

__all__ = ["ForeignImports", "ServiceImportReconciler", "serviceimport_controller"]

logger = logging.getLogger(__name__)

OUTCOME_FOREIGN = "unmanaged"
OUTCOME_ABSENT = "absent"
OUTCOME_DELETED = "deleted"
OUTCOME_CREATED = "created"
OUTCOME_UPDATED = "updated"
OUTCOME_UP_TO_DATE = "up_to_date"
REASON_NOT_MANAGED = "ServiceImportNotManaged"
KIND = "ServiceImport"


class ForeignImports:
    """Keys whose ServiceImport someone else owns; read by all three reconcilers."""

    def __init__(self, on_change: Callable[[int], None] = lambda _n: None) -> None:
        self._lock = threading.Lock()
        self._keys: set[str] = set()
        self._on_change = on_change

    def mark(self, key: str, foreign: bool) -> bool:
        """Record whether `key` is foreign; answers True when that changed."""
        with self._lock:
            changed = (key in self._keys) != foreign
            if foreign:
                self._keys.add(key)
            else:
                self._keys.discard(key)
            count = len(self._keys)
        if changed:
            self._on_change(count)
        return changed


class ServiceImportReconciler(ImportReconciler):
    CONTROLLER = "serviceimport"
    KIND = KIND
    SPAN = "reconcile ServiceImport"

    def __init__(
        self,
        *,
        events: EventRecorder,
        foreign: ForeignImports,
        optional_fields: frozenset[str] = OPTIONAL_IMPORT_FIELDS,
        refusals: FamilyRefusals | None = None,
        slices: ManagedIndex | None = None,
        selection: ImportSelections | None = None,
        **deps: Unpack[ImportDeps],
    ) -> None:
        """`refusals`: the derived Services the API server refused for their IP families;
        `slices`: the managed EndpointSlices by key (None: the `Ready` condition never sees
        its slices written); `selection`: the keys' cluster selection (None: none)."""
        super().__init__(**deps)
        self._selection = selection
        self._refusals = refusals if refusals is not None else FamilyRefusals()
        self._slices = slices
        self._optional_fields = optional_fields
        self._events = events
        self._foreign = foreign
        self._api_version = f"{MCS_GROUP}/{self._writer.version}"

    def _reconcile(self, key: str) -> str:
        namespace, _, name = key.partition("/")
        existing = self._service_imports.get(key)
        imported = self._imports.get(key)

        # 1. Someone else's ServiceImport: not ours to touch, nor anything of its key.
        if existing is not None and not is_managed(existing):
            if imported is None:
                self._foreign.mark(key, False)
                return OUTCOME_ABSENT  # nothing to import: no dispute with its owner
            if self._foreign.mark(key, True):
                self._events.record(
                    existing,
                    type="Warning",
                    reason=REASON_NOT_MANAGED,
                    message=(
                        f"mcsync imports {key} from the fleet but this ServiceImport is not "
                        "labelled app.kubernetes.io/managed-by=mcsync, so mcsync leaves it "
                        "and the key alone; delete it to let mcsync import the Service"
                    ),
                )
                logger.warning(
                    "%s: ServiceImport not managed by mcsync, left alone",
                    key,
                    extra=self.fields(key),
                )
            return OUTCOME_FOREIGN
        self._foreign.mark(key, False)

        # 2. Nothing to import here: ours goes, explicitly.
        if imported is None or not self._scope.allows(key):
            if existing is None:
                return OUTCOME_ABSENT
            self.check_write(KIND, "delete")
            self._writer.delete(namespace, name, uid=existing["metadata"].get("uid"))
            logger.info(
                "%s: ServiceImport deleted (no longer imported here)", key, extra=self.fields(key)
            )
            return OUTCOME_DELETED

        # 3. The object itself.
        derived = self._derived.ours(key, existing)  # owned by it: the uid chain
        desired = desired_service_import(
            imported,
            api_version=self._api_version,
            derived_service=derived,
            optional_fields=self._optional_fields,
        )
        if self._selection is not None:
            chosen = self._selection.evaluate(key, imported)
            if chosen is not None:
                desired["metadata"]["annotations"].update(
                    self._selection.annotations(key, chosen))
        outcome = OUTCOME_UP_TO_DATE
        current: dict[str, Any]
        if existing is None:
            self.check_write(KIND, "create")
            current = self._writer.create(create_body(desired))
            outcome = OUTCOME_CREATED
            logger.info("%s: ServiceImport created", key, extra=self.fields(key))
        elif not matches(desired, existing):
            self.check_write(KIND, "update")
            current = self._writer.replace(overlay(existing, desired))
            outcome = OUTCOME_UPDATED
            logger.info("%s: ServiceImport updated", key, extra=self.fields(key))
        else:
            current = existing

        # 4. Its status: the exporting clusters and the Ready condition.
        status = desired_service_import_status(imported)
        have = current.get("status") or {}
        spec = desired["spec"]
        headless = spec.get("type") == "Headless"
        condition = ready_condition(
            existing=have,
            headless=headless,
            ips_ready=derived is not None and (headless or bool(spec.get("ips"))),
            slices_written=lambda: self._slices_written(key, imported, derived),
            refusal=self._refusals.verdict(key),
            families=list(spec.get("ipFamilies") or []),
        )
        status["conditions"] = merge_conditions(have.get("conditions"), [condition], now=utcnow())
        if not matches(status, have):
            self.check_write(KIND, "status")
            self._writer.replace_status({**current, "status": status})
            if outcome == OUTCOME_UP_TO_DATE:
                outcome = OUTCOME_UPDATED
        return outcome

    def _slices_written(self, key: str, imported: Any, derived: dict[str, Any] | None) -> bool:
        """Every mirrored slice the hub's source slices call for is ours in the cache."""
        if self._slices is None or derived is None:
            return False
        namespace = key.partition("/")[0]
        wanted = desired_slices(imported, self._imports.slices(key), owner=derived)
        return all(owned_by(self._slices.at(f"{namespace}/{name}"), derived) for name in wanted)


def serviceimport_controller(
    reconciler: ImportReconciler, queue: WorkQueue, keys: ImportKeys
) -> Controller:
    """The ServiceImport controller: for the cluster's ServiceImports (repair a user's
    edit), watching the hub's import feed (its spec shapes the object), managed derived
    Services (`spec.ips` from their clusterIPs), managed slices that appear (`Ready` waits
    for the key's slices to be written), Namespaces, and the Services that held a key up."""
    return Controller(
        name="serviceimport",
        queue=queue,
        reconcile=leading_only(reconciler),
        for_=Watch(SERVICE_IMPORTS, keys.of_object),
        watches=(
            Watch(HUB_IMPORTS, keys.hub_spec),
            Watch(DERIVED_SERVICES, keys.of_managed),
            Watch(MIRRORED_SLICES, keys.of_managed_added),
            Watch(NAMESPACES, keys.in_namespace),
            Watch(HELD_BY_SERVICE, keys.of_object),
        ),
    )
