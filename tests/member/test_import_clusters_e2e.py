"""End to end: `mcsync.io/import-clusters` keeps a Service out of a cluster and gives it
back when the selector changes (docs/reference.md#cluster-selection).

A real hub serving over loopback, two agent processes, two emulated clusters with the
About API: east (region eu) exports shop/web; the import-clusters selector names region eu,
so west (region us) gets no ServiceImport while east does. The selector then names every
cluster with a region, and west gets the ServiceImport, its derived Service and the
mirrored slice; east's agent reported both clusters' properties itself.

The hub runs in this process (served over loopback, so its state can be awaited), and
the test waits with `asyncio.sleep`, never blocking the loop that serves the agents.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from member.imports.importspec import derived_service_name
from tests.hub.test_api_import_clusters import REGION
from tests.hub.test_api_support import running_hub, serving
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentProcess,
    HubProcess,
    new_agent,
    service_body,
    service_export_body,
    source_slice_body,
)

pytestmark = pytest.mark.e2e

NS = "shop"
ANNOTATION = "mcsync.io/import-clusters"
EU_ONLY = {"matchProperties": {REGION: "eu"}}
DEADLINE = 90.0


async def until(predicate: Callable[[], Any], what: str) -> None:
    """Poll `predicate` (run in a thread: it may block) every 0.2 s for `DEADLINE`."""
    for _ in range(int(DEADLINE / 0.2)):
        if await asyncio.to_thread(predicate):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def reported(hub: Any) -> None:
    """Until both clusters' agents have reported their region to the hub."""
    for _ in range(int(DEADLINE / 0.2)):
        if all(REGION in (c.status.properties or {}) for c in await hub.store.clusters.list()):
            return
        await asyncio.sleep(0.2)
    raise AssertionError("timed out waiting for both clusters' properties on the hub")


def select(kube: KubeCluster, selector: dict[str, Any]) -> None:
    """Set the ServiceExport's `mcsync.io/import-clusters` (its agent re-exports)."""
    export = dict(kube.state.get("serviceexports", NS, "web") or {})
    metadata = dict(export["metadata"])
    metadata["annotations"] = {**metadata.get("annotations", {}),
                               ANNOTATION: json.dumps(selector)}
    kube.state.update("serviceexports", NS, {**export, "metadata": metadata})


def has_import(kube: KubeCluster) -> bool:
    return kube.state.get("serviceimports", NS, "web") is not None


def whole_import(kube: KubeCluster) -> bool:
    return (
        has_import(kube)
        and kube.state.get("services", NS, derived_service_name("web")) is not None
        and any(
            s["metadata"].get("labels", {}).get("multicluster.kubernetes.io/source-cluster")
            == "east"
            for s in kube.state.list("endpointslices", NS)
        )
    )


async def test_import_clusters_keeps_a_service_out_of_a_cluster_and_gives_it_back(
    database_url: str,
    tmp_path: Path,
    kube_cluster_factory: Callable[..., KubeCluster],
) -> None:
    east = kube_cluster_factory("east", about_api=True)
    west = kube_cluster_factory("west", about_api=True)
    for kube, region in ((east, "eu"), (west, "us")):
        kube.state.create_namespace(NS)
        kube.state.create("clusterproperties", None, {"metadata": {"name": REGION},
                                                      "spec": {"value": region}})
    agents: list[AgentProcess] = []
    async with running_hub(database_url, watch_bookmark_seconds=1) as hub, \
            serving(hub.app) as url:
        try:
            members = await hub.register("east", "west")
            for name, kube in (("east", east), ("west", west)):
                token = members[name]["Authorization"].removeprefix("Bearer ")
                agents.append(await asyncio.to_thread(
                    new_agent, name, directory=tmp_path, kubeconfig=kube.kubeconfig,
                    hub=cast(HubProcess, SimpleNamespace(url=url)), cluster_id=name, token=token))
            await reported(hub)

            east.state.create("services", NS, service_body("web", NS))
            east.state.create("endpointslices", NS, source_slice_body("10.0.0.1", NS))
            export = service_export_body("web", NS)
            export["metadata"]["annotations"] = {ANNOTATION: json.dumps(EU_ONLY)}
            east.state.create("serviceexports", NS, export)
            await until(lambda: whole_import(east), what="the import in east (region eu)")
            await asyncio.sleep(3)  # west's feed has had every change by now
            assert not has_import(west), "west (region us) is outside import-clusters"
            assert west.state.get("services", NS, derived_service_name("web")) is None

            # The selector changes on the ServiceExport: west gets it whole.
            select(east, {"matchExpressions": [{"key": REGION, "operator": "Exists"}]})
            await until(lambda: whole_import(west), what="the import in west")
            assert whole_import(east)

            # And back: eu only again; west's objects go, east's stay.
            select(east, EU_ONLY)
            await until(lambda: not has_import(west), what="the import gone from west")
            assert whole_import(east)
        finally:
            for agent in agents:
                await asyncio.to_thread(agent.kill)
