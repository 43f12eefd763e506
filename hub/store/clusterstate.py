"""A member cluster's state, derived from its last heartbeat when a record is answered.

The hub stores when each cluster last sent a heartbeat, never its state: a stored state
would turn false the moment the TTL passed without a write, and nothing writes when a
cluster goes quiet. So every answer derives it, as of the answer, from the heartbeat and
the hub's `cluster_ttl` (docs/reference.md#failover) — here, and nowhere else: a MemberCluster, an
export (read, listed, written or watched) and a ServiceImport's per-cluster entries all agree.

Two readings of the same state:

* a MemberCluster is `Pending` (never heard from), `Ready` (a heartbeat within the TTL)
  or `Stale`;
* an export, and a ServiceImport's entry for its cluster, says only `Stale` or `Ready`:
  an export's cluster is stale only when its heartbeats stopped — a cluster still
  `Pending` has just registered, and its agent is the one writing the export.

`ClusterStates` fixes one instant for every row of one answer, so that a page of a list
never calls one cluster Ready in one row and Stale in the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from shared import constants
from shared.timefmt import utcnow

ClusterState = Literal["Pending", "Ready", "Stale"]
ExportClusterState = Literal["Ready", "Stale"]
PENDING: ClusterState = "Pending"


def export_cluster_state(state: str) -> ExportClusterState:
    """What an export says of a cluster in `state`: only a Stale cluster makes it Stale."""
    return constants.CLUSTER_STALE if state == constants.CLUSTER_STALE else constants.CLUSTER_READY


@dataclass(frozen=True)
class ClusterStates:
    """Cluster states as of `now` (default: when made) for a hub whose TTL is `ttl`."""

    ttl: timedelta
    now: datetime = field(default_factory=utcnow)

    def of_cluster(self, last_heartbeat: datetime | None) -> ClusterState:
        """A MemberCluster's state: Pending, Ready or Stale."""
        if last_heartbeat is None:
            return PENDING
        if self.now - last_heartbeat <= self.ttl:
            return constants.CLUSTER_READY
        return constants.CLUSTER_STALE

    def of_export(self, last_heartbeat: datetime | None) -> ExportClusterState:
        """What an export of the cluster says of it (`status.clusterState`): Ready or Stale."""
        return export_cluster_state(self.of_cluster(last_heartbeat))
