"""The MCS ServiceImport CRD: both versions over one storage, status subresource, discovery."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from shared.constants import MCS_GROUP
from tests.kube.fixtures import KubeCluster
from tests.kube.support import custom_api, failure

NS = "team-a"
PLURAL = "serviceimports"


def service_import(name: str, *, version: str = "v1beta1", ips: list[str] | None = None,
                   ) -> dict[str, Any]:
    return {
        "apiVersion": f"{MCS_GROUP}/{version}", "kind": "ServiceImport",
        "metadata": {"name": name},
        "spec": {"type": "ClusterSetIP", "ips": ips or ["10.96.200.1"],
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    }


def test_one_storage_two_versions(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    created = custom.create_namespaced_custom_object(MCS_GROUP, "v1alpha1", NS, PLURAL,
                                                     service_import("web", version="v1alpha1"))
    assert created["apiVersion"] == f"{MCS_GROUP}/v1alpha1"
    assert created["metadata"]["generation"] == 1
    read = custom.get_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, PLURAL, "web")
    assert read["apiVersion"] == f"{MCS_GROUP}/v1beta1"
    assert read["metadata"]["uid"] == created["metadata"]["uid"]
    assert read["spec"]["ips"] == ["10.96.200.1"]
    listed = custom.list_cluster_custom_object(MCS_GROUP, "v1alpha1", PLURAL)
    assert [(i["kind"], i["apiVersion"]) for i in listed["items"]] == [
        ("ServiceImport", f"{MCS_GROUP}/v1alpha1")]


def test_status_subresource(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    custom.create_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, PLURAL,
                                           {**service_import("web"),
                                            "status": {"clusters": [{"cluster": "ignored"}]}})
    assert "status" not in custom.get_namespaced_custom_object(MCS_GROUP, "v1beta1", NS,
                                                               PLURAL, "web")
    with_status = custom.patch_namespaced_custom_object_status(
        MCS_GROUP, "v1beta1", NS, PLURAL, "web", {"status": {"clusters": [{"cluster": "east"}]}})
    assert with_status["status"] == {"clusters": [{"cluster": "east"}]}
    assert with_status["metadata"]["generation"] == 1  # status is not spec
    spec_change = custom.patch_namespaced_custom_object(
        MCS_GROUP, "v1beta1", NS, PLURAL, "web",
        {"spec": {"ips": ["10.96.200.2"]}, "status": {"clusters": []}})
    assert spec_change["status"] == {"clusters": [{"cluster": "east"}]}  # main ignores status
    assert spec_change["metadata"]["generation"] == 2


def test_stale_update_conflicts(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    stale = custom.create_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, PLURAL,
                                                   service_import("web"))
    custom.patch_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, PLURAL, "web",
                                          {"spec": {"ips": ["10.96.200.3"]}})
    stale["spec"]["ips"] = ["10.96.200.4"]
    with pytest.raises(ApiException) as info:
        custom.replace_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, PLURAL, "web", stale)
    assert info.value.status == 409
    assert failure(info.value)["message"].startswith(
        f'Operation cannot be fulfilled on serviceimports.{MCS_GROUP} "web"')


@pytest.mark.parametrize("versions", [("v1beta1", "v1alpha1"), ("v1alpha1",)])
def test_discovery_lists_serviceimports_with_upstream_names(
    kube_cluster_factory: Callable[..., KubeCluster], versions: tuple[str, ...],
) -> None:
    cluster = kube_cluster_factory("disc", mcs_versions=versions)
    api: Any = client.CustomObjectsApi(cluster.api_client())
    for version in versions:
        entries = {r.name: r for r in api.get_api_resources(MCS_GROUP, version).resources}
        imports = entries[PLURAL]
        assert imports.kind == "ServiceImport" and imports.namespaced
        assert imports.short_names == ["svcim", "svcimport"]
        assert imports.singular_name == "serviceimport"
        assert f"{PLURAL}/status" in entries
        assert entries["serviceexports"].short_names == ["svcex", "svcexport"]
