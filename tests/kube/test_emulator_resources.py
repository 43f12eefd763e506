"""Events, Leases, discovery in both MCS configurations, list selectors and paging."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from shared.constants import MCS_GROUP
from tests.kube.fixtures import KubeCluster
from tests.kube.support import coordination_api, core_api, custom_api, service, service_export

NS = "team-a"


def _event(name: str, reason: str, involved: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "involvedObject": {"apiVersion": f"{MCS_GROUP}/v1beta1", "kind": "ServiceExport",
                           "namespace": NS, "name": involved, "uid": "u-1"},
        "reason": reason, "message": f"{reason} happened", "type": "Normal", "count": 1,
        "source": {"component": "mcsync-agent"},
        "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": "2025-01-01T00:00:00Z",
    }


def test_events_create_patch_list(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    core.create_namespaced_event(NS, _event("web.1", "NoServiceExportConflictFound", "web"))
    core.create_namespaced_event(NS, _event("db.1", "ServiceExportConflictFound", "db"))
    bumped = core.patch_namespaced_event("web.1", NS, {"count": 2})
    assert bumped.count == 2
    listed = core.list_namespaced_event(
        NS, field_selector="involvedObject.kind=ServiceExport,involvedObject.name=web")
    assert [e.reason for e in listed.items] == ["NoServiceExportConflictFound"]
    assert listed.items[0].involved_object.name == "web"
    # The client refuses to send an Event without involvedObject; the server does too.
    raw = httpx.post(f"{kube_cluster.url}/api/v1/namespaces/{NS}/events",
                     json={"metadata": {"name": "bad"}, "reason": "x"})
    assert raw.status_code == 422
    assert raw.json()["reason"] == "Invalid"
    assert "involvedObject" in raw.json()["message"]


def test_leases_create_update_conflict(kube_cluster: KubeCluster) -> None:
    leases = coordination_api(kube_cluster)
    lease = leases.create_namespaced_lease("mcsync-system", {
        "metadata": {"name": "mcsync-agent"},
        "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15,
                 "acquireTime": "2025-01-01T00:00:00.000000Z",
                 "renewTime": "2025-01-01T00:00:00.000000Z", "leaseTransitions": 0}})
    assert lease.spec.holder_identity == "pod-a"
    stale = leases.read_namespaced_lease("mcsync-agent", "mcsync-system")
    lease.spec.holder_identity = "pod-b"
    renewed = leases.replace_namespaced_lease("mcsync-agent", "mcsync-system", lease)
    assert renewed.spec.holder_identity == "pod-b"
    stale.spec.holder_identity = "pod-c"
    with pytest.raises(ApiException) as info:
        leases.replace_namespaced_lease("mcsync-agent", "mcsync-system", stale)
    assert info.value.status == 409
    assert leases.read_namespaced_lease("mcsync-agent", "mcsync-system").spec.holder_identity \
        == "pod-b"
    deleted = leases.delete_namespaced_lease("mcsync-agent", "mcsync-system")
    assert deleted["kind"] == "Status" and deleted["status"] == "Success"
    with pytest.raises(ApiException) as gone:
        leases.read_namespaced_lease("mcsync-agent", "mcsync-system")
    assert gone.value.status == 404


@pytest.mark.parametrize(("versions", "preferred"), [
    (("v1beta1", "v1alpha1"), "v1beta1"),
    (("v1alpha1",), "v1alpha1"),
])
def test_discovery_lists_exactly_the_served_versions(
    kube_cluster_factory: Callable[..., KubeCluster], versions: tuple[str, ...],
    preferred: str,
) -> None:
    cluster = kube_cluster_factory("disc", mcs_versions=versions)
    api = cluster.api_client()
    apis: Any = client.ApisApi(api)
    groups = {g.name: g for g in apis.get_api_versions().groups}
    assert set(groups) == {"coordination.k8s.io", "discovery.k8s.io", "apiextensions.k8s.io",
                           "apps", MCS_GROUP}
    mcs = groups[MCS_GROUP]
    assert [v.version for v in mcs.versions] == list(versions)
    assert mcs.preferred_version.version == preferred
    resources = client.CustomObjectsApi(api).get_api_resources(MCS_GROUP, preferred)
    names = {r.name for r in resources.resources}
    assert names == {"serviceexports", "serviceexports/status", "serviceimports",
                     "serviceimports/status"}
    assert client.CoreV1Api(api).get_api_resources().group_version == "v1"
    assert client.VersionApi(api).get_code().major == "1"

    custom: Any = client.CustomObjectsApi(api)
    created = custom.create_namespaced_custom_object(
        MCS_GROUP, preferred, NS, "serviceexports", service_export("web", version=preferred))
    assert created["apiVersion"] == f"{MCS_GROUP}/{preferred}"
    for version in {"v1beta1", "v1alpha1"} - set(versions):
        with pytest.raises(ApiException) as info:
            custom.list_namespaced_custom_object(MCS_GROUP, version, NS, "serviceexports")
        assert info.value.status == 404


def test_list_label_and_field_selectors(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    core.create_namespaced_service(NS, service("a", labels={"app": "web", "env": "prod"}))
    core.create_namespaced_service(NS, service("b", labels={"app": "api"}))
    core.create_namespaced_service(NS, service("c"))
    core.create_namespaced_service("team-b", service("a", labels={"app": "web"}))

    def names(**kwargs: str) -> list[str]:
        return [f"{s.metadata.namespace}/{s.metadata.name}"
                for s in core.list_service_for_all_namespaces(**kwargs).items]

    assert names(label_selector="app=web") == ["team-a/a", "team-b/a"]
    assert names(label_selector="app==web,env") == ["team-a/a"]
    assert names(label_selector="app!=web") == ["team-a/b", "team-a/c"]
    assert names(label_selector="app in (web, api)") == ["team-a/a", "team-a/b", "team-b/a"]
    assert names(label_selector="app notin (web)") == ["team-a/b", "team-a/c"]
    assert names(label_selector="!app") == ["team-a/c"]
    assert names(field_selector="metadata.name=a") == ["team-a/a", "team-b/a"]
    assert names(field_selector="metadata.namespace=team-b") == ["team-b/a"]
    assert names(field_selector="metadata.name!=a", label_selector="app") == ["team-a/b"]
    with pytest.raises(ApiException) as bad:
        names(label_selector="app in (web")
    assert bad.value.status == 400
    with pytest.raises(ApiException) as unknown_field:
        names(field_selector="spec.type=ClusterIP")
    assert unknown_field.value.status == 400


def test_paging_with_limit_and_continue(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    for i in range(7):
        custom.create_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, "serviceexports",
                                               service_export(f"se-{i}"))
    seen: list[str] = []
    token = ""
    pages = 0
    first_rv = None
    while True:
        page = custom.list_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, "serviceexports",
                                                    limit=3, _continue=token or None)
        pages += 1
        first_rv = first_rv or page["metadata"]["resourceVersion"]
        assert page["metadata"]["resourceVersion"] == first_rv
        seen += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
        assert page["metadata"]["remainingItemCount"] == 7 - len(seen)
    assert pages == 3
    assert seen == [f"se-{i}" for i in range(7)]
