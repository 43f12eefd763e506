"""The upstream MCS conformance suite's test driver, over the e2e fleet (tests/e2e/fleet.py).

`sigs.k8s.io/mcs-api/conformance` (`framework.go`, `k8s_objects.go`) drives any MCS
implementation through the Kubernetes API of its member clusters alone: a fresh namespace
`mcs-conformance-<random>` in every cluster per test, the Service `hello` deployed in the
first cluster (the "remote" one) and exported there, then ServiceImports, ServiceExport
conditions and EndpointSlices read back in every cluster with `Eventually` /
`Consistently`. `Driver` does the same over `KubeApi`, so `test_conformance.py` reads like
the Go tests it ports; `clients` are the fleet's clusters in export order (west, north,
east), `clients[0]` being upstream's `clients[0]`.

Why the driver plays the EndpointSlice controller. Upstream deploys a Deployment whose pods
the cluster's kube-controller-manager turns into the Service's EndpointSlices; the emulated
clusters have no controller manager, so `deploy_hello_service` writes what that controller
would: one slice per IP family of the Service as the API server defaulted it (a dual-stack
Service gets an IPv4 and an IPv6 slice), labelled `kubernetes.io/service-name` and managed by
`endpointslice-controller.k8s.io`, owned by the Service, with one ready endpoint per pod at
an address invented per cluster (`pod_ips`), the Service's ports at their target ports.

Deadlines: upstream waits 20 s (`awaitServiceImport`, conditions) to 60 s (slices); here
every wait is 60 s, as everywhere in tests/e2e; `Consistently` keeps upstream's 5 s.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from shared.constants import (
    LABEL_ENDPOINTSLICE_MANAGED_BY,
    LABEL_MCS_SERVICE_NAME,
    LABEL_MCS_SOURCE_CLUSTER,
    LABEL_SERVICE_NAME,
    MCS_GROUP,
)
from tests.e2e.fleet import Fleet, Member

HELLO = "hello"
K8S_ENDPOINTSLICE_MANAGER = "endpointslice-controller.k8s.io"
DEADLINE = 60.0
CONSISTENTLY = 5.0
PODS = 1  # upstream's hello Deployment has one replica

T = TypeVar("T")


def hello_service() -> dict[str, Any]:
    """`newHelloService()`: two ports on 42 (TCP and UDP), ClientIP affinity with a 10 s
    timeout, PreferDualStack, a selector, and a label and annotation that must NOT reach
    the ServiceImport."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": HELLO, "annotations": {"dummy-svc": "dummy"},
                     "labels": {"dummy-svc": "dummy"}},
        "spec": {
            "selector": {"app": HELLO},
            "ports": [{"name": "tcp", "port": 42, "protocol": "TCP"},
                      {"name": "udp", "port": 42, "protocol": "UDP"}],
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10}},
            "ipFamilyPolicy": "PreferDualStack",
        },
    }


def hello_export() -> dict[str, Any]:
    """`newHelloServiceExport()`: its own label and annotation, which are not exported."""
    return {
        "apiVersion": f"{MCS_GROUP}/v1beta1",
        "kind": "ServiceExport",
        "metadata": {"name": HELLO, "annotations": {"dummy-svcexport": "dummy"},
                     "labels": {"dummy-svcexport": "dummy"}},
    }


def mcs_ports(ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`toMCSPorts` + `sortMCSPorts`: name, protocol, port, appProtocol; by lower-case name."""
    wire = [{"name": p.get("name") or "", "protocol": p.get("protocol") or "TCP",
             "port": p["port"], "appProtocol": p.get("appProtocol")} for p in ports]
    return sorted(wire, key=lambda p: str(p["name"]).lower())


def ip_family_of(ip: str) -> str:
    """`ipFamilyOf`: IPv4 or IPv6; a string that is no IP fails the test."""
    try:
        parsed = ipaddress.ip_address(ip)
    except ValueError:
        pytest.fail(f"the value {ip!r} is not a valid IP")
    return "IPv4" if parsed.version == 4 else "IPv6"


def address_type_of(family: str) -> str:
    return "IPv4" if family == "IPv4" else "IPv6"


def eventually(check: Callable[[], T], *, what: str, timeout: float = DEADLINE,
               interval: float = 0.1) -> T:
    """Gomega's `Eventually(func(g Gomega) …).Should(Succeed())`: call `check` until it
    stops raising AssertionError; its answer. After `timeout`, the last failure, with `what`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError as failure:
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out after {timeout:.0f}s: {what}: {failure}")
        time.sleep(interval)


def consistently(check: Callable[[], Any], *, what: str, seconds: float = CONSISTENTLY,
                 interval: float = 0.1) -> None:
    """Gomega's `Consistently`: `check` holds (raises nothing) at every probe for `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            check()
        except AssertionError as failure:
            pytest.fail(f"not consistently: {what}: {failure}")
        time.sleep(interval)


class Driver:
    """Upstream's `testDriver` (+ `twoClusterTestDriver`) for one test, in its own namespace."""

    def __init__(self, fleet: Fleet, clusters: tuple[str, ...]) -> None:
        self.fleet = fleet
        self.clients: list[Member] = [fleet[name] for name in clusters]
        self.namespace = f"mcs-conformance-{secrets.randbelow(2**32)}"
        self.hello_service = hello_service()
        self.hello_export = hello_export()
        self.hello_service2 = hello_service()
        self.hello_export2 = hello_export()
        # cluster → IP family → the invented pod addresses behind its hello Service
        self.pod_ips: dict[str, dict[str, list[str]]] = {}

    # -- paths -------------------------------------------------------------------------

    def _ns(self, plural: str, *, api: str = "/api/v1") -> str:
        return f"{api}/namespaces/{self.namespace}/{plural}"

    def _mcs(self, plural: str) -> str:
        return self._ns(plural, api=f"/apis/{MCS_GROUP}/v1beta1")

    def _slices(self) -> str:
        return self._ns("endpointslices", api="/apis/discovery.k8s.io/v1")

    # -- set-up and tear-down (BeforeEach / JustBeforeEach / AfterEach) ----------------

    def create_namespaces(self) -> None:
        for client in self.clients:
            client.kube.create("/api/v1/namespaces", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": self.namespace}})

    def delete_namespaces(self) -> None:
        for client in self.clients:
            client.kube.remove(f"/api/v1/namespaces/{self.namespace}")

    def start(self, *, auto_export: bool = True) -> None:
        """`newTestDriver`'s JustBeforeEach: the namespace everywhere, hello deployed (and,
        with `auto_export`, exported) on the first cluster. No request pods: they serve the
        packet tests, which are out of scope."""
        self.create_namespaces()
        self.hello_service = self.deploy_hello_service(self.clients[0], self.hello_service)
        if auto_export:
            self.create_service_export(self.clients[0], self.hello_export)

    def start_two_clusters(self) -> None:
        """`newTwoClusterTestDriver`'s JustBeforeEach: export on the first cluster, wait for
        its ServiceImport there, then (a second later: creation timestamps have second
        resolution, and the oldest export wins) deploy and export hello2 on the second."""
        self.start(auto_export=False)
        self.create_service_export(self.clients[0], self.hello_export)
        self.await_service_import(self.clients[0])
        time.sleep(1.1)
        self.hello_service2 = self.deploy_hello_service(self.clients[1], self.hello_service2)
        self.create_service_export(self.clients[1], self.hello_export2)

    # -- the objects -------------------------------------------------------------------

    def deploy_hello_service(self, client: Member, service: dict[str, Any]) -> dict[str, Any]:
        """Create the Service and, as the EndpointSlice controller would for its pods, its
        EndpointSlices (module docstring). The Service as the API server answered it."""
        deployed = client.kube.create(self._ns("services"), service)
        index = self.clients.index(client)
        name = deployed["metadata"]["name"]
        spec = deployed["spec"]
        families = spec.get("ipFamilies") or ["IPv4"]
        labels = {LABEL_SERVICE_NAME: name,
                  LABEL_ENDPOINTSLICE_MANAGED_BY: K8S_ENDPOINTSLICE_MANAGER}
        if spec.get("clusterIP") == "None":
            labels["service.kubernetes.io/headless"] = ""
        ports = [{"name": p.get("name", ""), "protocol": p.get("protocol", "TCP"),
                  "port": p.get("targetPort") if isinstance(p.get("targetPort"), int)
                  else p["port"]} for p in spec["ports"]]
        for family in families:
            ips = [f"10.{244 + index}.0.{10 + pod}" if family == "IPv4"
                   else f"fd00:10:{244 + index}::{10 + pod:x}" for pod in range(PODS)]
            self.pod_ips.setdefault(client.name, {})[family] = ips
            client.kube.create(self._slices(), {
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-{secrets.token_hex(3)[:5]}",
                    "labels": labels,
                    "ownerReferences": [{
                        "apiVersion": "v1", "kind": "Service", "name": name,
                        "uid": deployed["metadata"]["uid"], "controller": True,
                        "blockOwnerDeletion": True}],
                },
                "addressType": address_type_of(family),
                "endpoints": [{
                    "addresses": [ip],
                    "conditions": {"ready": True, "serving": True, "terminating": False},
                    "nodeName": f"{client.name}-node-1",
                    "targetRef": {"kind": "Pod", "namespace": self.namespace,
                                  "name": f"{name}-{client.name}-{pod}"},
                } for pod, ip in enumerate(ips)],
                "ports": ports,
            })
        return deployed

    def create_service_export(self, client: Member, export: dict[str, Any]) -> None:
        client.kube.create(self._mcs("serviceexports"), export)

    def delete_service_export(self, client: Member) -> None:
        client.kube.remove(f"{self._mcs('serviceexports')}/{HELLO}")

    def get_service_import(self, client: Member, name: str = HELLO) -> dict[str, Any] | None:
        return client.kube.read(f"{self._mcs('serviceimports')}/{name}")

    def service(self, client: Member, name: str) -> dict[str, Any] | None:
        return client.kube.read(f"{self._ns('services')}/{name}")

    def endpoint_slices(self, client: Member) -> list[dict[str, Any]]:
        return client.kube.items(self._slices())

    def mcs_endpoint_slices(self, client: Member) -> list[dict[str, Any]]:
        """The slices `awaitMCSEndpointSlice` recognises as MCS ones: both MCS labels."""
        return [eps for eps in self.endpoint_slices(client)
                if LABEL_MCS_SERVICE_NAME in (eps["metadata"].get("labels") or {})
                and LABEL_MCS_SOURCE_CLUSTER in (eps["metadata"].get("labels") or {})]

    # -- upstream's awaits ---------------------------------------------------------------

    def await_service_import(
        self, client: Member, verify: Callable[[dict[str, Any]], None] | None = None,
        name: str = HELLO,
    ) -> dict[str, Any]:
        """`awaitServiceImport`: the ServiceImport exists on `client` and passes `verify`."""
        def check() -> dict[str, Any]:
            found = self.get_service_import(client, name)
            assert found is not None, f"ServiceImport was not found on cluster {client.name!r}"
            if verify is not None:
                verify(found)
            return found
        return eventually(check, what=f"ServiceImport {name} on {client.name}")

    def await_service_import_ip_families(self, client: Member) -> list[str]:
        def families(si: dict[str, Any]) -> None:
            assert si["spec"].get("ipFamilies"), \
                f"ServiceImport on cluster {client.name!r} does not contain an IP family"
        return list(self.await_service_import(client, families)["spec"]["ipFamilies"])

    def await_no_service_import(self, client: Member, message: str) -> None:
        def check() -> None:
            assert self.get_service_import(client) is None, message
        eventually(check, what=message)

    def ensure_service_import(self, client: Member, message: str) -> None:
        def check() -> None:
            assert self.get_service_import(client) is not None, message
        consistently(check, what=message)

    def ensure_no_service_import(self, client: Member, message: str) -> None:
        def check() -> None:
            assert self.get_service_import(client) is None, message
        consistently(check, what=message)

    def await_service_export_condition(self, client: Member, type_: str, status: str) -> None:
        """`awaitServiceExportCondition`: hello's ServiceExport on `client` has the
        condition `type_` with `status`."""
        def check() -> None:
            export = client.kube.read(f"{self._mcs('serviceexports')}/{HELLO}")
            assert export is not None, f"no ServiceExport {HELLO} on {client.name}"
            found = {c["type"]: c for c in (export.get("status") or {}).get("conditions") or []}
            assert type_ in found and found[type_]["status"] == status, \
                f"the {type_} condition was not set to {status}: {found.get(type_)}"
        eventually(check, what=f"{type_}={status} on {client.name}'s ServiceExport")

    def await_mcs_endpoint_slice(
        self, client: Member, address_type: str,
        verify: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """`awaitMCSEndpointSlice`: an MCS slice of `address_type` with endpoints (the last
        such one, as upstream), passing `verify`."""
        def check() -> dict[str, Any]:
            chosen: dict[str, Any] | None = None
            for eps in self.mcs_endpoint_slices(client):
                if eps.get("addressType") == address_type and eps.get("endpoints"):
                    chosen = eps
                    if verify is not None:
                        verify(eps)
            assert chosen is not None, (
                f"an MCS EndpointSlice was not found on cluster {client.name!r}: one with the "
                f"labels {LABEL_MCS_SERVICE_NAME!r} and {LABEL_MCS_SOURCE_CLUSTER!r}")
            return chosen
        return eventually(check, what=f"{address_type} MCS EndpointSlice on {client.name}")
