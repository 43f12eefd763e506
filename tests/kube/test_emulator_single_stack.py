"""A single-stack cluster (`service_ip_families=("IPv4",)`) refuses what kube-apiserver
refuses there: a family it does not serve, and RequireDualStack; PreferDualStack gets its
one family. What the agent's ServiceImport condition `IPFamilyNotSupported`
(docs/reference.md#import-path) is about."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from sandbox.emulator import EmulatorState
from tests.kube.fixtures import KubeCluster
from tests.kube.support import core_api, failure, service

NS = "team-a"


@pytest.fixture
def single_stack(kube_cluster: KubeCluster) -> KubeCluster:
    kube_cluster.state.registry.allocator.families = ("IPv4",)
    return kube_cluster


# (spec fields, the families created, or the refusal's field and detail)
CASES: list[tuple[dict[str, Any], list[str] | tuple[str, str]]] = [
    ({}, ["IPv4"]),
    ({"ipFamilyPolicy": "PreferDualStack"}, ["IPv4"]),
    ({"clusterIP": "None", "ipFamilyPolicy": "PreferDualStack"}, ["IPv4"]),
    ({"ipFamilies": ["IPv6"]},
     ("spec.ipFamilies[0]", 'Invalid value: "IPv6": not configured on this cluster')),
    ({"ipFamilyPolicy": "RequireDualStack"},
     ("spec.ipFamilyPolicy",
      'Invalid value: "RequireDualStack": this cluster is not configured for dual-stack '
      "services")),
    ({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv4", "IPv6"]},
     ("spec.ipFamilies[1]", 'Invalid value: "IPv6": not configured on this cluster')),
]


@pytest.mark.parametrize(("spec", "outcome"), CASES)
def test_single_stack_cluster(single_stack: KubeCluster, spec: dict[str, Any],
                              outcome: list[str] | tuple[str, str]) -> None:
    core = core_api(single_stack)
    if isinstance(outcome, list):
        created = core.create_namespaced_service(NS, service("web", **spec)).spec
        assert created.ip_families == outcome
        return
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service(NS, service("web", **spec))
    assert info.value.status == 422
    field, detail = outcome
    assert failure(info.value)["message"] == f'Service "web" is invalid: {field}: {detail}'
    assert single_stack.state.get("services", NS, "web") is None


@pytest.mark.parametrize(("given", "families"), [
    ({}, ("IPv4", "IPv6")),
    ({"service_ip_families": ("IPv6",)}, ("IPv6",)),
])
def test_dual_stack_is_the_default(given: dict[str, Any], families: tuple[str, ...]) -> None:
    state = EmulatorState(**given)
    try:
        assert state.registry.allocator.families == families
    finally:
        state.close()
