"""The model of the CoreDNS `multicluster` plugin's answers (`tests/e2e/mcsdns.py`), one
row per rule it takes from the plugin, so that the DNS conformance tests built on it fail
only when mcsync's objects are wrong."""

from __future__ import annotations

from typing import Any

import pytest

from shared.constants import LABEL_MCS_SERVICE_NAME, LABEL_MCS_SOURCE_CLUSTER
from tests.e2e.mcsdns import MulticlusterDns, Srv, endpoint_hostname

NAME = "hello.shop.svc.clusterset.local"


def si(type_: str, ips: list[str] | None = None, namespace: str = "shop") -> dict[str, Any]:
    return {"metadata": {"name": "hello", "namespace": namespace},
            "spec": {"type": type_, "ips": ips or [],
                     "ports": [{"name": "tcp", "port": 42, "protocol": "TCP"},
                               {"name": "udp", "port": 42, "protocol": "UDP"}]}}


def eps(cluster: str, *endpoints: dict[str, Any], labelled: bool = True,
        ports: tuple[int, ...] = (42,)) -> dict[str, Any]:
    labels = {LABEL_MCS_SOURCE_CLUSTER: cluster}
    if labelled:
        labels[LABEL_MCS_SERVICE_NAME] = "hello"
    return {"metadata": {"name": f"s-{cluster}", "namespace": "shop", "labels": labels},
            "ports": [{"port": p} for p in ports], "endpoints": list(endpoints)}


def ep(address: str, *, hostname: str | None = None, ready: bool | None = True
       ) -> dict[str, Any]:
    out: dict[str, Any] = {"addresses": [address], "conditions": {}}
    if ready is not None:
        out["conditions"]["ready"] = ready
    if hostname:
        out["hostname"] = hostname
    return out


def dns(*objects: dict[str, Any], namespaces: tuple[str, ...] = ("shop",)) -> MulticlusterDns:
    return MulticlusterDns(
        service_imports=[o for o in objects if "type" in o.get("spec", {})],
        endpoint_slices=[o for o in objects if "endpoints" in o], namespaces=namespaces)


DUAL = si("ClusterSetIP", ["10.96.0.10", "fd00:10:96::a"])
HEADLESS = si("Headless")
WEST = eps("west", ep("10.244.0.10", hostname="web-0"), ep("10.244.0.11", ready=None),
           ep("10.244.0.12", ready=False))
EAST = eps("east", ep("10.245.0.10", hostname="web-0"))

CASES: list[tuple[str, MulticlusterDns, str, str, list[str]]] = [
    ("ClusterSetIP A: the IPv4 ClusterSetIP", dns(DUAL), NAME, "A", ["10.96.0.10"]),
    ("ClusterSetIP AAAA: the IPv6 one", dns(DUAL), NAME, "AAAA", ["fd00:10:96::a"]),
    ("ClusterSetIP: endpoints are not answered", dns(DUAL, WEST), NAME, "A", ["10.96.0.10"]),
    ("no ServiceImport, no answer", dns(WEST), NAME, "A", []),
    ("namespace absent here, no answer", dns(DUAL, namespaces=()), NAME, "A", []),
    ("outside the zone", dns(DUAL), "hello.shop.svc.cluster.local", "A", []),
    ("headless: ready endpoints of every cluster, unready left out", dns(HEADLESS, WEST, EAST),
     NAME, "A", ["10.244.0.10", "10.244.0.11", "10.245.0.10"]),
    ("headless: a slice without the MCS label is not read",
     dns(HEADLESS, eps("west", ep("10.244.0.10"), labelled=False)), NAME, "A", []),
    ("hostname.cluster: that cluster's pod", dns(HEADLESS, WEST, EAST),
     f"web-0.east.{NAME}", "A", ["10.245.0.10"]),
    ("dashed address for a pod without hostname", dns(HEADLESS, WEST, EAST),
     f"10-244-0-11.west.{NAME}", "A", ["10.244.0.11"]),
    ("hostname.cluster: another cluster's name", dns(HEADLESS, WEST, EAST),
     f"web-0.north.{NAME}", "A", []),
]


@pytest.mark.parametrize(("model", "qname", "qtype", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_addresses(model: MulticlusterDns, qname: str, qtype: str, expected: list[str]) -> None:
    assert model.addresses(qname, qtype) == expected


def test_srv_clustersetip_one_per_port_number_whatever_the_families() -> None:
    # Two ports on 42 (TCP, UDP) and two IPs: one SRV, as nslookup shows upstream's hello.
    assert dns(DUAL).srv(NAME) == [Srv(42, NAME)]


def test_srv_headless_one_per_ready_endpoint_and_port() -> None:
    model = dns(HEADLESS, WEST, eps("east", ep("10.245.0.10", hostname="web-0"),
                                    ports=(42, 4242)))
    assert model.srv(NAME) == [
        Srv(42, f"10-244-0-11.west.{NAME}"),
        Srv(42, f"web-0.east.{NAME}"),
        Srv(42, f"web-0.west.{NAME}"),
        Srv(4242, f"web-0.east.{NAME}"),
    ]


@pytest.mark.parametrize(("address", "hostname", "name"), [
    ("10.0.0.1", None, "10-0-0-1"),
    ("fd00::1", None, "fd00--1"),
    ("10.0.0.1", "web-0", "web-0"),
])
def test_endpoint_hostname(address: str, hostname: str | None, name: str) -> None:
    assert endpoint_hostname(address, hostname) == name
