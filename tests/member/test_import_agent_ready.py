"""End to end: the ServiceImport's `Ready` condition (docs/reference.md#import-path) as the real
agent writes it in emulated clusters — True/Ready in a cluster that serves the import's IP families,
False/IPFamilyNotSupported in a single-stack one that cannot, which holds the derived
Service and slices back, and is not rewritten while the refusal lasts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentFactory,
    HubProcess,
    service_body,
    service_export_body,
    wait_for,
)
from tests.member.test_import_agent import DERIVED, NS, agent, source_slice

pytestmark = pytest.mark.e2e


def ready(kube: KubeCluster) -> dict[str, Any] | None:
    si = kube.state.get("serviceimports", NS, "web")
    for condition in ((si or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "Ready":
            return dict(condition)
    return None


def test_ready_where_the_families_are_served_and_not_where_they_are_not(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    east, west = kube_cluster_factory("east"), kube_cluster_factory("west")
    west.state.registry.allocator.families = ("IPv4",)  # a single-stack cluster
    west.state.create_namespace(NS)
    east.state.create("services", NS, service_body(
        "web", NS, ipFamilies=["IPv4", "IPv6"], ipFamilyPolicy="RequireDualStack"))
    east.state.create("endpointslices", NS, source_slice("10.0.0.1"))
    agent("east", east, hub_process, agent_factory)
    west_agent = agent("west", west, hub_process, agent_factory)
    east.state.create("serviceexports", NS, service_export_body("web", NS))

    served = wait_for(lambda: (c := ready(east)) and c["status"] == "True" and c,
                      what="Ready=True in east, which serves both families")
    assert served["reason"] == "Ready"
    refused = wait_for(
        lambda: (c := ready(west)) and c["reason"] == "IPFamilyNotSupported" and c,
        what="Ready=False/IPFamilyNotSupported in single-stack west")
    assert refused["status"] == "False"
    assert "(IPv4, IPv6)" in refused["message"]
    assert 'spec.ipFamilies[1]: Invalid value: "IPv6": not configured on this cluster' in (
        refused["message"])
    assert west.state.get("services", NS, DERIVED) is None
    # The derived Service is retried with backoff; the condition is not rewritten.
    writes = west.state.writes("serviceimports/status")
    wait_for(lambda: west.state.count("create", "services") >= 3,
             what="two more refused creates of the derived Service", timeout=60)
    assert west.state.writes("serviceimports/status") == writes
    assert west_agent.metric("mcsync_agent_serviceimports_imported") == 1
