"""The ServiceImport's `Ready` condition (docs/reference.md#import-path), as the MCS API defines it.

`status.conditions` of this cluster's ServiceImport carries one condition of type `Ready`
with the MCS API's reasons (`sigs.k8s.io/mcs-api` v1beta1):

* `True/Ready` once the derived Service has its IPs (a ClusterSetIP import; a headless one
  needs the Service only) and every mirrored EndpointSlice the hub's slices call for is
  written. It then stays True while the derived Service keeps its IPs: slices coming and
  going afterwards are endpoint churn, and turning the condition over for each would cost
  a status write per endpoint change, against docs/reference.md#import-path's minimal writes.
* `False/IPFamilyNotSupported` when the API server refused the derived Service for its IP
  families (a single-stack cluster asked for IPv6 or RequireDualStack): the import cannot
  be served here whatever mcsync retries. `FamilyRefusals` carries that from the derived
  Service reconciler, which meets the refusal, to the ServiceImport reconciler, which
  writes the condition.
* `False/Pending` before either.

Writes: the condition is written only when its status, reason or message changes, and its
`lastTransitionTime` only moves when its status does (metav1.Condition's rule, the
ServiceExport's helpers in `member.status`). Messages
hold no counts or times, so a condition that says the same thing compares equal: a
restarted agent rewrites nothing. A refusal is known only to the process that met it; after
a restart, until the derived Service reconciler meets it again, an existing
`IPFamilyNotSupported` is kept rather than flipped to Pending and back.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from member.status import make_condition

__all__ = [
    "CONDITION_READY",
    "REASON_IP_FAMILY_NOT_SUPPORTED",
    "REASON_PENDING",
    "REASON_READY",
    "FamilyRefusals",
    "family_refusal",
    "ready_condition",
]

CONDITION_READY = "Ready"
REASON_READY = "Ready"
REASON_PENDING = "Pending"
REASON_IP_FAMILY_NOT_SUPPORTED = "IPFamilyNotSupported"

MESSAGE_READY = (
    "the derived Service has its cluster IPs and the EndpointSlices of every exporting "
    "cluster are written"
)
MESSAGE_READY_HEADLESS = (
    "the derived Service exists and the EndpointSlices of every exporting cluster are written"
)
MESSAGE_PENDING = (
    "waiting for the derived Service's cluster IPs and the mirrored EndpointSlices"
)
# The API server's refusal of a Service for its IP families names one of these fields.
_FAMILY_FIELDS = ("spec.ipFamilies", "spec.ipFamilyPolicy")


def family_refusal(exc: BaseException) -> str | None:
    """The API server's message when `exc` refuses a Service for its IP families, else None."""
    if not isinstance(exc, ApiException) or exc.status != 422:
        return None
    try:
        message = str(json.loads(exc.body or "{}").get("message") or "")
    except (ValueError, AttributeError):
        message = str(exc.body or "")
    return message if any(f in message for f in _FAMILY_FIELDS) else None


class FamilyRefusals:
    """Keys whose derived Service the API server refused for its IP families, per key:
    refused (with the message), accepted, or not known yet (this process has not tried).
    `on_change(key)` runs when a key's verdict changes, to queue its ServiceImport."""

    def __init__(self, on_change: Callable[[str], None] = lambda _key: None) -> None:
        self._lock = threading.Lock()
        self._verdicts: dict[str, str | None] = {}  # key -> message (refused) or None
        self._on_change = on_change

    def refused(self, key: str, message: str) -> None:
        self._set(key, message)

    def accepted(self, key: str) -> None:
        self._set(key, None)

    def forget(self, key: str) -> None:
        with self._lock:
            self._verdicts.pop(key, None)

    def verdict(self, key: str) -> tuple[bool, str | None]:
        """(known, refusal message or None)."""
        with self._lock:
            if key not in self._verdicts:
                return False, None
            return True, self._verdicts[key]

    def _set(self, key: str, message: str | None) -> None:
        with self._lock:
            changed = key not in self._verdicts or self._verdicts[key] != message
            self._verdicts[key] = message
        if changed:
            self._on_change(key)


def ready_condition(
    *,
    existing: Mapping[str, Any] | None,
    headless: bool,
    ips_ready: bool,
    slices_written: Callable[[], bool],
    refusal: tuple[bool, str | None],
    families: list[str],
) -> dict[str, Any]:
    """The `Ready` condition to hold (without `lastTransitionTime`: `merge_conditions` keeps
    or sets it), given the `existing` status. `slices_written` is asked only while the
    condition is not True yet (module docstring)."""
    current = _ready_of(existing)
    known, refused = refusal
    if refused is not None:
        status, reason = "False", REASON_IP_FAMILY_NOT_SUPPORTED
        message = (f"this cluster cannot serve the import's IP families "
                   f"({', '.join(families) or 'none'}): {refused}")
    elif (not known and current is not None and not ips_ready
          and current.get("reason") == REASON_IP_FAMILY_NOT_SUPPORTED):
        # Refused before a restart and not re-learnt yet: keep it.
        status, reason, message = "False", REASON_IP_FAMILY_NOT_SUPPORTED, str(
            current.get("message") or "")
    elif ips_ready and ((current or {}).get("status") == "True" or slices_written()):
        status, reason = "True", REASON_READY
        message = MESSAGE_READY_HEADLESS if headless else MESSAGE_READY
    else:
        status, reason, message = "False", REASON_PENDING, MESSAGE_PENDING
    return make_condition(type_=CONDITION_READY, status=status, reason=reason,
                          message=message, observed_generation=None)


def _ready_of(status: Mapping[str, Any] | None) -> dict[str, Any] | None:
    for condition in (status or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == CONDITION_READY:
            return dict(condition)
    return None
