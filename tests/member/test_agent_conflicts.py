"""End to end: two clusters (two emulators, two agents) and one hub disagree, then agree."""

from __future__ import annotations

import copy

import pytest

from shared import conditions as c
from tests.kube.fixtures import KubeCluster, KubeClusterFactory
from tests.member.agent_support import (
    AgentFactory,
    HubProcess,
    condition,
    service_body,
    service_export_body,
    wait_for,
)

pytestmark = pytest.mark.e2e


def conflict(cluster: KubeCluster) -> tuple[str, str] | None:
    se = cluster.state.get("serviceexports", "shop", "web")
    found = condition(se, c.CONFLICT)
    return (found["status"], found["reason"]) if found else None


def events(cluster: KubeCluster) -> list[tuple[str, str]]:
    return [(e.get("type", ""), e.get("reason", "")) for e in cluster.state.list("events", "shop")]


def test_port_conflict_reported_on_both_then_cleared(
    kube_cluster_factory: KubeClusterFactory, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    east = kube_cluster_factory("east")
    west = kube_cluster_factory("west")
    for cluster, port in ((east, 80), (west, 81)):
        cluster.state.create(
            "services", "shop", service_body("web", "shop", ports=[{"name": "http", "port": port}])
        )
        cluster.state.create("serviceexports", "shop", service_export_body("web", "shop"))
        agent_factory(
            cluster.name, kubeconfig=cluster.kubeconfig, hub=hub_process,
            cluster_id=cluster.name, token=hub_process.register(cluster.name),
        )

    # Same port name, another port number: a PortConflict for every export of the key.
    for cluster in (east, west):
        wait_for(lambda cl=cluster: conflict(cl) == (c.TRUE, c.PORT_CONFLICT),  # type: ignore[misc]
                 what=f"Conflict=True/PortConflict on {cluster.name}")
        wait_for(lambda cl=cluster: (c.EVENT_TYPE_WARNING, c.EVENT_CONFLICT_FOUND) in events(cl),  # type: ignore[misc]
                 what=f"a Warning ServiceExportConflictFound Event on {cluster.name}")
        se = cluster.state.get("serviceexports", "shop", "web")
        assert condition(se, c.READY)["status"] == c.TRUE  # type: ignore[index]
        message = condition(se, c.CONFLICT)["message"]  # type: ignore[index]
        assert message  # the hub's explanation, copied verbatim

    # West fixes its port: both verdicts clear, each with a Normal Event.
    service = copy.deepcopy(west.state.get("services", "shop", "web"))
    assert service is not None
    service["spec"]["ports"][0]["port"] = 80
    west.state.update("services", "shop", service)
    for cluster in (east, west):
        wait_for(lambda cl=cluster: conflict(cl) == (c.FALSE, c.NO_CONFLICTS),  # type: ignore[misc]
                 what=f"Conflict=False/NoConflicts on {cluster.name}")
        wait_for(
            lambda cl=cluster: (c.EVENT_TYPE_NORMAL, c.EVENT_NO_CONFLICT_FOUND) in events(cl),  # type: ignore[misc]
            what=f"a Normal NoServiceExportConflictFound Event on {cluster.name}",
        )
    # One Warning per cluster: the verdict changed to True once.
    for cluster in (east, west):
        warnings = [
            e for e in cluster.state.list("events", "shop")
            if e.get("reason") == c.EVENT_CONFLICT_FOUND
        ]
        assert len(warnings) == 1 and warnings[0].get("count", 1) == 1
