"""The About API (KEP-2149) in the emulator: served only when asked, cluster-scoped, both
versions over one storage, its CRD, and the CRD schema's one rule (`spec.value` required).

A fresh cluster has no About API (its CRD is an optional install, and the agent must treat
its absence as normal); `about_api=True` installs it as `sigs.k8s.io/about-api` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kube.fixtures import KubeCluster
from tests.kube.support import custom_api, failure

GROUP = "about.k8s.io"
PLURAL = "clusterproperties"
CRD = f"{PLURAL}.{GROUP}"


def cluster_property(name: str, value: Any, *, version: str = "v1beta1") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "ClusterProperty",
            "metadata": {"name": name}, "spec": {"value": value}}


@pytest.fixture
def about(kube_cluster_factory: Callable[..., KubeCluster]) -> KubeCluster:
    return kube_cluster_factory("about", about_api=True)


def test_not_served_unless_installed(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    with pytest.raises(ApiException) as info:
        custom.list_cluster_custom_object(GROUP, "v1beta1", PLURAL)
    assert info.value.status == 404
    ext: Any = client.ApiextensionsV1Api(kube_cluster.api_client())
    names = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    assert CRD not in names
    groups = client.ApisApi(kube_cluster.api_client()).get_api_versions().groups
    assert GROUP not in {g.name for g in groups}


def test_cluster_scoped_one_storage_two_versions(about: KubeCluster) -> None:
    custom = custom_api(about)
    created = custom.create_cluster_custom_object(
        GROUP, "v1alpha1", PLURAL,
        cluster_property("cluster.clusterset.k8s.io", "east", version="v1alpha1"))
    assert created["apiVersion"] == f"{GROUP}/v1alpha1"
    assert "namespace" not in created["metadata"]
    read = custom.get_cluster_custom_object(GROUP, "v1beta1", PLURAL, "cluster.clusterset.k8s.io")
    assert read["apiVersion"] == f"{GROUP}/v1beta1"
    assert read["metadata"]["uid"] == created["metadata"]["uid"]
    assert read["spec"] == {"value": "east"}
    listed = custom.list_cluster_custom_object(GROUP, "v1beta1", PLURAL)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["cluster.clusterset.k8s.io"]
    # Cluster-scoped: no namespaced path serves it.
    with pytest.raises(ApiException) as info:
        custom.get_namespaced_custom_object(GROUP, "v1beta1", "default", PLURAL,
                                            "cluster.clusterset.k8s.io")
    assert info.value.status == 404
    with pytest.raises(ApiException) as info:
        custom.create_cluster_custom_object(
            GROUP, "v1beta1", PLURAL, cluster_property("cluster.clusterset.k8s.io", "west"))
    assert info.value.status == 409


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "spec.value: Required value"),
        ({"value": ""}, "spec.value: Invalid value"),
        ({"value": 7}, "spec.value: Invalid value"),
    ],
)
def test_spec_value_is_required(about: KubeCluster, spec: dict[str, Any], message: str) -> None:
    custom = custom_api(about)
    body = {"apiVersion": f"{GROUP}/v1beta1", "kind": "ClusterProperty",
            "metadata": {"name": "clusterset.k8s.io"}, "spec": spec}
    with pytest.raises(ApiException) as info:
        custom.create_cluster_custom_object(GROUP, "v1beta1", PLURAL, body)
    assert info.value.status == 422
    assert message in failure(info.value)["message"]


def test_crd_and_discovery_match_upstream(about: KubeCluster) -> None:
    ext: Any = client.ApiextensionsV1Api(about.api_client())
    crd = ext.read_custom_resource_definition(CRD)
    assert crd.spec.group == GROUP
    assert crd.spec.scope == "Cluster"
    assert crd.spec.names.kind == "ClusterProperty"
    assert crd.spec.names.categories == ["multicluster"]
    assert {v.name: v.storage for v in crd.spec.versions} == {"v1alpha1": False,
                                                              "v1beta1": True}
    assert all(v.served and v.subresources.status == {} for v in crd.spec.versions)
    assert [c.json_path for c in crd.spec.versions[0].additional_printer_columns] == [
        ".spec.value", ".metadata.creationTimestamp"]
    assert not crd.metadata.labels  # the MCS release labels are the MCS CRDs' alone
    api: Any = client.CustomObjectsApi(about.api_client())
    for version in ("v1beta1", "v1alpha1"):
        entries = {r.name: r for r in api.get_api_resources(GROUP, version).resources}
        assert entries[PLURAL].kind == "ClusterProperty"
        assert entries[PLURAL].namespaced is False
        assert f"{PLURAL}/status" in entries


def test_cluster_property_flags_are_checked_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--cluster-property NAME=VALUE` (the sandbox's region and zone) needs --about-api
    and the NAME=VALUE form; either mistake is one line and exit 2."""
    from sandbox.emulator.__main__ import main, parse_properties

    assert parse_properties(["a.example.com=x", "b.example.com=y=z"]) == {
        "a.example.com": "x", "b.example.com": "y=z"}
    assert main(["--cluster-property", "region.example.com"]) == 2
    assert "--cluster-property: 'region.example.com' is not NAME=VALUE" in capsys.readouterr().err
    assert main(["--cluster-property", "region.example.com=eu"]) == 2
    assert "needs --about-api" in capsys.readouterr().err
