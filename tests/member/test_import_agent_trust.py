"""End to end, attacks on the agent (docs/reference.md#export-path, #import-path): real hub
processes on SQLite and PostgreSQL, real agent processes, emulated clusters over HTTP.

* Objects in the way of an import — a user's Services on every derived name of a key, a
  slice with mcsync's labels but no owner on a mirrored slice's name — are left alone with
  Warning Events, and the import completes as each goes, without an agent restart.
* `s84a58` and `s255c6d` (same 10 hex characters of SHA-256) imported together get two
  derived Services and two ClusterSetIPs, settle, and withdrawing one leaves the other's.
* A source slice the hub refuses is a Warning Event on its ServiceExport, and the
  Service's other slices are exported all the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from member.imports.importspec import derived_service_names, mirrored_slice_name
from tests.conftest import dispose_database_url, make_database_url
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentFactory,
    HubProcess,
    forget_logs,
    service_body,
    service_export_body,
    wait_for,
)
from tests.member.test_import_agent import (
    MIRRORED,
    NS,
    agent,
    export_from_east,
    import_settled,
    import_writes,
    imported,
)

pytestmark = pytest.mark.e2e

NAMES = derived_service_names("web")
A, B = "s84a58", "s255c6d"  # derived names collide at 10 hex characters

HubFactory = Callable[..., HubProcess]


@pytest.fixture
def hub_factory(backend: str, tmp_path: Path) -> Iterator[HubFactory]:
    """`factory(*extra_args)`: a hub process over a fresh database of the variant's back end
    (SQLite or PostgreSQL), stopped and dropped after the test."""
    started: list[tuple[HubProcess, str]] = []

    def factory(*extra_args: str) -> HubProcess:
        directory = tmp_path / "hub"
        directory.mkdir()
        database = make_database_url(backend, directory)
        hub = HubProcess(directory=directory, database=database, extra_args=list(extra_args))
        started.append((hub, database))
        hub.start()
        return hub

    try:
        yield factory
    finally:
        for hub, database in started:
            hub.stop()
            dispose_database_url(database)
        forget_logs()


def _events(kube: KubeCluster, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.state.list("events", NS) if e.get("reason") == reason]


def _labelled_slice(name: str) -> dict[str, Any]:
    """A slice with every label of a mirrored slice of shop/web, and no owner."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {
                "app.kubernetes.io/managed-by": "mcsync",
                "multicluster.kubernetes.io/service-name": "web",
                "multicluster.kubernetes.io/source-cluster": "east",
                "kubernetes.io/service-name": NAMES[0],
                "endpointslice.kubernetes.io/managed-by": "mcsync.io",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 9999}],
        "endpoints": [{"addresses": ["10.9.9.9"], "conditions": {"ready": True}}],
    }


def test_objects_in_the_way_are_left_alone_and_the_import_completes_as_they_go(
    kube_cluster_factory: Any, hub_factory: HubFactory, agent_factory: AgentFactory
) -> None:
    hub = hub_factory()
    west = export_from_east(kube_cluster_factory, hub, agent_factory)
    users = {n: west.state.create("services", NS, service_body(n, NS)) for n in NAMES}
    squatter = west.state.create("endpointslices", NS, _labelled_slice(MIRRORED))
    west_agent = agent("west", west, hub, agent_factory)

    taken = wait_for(
        lambda: len(_events(west, "DerivedServiceNameTaken")) == 3
        and _events(west, "DerivedServiceNameTaken"),
        what="a Warning Event on each Service on one of web's derived names",
    )
    assert {e["involvedObject"]["name"] for e in taken} == set(NAMES)
    assert all(e["type"] == "Warning" and e["count"] == 1 for e in taken)
    wait_for(lambda: import_settled(west_agent), what="west's import queues drained")
    assert west.state.get("serviceimports", NS, "web") is not None
    for name, before in users.items():  # never updated, adopted or deleted
        assert west.state.get("services", NS, name) == before

    # The user deletes one: the key completes at once, no restart, on that name.
    west.state.delete("services", NS, NAMES[0])
    svc = wait_for(
        lambda: west.state.get("services", NS, NAMES[0]), what="the derived Service created"
    )
    si = west.state.get("serviceimports", NS, "web")
    assert si is not None
    assert svc["metadata"]["ownerReferences"][0]["uid"] == si["metadata"]["uid"]
    # The slice with our labels but no owner holds its name: left alone, one Event.
    wait_for(
        lambda: _events(west, "EndpointSliceNotManaged"),
        what="a Warning Event on the slice with mcsync's labels and no owner",
    )
    wait_for(lambda: import_settled(west_agent), what="west's import queues drained")
    assert west.state.get("endpointslices", NS, MIRRORED) == squatter
    assert len(_events(west, "DerivedServiceNameTaken")) == 3  # not one per retry

    west.state.delete("endpointslices", NS, MIRRORED)
    found = wait_for(lambda: imported(west), what="the mirrored slice once the way is clear")
    assert found["eps"]["metadata"]["ownerReferences"][0]["uid"] == svc["metadata"]["uid"]
    assert found["eps"]["endpoints"][0]["addresses"] == ["10.0.0.1"]
    for name in NAMES[1:]:
        assert west.state.get("services", NS, name) == users[name]


def _source_slice(service: str, ip: str) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-abc",
            "namespace": NS,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
    }


def _derived_of(kube: KubeCluster, service: str) -> dict[str, Any] | None:
    """The derived Service the ServiceImport `service` owns, once its ips are written."""
    si = kube.state.get("serviceimports", NS, service)
    if si is None or not si["spec"].get("ips"):
        return None
    for name in derived_service_names(service):
        svc = kube.state.get("services", NS, name)
        refs = (svc or {}).get("metadata", {}).get("ownerReferences") or []
        if svc is not None and refs and refs[0]["uid"] == si["metadata"]["uid"]:
            return svc
    return None


def test_colliding_derived_names_get_two_services_and_keep_them(
    kube_cluster_factory: Any, hub_factory: HubFactory, agent_factory: AgentFactory
) -> None:
    hub = hub_factory()
    east, west = kube_cluster_factory("east"), kube_cluster_factory("west")
    west.state.create_namespace(NS)
    for service, ip in ((A, "10.0.0.1"), (B, "10.0.0.2")):
        east.state.create("services", NS, service_body(service, NS))
        east.state.create("endpointslices", NS, _source_slice(service, ip))
        east.state.create("serviceexports", NS, service_export_body(service, NS))
    agent("east", east, hub, agent_factory)
    west_agent = agent("west", west, hub, agent_factory)

    derived = wait_for(
        lambda: (d := {s: _derived_of(west, s) for s in (A, B)}) and all(d.values()) and d,
        what="both imports in west with their ClusterSetIPs",
    )
    names = {s: derived[s]["metadata"]["name"] for s in (A, B)}
    assert names[A] != names[B]
    assert sorted(len(n) for n in names.values()) == [17, 27]  # one took the longer name
    ips = {s: west.state.get("serviceimports", NS, s)["spec"]["ips"] for s in (A, B)}  # type: ignore[index]
    assert ips[A] != ips[B]
    assert ips[A] == derived[A]["spec"]["clusterIPs"] and ips[B] == derived[B]["spec"]["clusterIPs"]
    for service, ip in ((A, "10.0.0.1"), (B, "10.0.0.2")):
        mirrored = wait_for(
            lambda s=service: west.state.get(
                "endpointslices", NS, mirrored_slice_name(s, "east", f"{s}-abc", derived=names[s])
            ),
            what=f"{service}'s mirrored slice",
        )
        assert mirrored["metadata"]["labels"]["kubernetes.io/service-name"] == names[service]
        assert mirrored["endpoints"][0]["addresses"] == [ip]  # its own endpoints only

    # Settled, and stays settled: no ping-pong between the two keys.
    wait_for(lambda: import_settled(west_agent), what="west's import queues drained")
    written = import_writes(west_agent)
    # 5 per key (exactly 10 in test_import_ownership's fake cluster); here also a create
    # that lost the race for the short name, or a write refused as stale on a loaded
    # machine, retried once. The attack's ping-pong was ~1,900 Service updates.
    assert written <= 20
    service_updates = {"kind": "Service", "operation": "update"}
    assert west_agent.metric("mcsync_agent_import_writes_total", service_updates) == 0
    time.sleep(2)
    assert import_writes(west_agent) == written

    # One is unexported: the other keeps its derived Service and ClusterSetIP.
    east.state.delete("serviceexports", NS, A)
    wait_for(lambda: west.state.get("serviceimports", NS, A) is None, what=f"{A} gone in west")
    wait_for(lambda: import_settled(west_agent), what="west's import queues drained")
    kept = _derived_of(west, B)
    assert kept is not None and kept["metadata"]["uid"] == derived[B]["metadata"]["uid"]
    assert west.state.get("serviceimports", NS, B)["spec"]["ips"] == ips[B]  # type: ignore[index]


def test_a_slice_the_hub_refuses_is_a_warning_event_on_its_service_export(
    kube_cluster_factory: Any, hub_factory: HubFactory, agent_factory: AgentFactory
) -> None:
    hub = hub_factory("--max-body-bytes", "2048")
    east = kube_cluster_factory("east")
    east.state.create("services", NS, service_body("web", NS))
    east.state.create("endpointslices", NS, _source_slice("web", "10.0.0.1"))
    big = _source_slice("web", "10.0.1.1")
    big["metadata"]["name"] = "web-big"
    big["endpoints"] = [
        {"addresses": [f"10.0.1.{i}"], "conditions": {"ready": True}, "hostname": f"web-{i:03d}"}
        for i in range(1, 60)
    ]
    east.state.create("endpointslices", NS, big)
    east.state.create("serviceexports", NS, service_export_body("web", NS))
    agent("east", east, hub, agent_factory)

    [event] = wait_for(
        lambda: _events(east, "EndpointSliceRejected"),
        what="a Warning Event on the ServiceExport about the refused slice",
    )
    assert event["type"] == "Warning"
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == (
        "ServiceExport",
        "web",
    )
    assert "EndpointSlice web-big" in event["message"] and "413" in event["message"]
    def on_hub() -> list[str]:
        items = hub.request("GET", "/api/v1/endpointslices").json()["items"]
        return [s["metadata"]["name"] for s in items]

    names = wait_for(on_hub, what="the other slice on the hub")
    assert names == ["web-abc"]
