"""ClusterIP allocation per `ipFamilies`, as a dual-stack apiserver allocates and guards it."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.kube.fixtures import KubeCluster
from tests.kube.support import core_api, failure, service

NS = "team-a"
V4 = ipaddress.ip_network("10.96.0.0/12")
V6 = ipaddress.ip_network("fd00:10:96::/108")


def _in(ip: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    return ipaddress.ip_address(ip) in network


def test_default_is_single_stack_ipv4_from_the_service_range(kube_cluster: KubeCluster) -> None:
    created = core_api(kube_cluster).create_namespaced_service(NS, service("web")).spec
    assert created.ip_family_policy == "SingleStack"
    assert created.ip_families == ["IPv4"]
    assert created.cluster_ips == [created.cluster_ip]
    assert _in(created.cluster_ip, V4)


def test_ipv6_single_stack(kube_cluster: KubeCluster) -> None:
    spec = core_api(kube_cluster).create_namespaced_service(
        NS, service("web", ipFamilies=["IPv6"])).spec
    assert spec.ip_families == ["IPv6"] and spec.ip_family_policy == "SingleStack"
    assert _in(spec.cluster_ip, V6) and spec.cluster_ips == [spec.cluster_ip]


@pytest.mark.parametrize(("families", "first", "second"), [
    (None, V4, V6),
    (["IPv4"], V4, V6),
    (["IPv6"], V6, V4),
    (["IPv6", "IPv4"], V6, V4),
])
def test_require_dual_stack_gets_one_address_per_family_in_order(
    kube_cluster: KubeCluster, families: list[str] | None,
    first: ipaddress.IPv4Network | ipaddress.IPv6Network,
    second: ipaddress.IPv4Network | ipaddress.IPv6Network,
) -> None:
    extra: dict[str, Any] = {"ipFamilies": families} if families else {}
    spec = core_api(kube_cluster).create_namespaced_service(
        NS, service("web", ipFamilyPolicy="RequireDualStack", **extra)).spec
    assert spec.ip_family_policy == "RequireDualStack"
    assert len(spec.cluster_ips) == 2
    assert _in(spec.cluster_ips[0], first) and _in(spec.cluster_ips[1], second)
    assert spec.cluster_ip == spec.cluster_ips[0]
    assert spec.ip_families == ["IPv4" if first is V4 else "IPv6",
                                "IPv6" if second is V6 else "IPv4"]


def test_two_families_without_a_dual_stack_policy_are_invalid(kube_cluster: KubeCluster) -> None:
    with pytest.raises(ApiException) as info:
        core_api(kube_cluster).create_namespaced_service(
            NS, service("web", ipFamilies=["IPv4", "IPv6"], ipFamilyPolicy="SingleStack"))
    assert info.value.status == 422
    assert failure(info.value)["details"]["causes"][0]["field"] == "spec.ipFamilyPolicy"


def test_headless_keeps_none(kube_cluster: KubeCluster) -> None:
    spec = core_api(kube_cluster).create_namespaced_service(
        NS, service("db", clusterIP="None")).spec
    assert spec.cluster_ip == "None" and spec.cluster_ips == ["None"]
    assert spec.ip_families == ["IPv4"]


def test_addresses_are_never_shared_and_freed_on_delete(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    ips = {core.create_namespaced_service(NS, service(f"s{i}")).spec.cluster_ip
           for i in range(20)}
    assert len(ips) == 20
    taken = core.read_namespaced_service("s0", NS).spec.cluster_ip
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service(NS, service("copy", clusterIP=taken))
    assert info.value.status == 422
    assert "provided IP is already allocated" in failure(info.value)["message"]
    core.delete_namespaced_service("s0", NS)
    assert core.create_namespaced_service(NS, service("copy", clusterIP=taken)).spec.cluster_ip \
        == taken


def test_a_requested_address_must_be_in_the_range(kube_cluster: KubeCluster) -> None:
    with pytest.raises(ApiException) as info:
        core_api(kube_cluster).create_namespaced_service(
            NS, service("web", clusterIP="192.168.0.1"))
    assert info.value.status == 422
    status = failure(info.value)
    assert status["details"]["causes"][0]["field"] == "spec.clusterIPs[0]"
    assert "provided IP is not in the valid range" in status["message"]


def test_cluster_ip_is_immutable_on_update(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    created = core.create_namespaced_service(NS, service("web"))
    other = str(ipaddress.ip_address(created.spec.cluster_ip) + 1000)
    created.spec.cluster_ip = other
    created.spec.cluster_ips = [other]
    with pytest.raises(ApiException) as info:
        core.replace_namespaced_service("web", NS, created)
    assert info.value.status == 422
    status = failure(info.value)
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "spec.clusterIPs[0]"
    assert "may not change once set" in status["message"]


def test_update_without_cluster_ips_keeps_them(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    created = core.create_namespaced_service(
        NS, service("web", ipFamilyPolicy="RequireDualStack")).spec
    patched = core.patch_namespaced_service("web", NS, {"spec": {
        "clusterIP": None, "clusterIPs": None, "ports": [{"name": "http", "port": 81}]}}).spec
    assert patched.cluster_ips == created.cluster_ips


def test_upgrade_to_dual_stack_adds_a_secondary_and_downgrade_drops_it(
    kube_cluster: KubeCluster,
) -> None:
    core = core_api(kube_cluster)
    primary = core.create_namespaced_service(NS, service("web")).spec.cluster_ip
    up = core.patch_namespaced_service("web", NS, {"spec": {
        "ipFamilyPolicy": "PreferDualStack"}}).spec
    assert up.cluster_ips[0] == primary and _in(up.cluster_ips[1], V6)
    assert up.ip_families == ["IPv4", "IPv6"]
    down = core.patch_namespaced_service("web", NS, {"spec": {
        "ipFamilyPolicy": "SingleStack"}}).spec
    assert down.cluster_ips == [primary] and down.ip_families == ["IPv4"]
