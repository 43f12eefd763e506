"""Client loading and ServiceExport version discovery (docs/reference.md#export-path, #flags),
against the emulator."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from member.kube.client import KubeConfigError, discover_serviceexport_version, load_api_client
from sandbox.emulator.kubeconfig import write_kubeconfig
from tests.kube.fixtures import KubeCluster, KubeClusterFactory


def uninstall_serviceexport_crd(cluster: KubeCluster) -> None:
    """Like `kubectl delete crd serviceexports.multicluster.x-k8s.io` on the emulator."""
    catalog = cluster.state.catalog
    catalog.types = tuple(rt for rt in catalog.types if rt.plural != "serviceexports")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_v1beta1_is_preferred(kube_cluster_factory: KubeClusterFactory) -> None:
    cluster = kube_cluster_factory("both", mcs_versions=["v1alpha1", "v1beta1"])
    api = load_api_client(kubeconfig=str(cluster.kubeconfig))
    try:
        assert discover_serviceexport_version(api) == "v1beta1"
    finally:
        api.close()


def test_v1alpha1_fallback(kube_cluster_factory: KubeClusterFactory) -> None:
    cluster = kube_cluster_factory("old", mcs_versions=["v1alpha1"])
    api = load_api_client(kubeconfig=str(cluster.kubeconfig))
    try:
        assert discover_serviceexport_version(api) == "v1alpha1"
    finally:
        api.close()


def test_crd_not_served_is_a_clear_error(kube_cluster: KubeCluster) -> None:
    uninstall_serviceexport_crd(kube_cluster)
    api = load_api_client(kubeconfig=str(kube_cluster.kubeconfig))
    try:
        with pytest.raises(KubeConfigError, match="does not serve ServiceExports") as info:
            discover_serviceexport_version(api)
    finally:
        api.close()
    assert "install the ServiceExport CRD" in str(info.value)


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    port = closed_port()
    path = write_kubeconfig(
        tmp_path / "gone.kubeconfig", name="gone", url=f"http://127.0.0.1:{port}"
    )
    api = load_api_client(kubeconfig=str(path))
    try:
        with pytest.raises(KubeConfigError, match="unreachable") as info:
            discover_serviceexport_version(api)
    finally:
        api.close()
    assert f"127.0.0.1:{port}" in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_kubeconfig_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.kubeconfig"
    with pytest.raises(KubeConfigError, match="does not exist") as info:
        load_api_client(kubeconfig=str(missing))
    assert str(missing) in str(info.value)


def test_garbage_kubeconfig_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    with pytest.raises(KubeConfigError, match="not usable"):
        load_api_client(kubeconfig=str(path))


def test_explicit_kubeconfig_never_touches_the_global_default(kube_cluster: KubeCluster) -> None:
    before = k8s.Configuration.get_default_copy().host
    api = load_api_client(kubeconfig=str(kube_cluster.kubeconfig))
    try:
        assert api.configuration.host == kube_cluster.url
        assert k8s.Configuration.get_default_copy().host == before
        assert discover_serviceexport_version(api) == "v1beta1"
    finally:
        api.close()


def test_default_kubeconfig_when_not_in_cluster(
    kube_cluster: KubeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    shutil.copy(kube_cluster.kubeconfig, home / ".kube" / "config")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(k8s_config, "KUBE_CONFIG_DEFAULT_LOCATION", "~/.kube/config")
    api = load_api_client(kubeconfig=None)
    try:
        assert api.configuration.host == kube_cluster.url
    finally:
        api.close()


def test_no_configuration_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(k8s_config, "KUBE_CONFIG_DEFAULT_LOCATION", "~/.kube/config")
    with pytest.raises(KubeConfigError, match="not running in a cluster"):
        load_api_client(kubeconfig=None)
