"""End to end: each agent reports the namespaces its cluster holds within its import scope
(docs/reference.md#scope-and-limits), so the hub's importers view (what `mcsync describe
import` and the console show) says "no (namespace absent)" where the namespace is not
there, "yes" once it is created, "no" again once it is deleted — instead of `yes*`.

A hub and two agent processes against emulated clusters: east exports shop/web, west
starts without the namespace shop.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import AgentFactory, HubProcess, wait_for
from tests.member.test_import_agent import NS, agent, export_from_east, imported

pytestmark = pytest.mark.e2e


def answer_for(hub: HubProcess, cluster: str) -> tuple[str, str]:
    """The importers view's (imports, why) of shop/web for `cluster`."""
    answer = hub.request("GET", f"/api/v1/serviceimports/{NS}/web/importers")
    assert answer.status_code == 200, answer.text
    rows = {row["cluster"]: (row["imports"], row["why"]) for row in answer.json()["items"]}
    return rows[cluster]


def test_the_hub_hears_when_the_namespace_is_created_and_deleted(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    west: KubeCluster = export_from_east(kube_cluster_factory, hub_process, agent_factory)
    west.state.delete("namespaces", None, NS)  # west starts without it
    agent("west", west, hub_process, agent_factory)

    def absent() -> bool:
        imports, why = answer_for(hub_process, "west")
        return imports == "no" and why.startswith("namespace absent")

    wait_for(absent, what="west's answer: no, namespace absent")
    assert answer_for(hub_process, "east")[0] == "yes"  # east has shop: it reported so

    west.state.create_namespace(NS)
    wait_for(lambda: answer_for(hub_process, "west")[0] == "yes",
             what="west's answer: yes, once the namespace exists")
    wait_for(lambda: imported(west), what="the import in west")

    west.state.delete("namespaces", None, NS)
    wait_for(absent, what="west's answer: no again, once the namespace is deleted")


def test_an_agent_watching_one_namespace_reports_only_that_one(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    west: KubeCluster = export_from_east(kube_cluster_factory, hub_process, agent_factory)
    agent("west", west, hub_process, agent_factory, extra=["--namespace", "other"])
    wait_for(lambda: answer_for(hub_process, "west")[0] == "no",
             what="west's answer: shop is outside its --namespace")
    assert answer_for(hub_process, "west")[1].startswith("namespace absent")
