"""The full-state sync routes' shared step: the store's sync call, its 422, its log line.

A member's sync (`PUT /clusters/{cluster}/serviceexports`, `…/endpointslices`) upserts
what it sends and withdraws the cluster's others in one store call. The store refuses a
list it cannot apply as a whole (the same object listed twice) with `ValueError`: that is
the client's list, a 422 on `items`, and nothing is written. Both kinds then log one
decision line with the four counts, under the same field names, so one query over the
logs reads either.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from hub.api.status import ApiError
from hub.logs import fields
from shared.models import SyncResult


async def apply_sync(
    log: logging.Logger, message: str, cluster: str, sync: Awaitable[SyncResult]
) -> SyncResult:
    """Await the store's `sync`; a refused list is a 422 on `items`; log `message` with
    the counts."""
    try:
        result = await sync
    except ValueError as exc:  # e.g. the same object listed twice
        raise ApiError.invalid("items", str(exc)) from None
    log.info(
        message,
        extra=fields(
            cluster=cluster,
            created=result.created,
            updated=result.updated,
            unchanged=result.unchanged,
            withdrawn=result.withdrawn,
        ),
    )
    return result
