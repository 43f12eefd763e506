"""Which import queues, and which lane of them, an event puts its key in
(`member.imports.importer`).

A cold start queues every key in the bulk lanes. A live change of one source slice must
not wait behind them: when its key is not imported yet (no derived Service), the slices
would wait for their owner, and the owner for its ServiceImport, so all three queues take
the key in their live lane; once the derived Service is here, the slices' queue alone.
And an update of an owner that leaves it the same owner (a status write, a user's edit)
queues no reconcile of its dependents: they would find nothing to do.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from member.hubclient import HubClient, HubClientConfig
from member.imports.importer import Importer
from member.imports.importfeed import feed_entry
from member.imports.importspec import derived_service_name
from member.kube.events import EventRecorder
from member.metrics import AgentMetrics
from member.workqueue import WorkQueueMetrics
from shared.models import EndpointSliceExport, ServiceImport
from tests.kube.fixtures import KubeCluster
from tests.kube.support import wait_for

KEY = "demo/hello"
QUEUES = ("serviceimport", "derivedservice", "mirroredslices")


def hub_import() -> dict[str, Any]:
    """The feed's entry of the hub's ServiceImport demo/hello."""
    return feed_entry(
        ServiceImport.model_validate(
            {
                "metadata": {"name": "hello", "namespace": "demo", "resourceVersion": "5"},
                "spec": {"type": "ClusterSetIP", "ports": [{"name": "http", "port": 80}]},
                "status": {
                    "clusters": [{"cluster": "a"}],
                    "ports": [{"name": "http", "port": 80, "clusters": ["a"]}],
                },
            }
        )
    )


def hub_slice(address: str, rv: str) -> dict[str, Any]:
    """The feed's entry of cluster a's slice of demo/hello, at resourceVersion `rv`."""
    return feed_entry(
        EndpointSliceExport.model_validate(
            {
                "metadata": {"name": "hello-a", "namespace": "demo", "resourceVersion": rv},
                "spec": {
                    "serviceName": "hello",
                    "clusterId": "a",
                    "addressType": "IPv4",
                    "ports": [{"name": "http", "port": 8080}],
                    "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
                },
            }
        )
    )


def lanes(importer: Importer) -> dict[str, str | None]:
    """Per import queue, the lane holding KEY ("live", "bulk") or None."""
    found: dict[str, str | None] = {}
    for name in QUEUES:
        queue = importer.queues[name]
        bulk, waiting = queue.bulk_len(), len(queue)
        found[name] = "bulk" if bulk else ("live" if waiting else None)
    return found


def queued(importer: Importer) -> set[str]:
    """The import queues holding KEY, once the informers' events are in."""
    return {name for name, lane in lanes(importer).items() if lane is not None}


def managed(name: str, **labels: str) -> dict[str, Any]:
    return {"name": name, "labels": {"app.kubernetes.io/managed-by": "mcsync", **labels}}


def owner_ref(owner: dict[str, Any]) -> dict[str, Any]:
    """The controller ownerReference the agent writes to `owner` (its ServiceImport)."""
    return {
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceImport",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }


def drain(importer: Importer) -> None:
    for queue in importer.queues.values():
        while (key := queue.get(timeout=0)) is not None:
            queue.done(key)


@pytest.fixture
def importer(kube_cluster: KubeCluster) -> Iterator[Importer]:
    kube_cluster.state.create_namespace("demo")
    api = kube_cluster.api_client()
    metrics = AgentMetrics(registry=CollectorRegistry())
    hub = HubClient(
        HubClientConfig(base_url="http://127.0.0.1:9", cluster_id="west", token="t0ken"),
        metrics=metrics.hub,
    )
    built = Importer(
        api=api,
        hub=hub,
        namespaces=[None],
        deny_namespaces=(),
        watch_timeout=30,
        workers=1,
        metrics=metrics,
        queue_metrics=WorkQueueMetrics(registry=metrics.registry),
        events=EventRecorder(api=api, host="test"),
        may_write=lambda: True,
    )
    stop = threading.Event()
    informers = [*built.import_informers.values(), *built.service_informers.values()]
    for informer in informers:
        informer.start(stop)
    try:
        wait_for(lambda: all(i.has_synced() for i in informers))
        yield built
    finally:
        stop.set()
        built.shutdown()


def test_a_live_change_of_a_key_not_imported_yet_takes_the_live_lane_of_all_three(
    importer: Importer,
) -> None:
    # The cold start's list: the key waits in every bulk lane.
    importer.on_hub_event("ADDED", None, hub_import(), True)
    importer.on_hub_event("ADDED", None, hub_slice("10.0.0.1", "6"), True)
    assert lanes(importer) == dict.fromkeys(QUEUES, "bulk")

    importer.on_hub_event("MODIFIED", hub_slice("10.0.0.1", "6"), hub_slice("10.0.0.2", "7"), False)

    assert lanes(importer) == dict.fromkeys(QUEUES, "live")


def test_once_the_derived_service_is_here_a_slice_change_queues_the_slices_alone(
    importer: Importer, kube_cluster: KubeCluster
) -> None:
    importer.on_hub_event("ADDED", None, hub_import(), True)
    importer.on_hub_event("ADDED", None, hub_slice("10.0.0.1", "6"), True)
    # Ours: the ServiceImport labelled, the derived Service owned by its uid.
    si = kube_cluster.state.create(
        "serviceimports",
        "demo",
        {
            "apiVersion": "multicluster.x-k8s.io/v1beta1",
            "kind": "ServiceImport",
            "metadata": managed("hello"),
            "spec": {"type": "ClusterSetIP", "ports": []},
        },
    )
    kube_cluster.state.create(
        "services",
        "demo",
        {
            "metadata": {
                **managed(
                    derived_service_name("hello"),
                    **{"multicluster.kubernetes.io/service-name": "hello"},
                ),
                "ownerReferences": [owner_ref(si)],
            },
            "spec": {"ports": [{"name": "http", "port": 80}]},
        },
    )
    wait_for(lambda: importer.service_index.keys() == {KEY})
    wait_for(lambda: importer._owner_here(KEY), what="the derived Service ours in the cache")
    drain(importer)

    importer.on_hub_event("MODIFIED", hub_slice("10.0.0.1", "6"), hub_slice("10.0.0.2", "7"), False)

    assert lanes(importer) == {
        "serviceimport": None,
        "derivedservice": None,
        "mirroredslices": "live",
    }


def test_an_owner_updated_in_place_queues_no_reconcile_of_its_dependents(
    importer: Importer, kube_cluster: KubeCluster
) -> None:
    state = kube_cluster.state
    derived = derived_service_name("hello")

    state.create(
        "serviceimports",
        "demo",
        {
            "apiVersion": "multicluster.x-k8s.io/v1beta1",
            "kind": "ServiceImport",
            "metadata": managed("hello"),
            "spec": {"type": "ClusterSetIP", "ports": []},
        },
    )
    wait_for(lambda: queued(importer) == set(QUEUES), what="a new ServiceImport: all three")
    drain(importer)
    si = state.get("serviceimports", "demo", "hello")
    assert si is not None
    state.update(
        "serviceimports", "demo", {**si, "status": {"clusters": [{"cluster": "a"}]}}, status=True
    )
    wait_for(lambda: queued(importer) == {"serviceimport"}, what="its status write: itself")
    drain(importer)

    service = {
        "metadata": managed(derived, **{"multicluster.kubernetes.io/service-name": "hello"}),
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }
    state.create("services", "demo", service)
    wait_for(lambda: queued(importer) == set(QUEUES), what="a new derived Service: all three")
    drain(importer)
    svc = state.get("services", "demo", derived)
    assert svc is not None
    svc["metadata"]["annotations"] = {"note": "a user's"}
    state.update("services", "demo", svc)
    wait_for(
        lambda: queued(importer) == {"serviceimport", "derivedservice"},
        what="its edit: itself and the ServiceImport (spec.ips), not the slices",
    )

    state.delete("services", "demo", derived)
    wait_for(lambda: queued(importer) == set(QUEUES), what="its deletion: all three")
