"""DerivedServiceReconciler: one key → the Service that gives its ClusterSetIP
(docs/reference.md#import-path).

`reconcile("namespace/name")` reads top to bottom:

1. Nothing to import here — no hub import, out of scope, or the key's ServiceImport is
   someone else's (`ForeignImports`) → delete our derived Service if there is one. Ours
   means owned by our ServiceImport's uid (`member.imports.importowners`): once that is gone, its
   dependents are the garbage collector's (their owner is gone), not ours to touch.
2. Our ServiceImport is not in the cache yet → wait: it is the owner the Service must name,
   and its arrival queues this key again.
3. Which name (`DerivedServices.choose`): ours where it is, else the first free of the
   key's names (10, 20, 56 hex). A foreign object on a name is left alone with one
   Warning Event; an orphan of ours being collected, or every name in the way, makes the
   key wait, and that object's change or deletion queues it again (`InTheWay`).
4. Create the Service, or update it when a field we state differs. Two changes Kubernetes
   refuses in place — headless ↔ ClusterSetIP (`clusterIP` is immutable) and another
   primary IP family — are a delete then a create. A create or update the API server
   refuses for the Service's IP families (a single-stack cluster) is told to
   `FamilyRefusals`, so the ServiceImport says `Ready=False/IPFamilyNotSupported`, and
   retried like any failure; one it accepts clears that.

The Service's allocated `clusterIPs` flow back into `ServiceImport.spec.ips` through the
ServiceImport reconciler (a Service event queues the key there).
"""

from __future__ import annotations

import logging
from typing import Any, Unpack

from member.controller import (
    DERIVED_SERVICES,
    HELD_BY_SERVICE,
    HUB_IMPORTS,
    NAMESPACES,
    SERVICE_IMPORTS,
    Controller,
    Watch,
)
from member.imports.base import ImportDeps, ImportReconciler
from member.imports.importready import FamilyRefusals, family_refusal
from member.imports.importspec import (
    create_body,
    desired_derived_service,
    is_managed,
    matches,
    overlay,
)
from member.imports.keys import ImportKeys, leading_only
from member.workqueue import WorkQueue

__all__ = ["DerivedServiceReconciler", "derivedservice_controller"]

logger = logging.getLogger(__name__)

KIND = "Service"


def _needs_recreate(desired: dict[str, Any], existing: dict[str, Any]) -> bool:
    """True when `existing` cannot be updated into `desired` (immutable fields)."""
    want, have = desired["spec"], existing.get("spec") or {}
    if (want.get("clusterIP") == "None") != (have.get("clusterIP") == "None"):
        return True
    families, current = want.get("ipFamilies") or [], have.get("ipFamilies") or []
    return bool(families and current and families[0] != current[0])


REASON_IN_THE_WAY = "DerivedServiceNameTaken"


class DerivedServiceReconciler(ImportReconciler):
    CONTROLLER = "derivedservice"
    KIND = KIND
    SPAN = "reconcile derived Service"

    def __init__(
        self, *, refusals: FamilyRefusals | None = None, **deps: Unpack[ImportDeps]
    ) -> None:
        """`refusals`: where a refusal for the Service's IP families is told (step 4)."""
        super().__init__(**deps)
        self._refusals = refusals if refusals is not None else FamilyRefusals()

    def _reconcile(self, key: str) -> str:
        try:
            outcome = self._reconcile_service(key)
        except Exception as exc:
            refused = family_refusal(exc)
            if refused is not None:
                self._refusals.refused(key, refused)
            raise
        if outcome in ("created", "updated", "up_to_date"):
            self._refusals.accepted(key)
        elif outcome in ("absent", "deleted"):
            self._refusals.forget(key)
        return outcome

    def _reconcile_service(self, key: str) -> str:
        namespace = key.partition("/")[0]
        owner = self._service_imports.get(key)
        imported = self._imports.get(key)
        ours = self._derived.ours(key, owner)

        # 1. Nothing of ours may exist for the key here.
        if (
            imported is None
            or not self._scope.allows(key)
            or (owner is not None and not is_managed(owner))
        ):
            if ours is None:
                return "absent"
            service_name = ours["metadata"]["name"]
            self.check_write(KIND, "delete")
            self._writer.delete(namespace, service_name, uid=ours["metadata"].get("uid"))
            logger.info("%s: derived Service %s deleted", key, service_name, extra=self.fields(key))
            return "deleted"

        # 2. The owner first.
        if owner is None:
            return "waiting"

        # 3. Which name.
        choice = self._derived.choose(key, owner)
        for foreign in choice.in_the_way:
            self._warn(key, foreign, blocked=choice.name is None)
        if choice.name is None:
            for holder in (*choice.in_the_way, *filter(None, (choice.awaiting,))):
                self._in_the_way.hold(key, KIND, holder)
            return "blocked"
        service_name = choice.name
        existing = choice.ours

        # 4. Create, update, or (immutable fields) replace.
        desired = desired_derived_service(imported, owner=owner, derived_name=service_name)
        if existing is not None and _needs_recreate(desired, existing):
            self.check_write(KIND, "delete")
            self._writer.delete(namespace, service_name, uid=existing["metadata"].get("uid"))
            logger.info(
                "%s: derived Service %s deleted to change its type",
                key,
                service_name,
                extra=self.fields(key),
            )
            existing = None
        if existing is None:
            self.check_write(KIND, "create")
            self._writer.create(create_body(desired))
            logger.info("%s: derived Service %s created", key, service_name, extra=self.fields(key))
            return "created"
        if matches(desired, existing):
            return "up_to_date"
        self.check_write(KIND, "update")
        self._writer.replace(overlay(existing, desired))
        logger.info("%s: derived Service %s updated", key, service_name, extra=self.fields(key))
        return "updated"

    def _warn(self, key: str, foreign: dict[str, Any], *, blocked: bool) -> None:
        """One Warning Event on a foreign Service sitting on one of `key`'s names."""
        name = (foreign.get("metadata") or {}).get("name")
        then = (
            "the import waits until one of its names is free"
            if blocked
            else "its derived Service takes a longer name"
        )
        message = (
            f"mcsync imports {key} and would name its derived Service {name}, but this "
            "Service is not mcsync's (no ownerReference to its ServiceImport), so mcsync "
            f"leaves it alone; {then}"
        )
        self.warn_not_ours(
            key, foreign, api_version="v1", kind=KIND, reason=REASON_IN_THE_WAY,
            message=message, log="%s: Service %s is in the way of the derived Service, left alone",
        )


def derivedservice_controller(
    reconciler: ImportReconciler, queue: WorkQueue, keys: ImportKeys
) -> Controller:
    """The derived-Service controller: for the managed derived Services, watching the hub's
    import feed (its spec shapes the Service), the cluster's ServiceImports when the owner
    appeared, went, went foreign or changed its uid, Namespaces, and the Services that held
    a key up."""
    return Controller(
        name="derivedservice",
        queue=queue,
        reconcile=leading_only(reconciler),
        for_=Watch(DERIVED_SERVICES, keys.of_managed),
        watches=(
            Watch(HUB_IMPORTS, keys.hub_spec),
            Watch(SERVICE_IMPORTS, keys.of_owner_change),
            Watch(NAMESPACES, keys.in_namespace),
            Watch(HELD_BY_SERVICE, keys.of_object),
        ),
    )
