"""DerivedServiceReconciler: one key → the Service that gives its ClusterSetIP (SPEC §2.8).

`reconcile("namespace/name")` reads top to bottom:

1. Nothing to import here — no hub import, out of scope, or the key's ServiceImport is
   someone else's (`ForeignImports`) → delete our derived Service if there is one.
2. Our ServiceImport is not in the cache yet → wait: it is the owner the Service must name,
   and its arrival queues this key again.
3. Create the Service, or update it when a field we state differs. Two changes Kubernetes
   refuses in place — headless ↔ ClusterSetIP (`clusterIP` is immutable) and another
   primary IP family — are a delete then a create.

The Service's allocated `clusterIPs` flow back into `ServiceImport.spec.ips` through the
ServiceImport reconciler (a Service event queues the key there).
"""

from __future__ import annotations

import logging
from typing import Any

from member.importspec import (
    create_body,
    derived_service_name,
    desired_derived_service,
    is_managed,
    matches,
    overlay,
)
from member.reconcilers.importbase import ImportReconciler

__all__ = ["DerivedServiceReconciler"]

logger = logging.getLogger(__name__)

KIND = "Service"


def _needs_recreate(desired: dict[str, Any], existing: dict[str, Any]) -> bool:
    """True when `existing` cannot be updated into `desired` (immutable fields)."""
    want, have = desired["spec"], existing.get("spec") or {}
    if (want.get("clusterIP") == "None") != (have.get("clusterIP") == "None"):
        return True
    families, current = want.get("ipFamilies") or [], have.get("ipFamilies") or []
    return bool(families and current and families[0] != current[0])


class DerivedServiceReconciler(ImportReconciler):
    CONTROLLER = "derivedservice"
    KIND = KIND
    SPAN = "reconcile derived Service"

    def _reconcile(self, key: str) -> str:
        namespace, _, name = key.partition("/")
        service_name = derived_service_name(name)
        existing = self._services.get(f"{namespace}/{service_name}")
        if existing is not None and not is_managed(existing):
            existing = None  # never ours to touch (the informer only brings managed ones)
        owner = self._service_imports.get(key)
        imported = self._imports.get(key)

        # 1. Nothing of ours may exist for the key here.
        if (
            imported is None
            or not self._scope.allows(key)
            or (owner is not None and not is_managed(owner))
        ):
            if existing is None:
                return "absent"
            self.check_write(KIND, "delete")
            self._writer.delete(namespace, service_name, uid=existing["metadata"].get("uid"))
            logger.info("%s: derived Service %s deleted", key, service_name, extra=self.fields(key))
            return "deleted"

        # 2. The owner first.
        if owner is None:
            return "waiting"

        # 3. Create, update, or (immutable fields) replace.
        desired = desired_derived_service(imported, owner=owner)
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
