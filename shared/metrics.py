"""Metric names, labels, buckets and the duration clamp of docs/reference.md#export-path,
#observability.

Only the contract lives here (names and numbers); each side owns its registry. What both
sides measure alike is defined here once: the export-duration histogram, and the buckets of
a hub request's duration — the agent times it as a client, the hub as a server, and with the
same buckets a dashboard can set the two side by side (the gap is network and retries).
"""

from __future__ import annotations

from typing import Final

EXPORT_DURATION_METRIC: Final = "mcsync_service_export_duration_milliseconds"
EXPORT_DURATION_LABEL: Final = "origin_cluster_id"

# The upper six match Azure fleet-networking's buckets for the same metric
# (docs/reference.md#observability).
EXPORT_DURATION_BUCKETS_MS: Final[tuple[float, ...]] = (
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
    25000.0,
    50000.0,
)
EXPORT_DURATION_RIGHT_BOUND_MS: Final = 100000.0
# A non-positive duration (clock skew between the stamp and the observer) is recorded as this.
EXPORT_DURATION_NON_POSITIVE_MS: Final = 1000.0

# End-to-end sync latency (docs/reference.md#observability, mcs-api#160), in the importing agent:
# from the source agent's first sight of an EndpointSlice change (`spec.sourceObservedTime`) to the
# mirrored slice written in the importing cluster; labelled by source cluster only. Wall clocks of
# two clusters: a negative difference (skew) is recorded as 0.
SYNC_LATENCY_METRIC: Final = "mcs_endpointslice_sync_latency_seconds"
SYNC_LATENCY_LABEL: Final = "source_cluster"
SYNC_LATENCY_BUCKETS_SECONDS: Final[tuple[float, ...]] = (
    *(ms / 1000 for ms in EXPORT_DURATION_BUCKETS_MS),
    EXPORT_DURATION_RIGHT_BOUND_MS / 1000,
)


# Hub requests, seen from either end: indexed statements in the milliseconds, the tail for
# lock waits and retries.
REQUEST_DURATION_BUCKETS_SECONDS: Final[tuple[float, ...]] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


def clamp_export_duration_ms(duration_ms: float) -> float:
    """Apply the clamps of docs/reference.md#export-path: ≤ 0 → 1000 ms; above the right bound → the
    right bound."""
    if duration_ms <= 0:
        return EXPORT_DURATION_NON_POSITIVE_MS
    return min(duration_ms, EXPORT_DURATION_RIGHT_BOUND_MS)
