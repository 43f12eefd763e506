"""What the hub refuses of a member's write before it reaches the store
(docs/reference.md#conflicts, #scope-and-limits).

Two checks need only the request and the hub's settings, so they run in the route (on the
PUT's fast path too, `hub.api.routes.exports._put`), before any database work:

* the hub's `--deny-export-namespace` list: no member exports (or sends slices) from
  these namespaces, whatever its MemberCluster's scope says: 403 naming the rule;
* the `exportCreationTimestamp` bounds: a claim more than a minute ahead of the hub's
  clock would win every key it is exported under until the clock catches up, one before
  2014 every key outright. 422 naming the field and the value (the model refuses the
  lower bound already; the upper one needs the hub's clock).

What needs the cluster's own record — its `spec.exportNamespaces`, its quotas — is
checked by the store with the cluster's row, in the write's transaction
(`hub.store.usage`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from hub.api.status import ApiError, forbidden
from shared.models import InternalServiceExport
from shared.scope import matching_pattern
from shared.validation import export_timestamp_error


def check_namespace(deny: Sequence[str], namespace: str, *, what: str) -> None:
    """403 naming the rule when the hub's deny list matches `namespace`."""
    rule = matching_pattern(namespace, deny)
    if rule is not None:
        raise forbidden(
            f"{what} in namespace {namespace!r} refused: the hub's --deny-export-namespace "
            f"{rule!r} denies it to every member cluster"
        )


def check_export(
    deny: Sequence[str], export: InternalServiceExport, *, now: datetime, prefix: str = ""
) -> None:
    """Both checks of one export: 403 for a denied namespace, 422 for its timestamp."""
    ref = export.spec.service_reference
    check_namespace(deny, ref.namespace, what=f"export of Service {ref.name!r}")
    problem = export_timestamp_error(ref.export_creation_timestamp, now=now)
    if problem is not None:
        raise ApiError.invalid(f"{prefix}spec.serviceReference.exportCreationTimestamp", problem)
