"""The member chart's MCS standards pieces: the About API CRD behind `aboutApi.installCRD`
(docs/reference.md#export-path, KEP-2149), the upstream labels of the shipped MCS CRDs
(docs/reference.md#export-path), and the CoreDNS wiring behind `coredns.multicluster.enabled`
(docs/reference.md#import-path).

The About API CRD is compared with the one the emulator serves (`sandbox.emulator.crds`,
which the agent tests run against), so that what the chart installs is what the agent was
tested on. The MCS CRDs' labels are compared with the upstream files kept in
`../shared/mcs-api` (sigs.k8s.io/mcs-api v0.5.0) when that directory is there, and always
with the release the chart pins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from member.corefile import MARKER
from member.corefile import main as corefile_main
from sandbox.emulator.crds import crd_object
from sandbox.emulator.resources import CLUSTER_PROPERTIES, ResourceCatalog
from tests.helm.conftest import (
    AGENT_CHART,
    NAMESPACE,
    REPO,
    Rendered,
    assert_hardened,
    assert_lint_clean,
    crds,
    load_all,
    load_model,
    render,
)
from tests.kube.fixtures import KubeCluster, kube_cluster  # noqa: F401

BASE: dict[str, Any] = {
    "hubUrl": "https://mcsync.example.com",
    "clusterId": "east-1",
    "token": {"value": "member-token"},
}
ABOUT_CRD = "clusterproperties.about.k8s.io"
CATALOG = ResourceCatalog()
UPSTREAM_MCS = REPO.parent / "shared" / "mcs-api"
MCS_LABELS = ("multicluster.x-k8s.io/release-version", "multicluster.x-k8s.io/crd-schema-revision")
PINNED = {"multicluster.x-k8s.io/release-version": "v0.5.0",
          "multicluster.x-k8s.io/crd-schema-revision": "0"}


@pytest.mark.parametrize(("values", "installed"), [
    (BASE, False),
    ({**BASE, "aboutApi": {"installCRD": False}}, False),
    ({**BASE, "aboutApi": {"installCRD": True}}, True),
])
def test_about_api_crd_only_when_asked(values: dict[str, Any], installed: bool) -> None:
    found = render(AGENT_CHART, values).of_kind("CustomResourceDefinition")
    assert [c["metadata"]["name"] for c in found] == ([ABOUT_CRD] if installed else [])


def test_about_api_crd_is_the_served_one_and_outlives_the_release() -> None:
    crd = render(AGENT_CHART, {**BASE, "aboutApi": {"installCRD": True}}).one(
        "CustomResourceDefinition")
    load_model(crd)
    # Other tools read the properties: uninstalling mcsync must not delete them.
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    served = crd_object(CLUSTER_PROPERTIES)
    spec = crd["spec"]
    for key in ("group", "scope", "names"):
        assert spec[key] == served["spec"][key], key

    def summary(versions: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(v["name"], v["served"], v["storage"], v["subresources"],
                 v["additionalPrinterColumns"]) for v in versions]
    assert summary(spec["versions"]) == summary(served["spec"]["versions"])
    for version in spec["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        value = schema["properties"]["spec"]
        assert value["required"] == ["value"]
        assert value["properties"]["value"] == {
            "description": "ClusterProperty value", "type": "string", "minLength": 1}


def shipped() -> dict[str, dict[str, Any]]:
    return {crd["metadata"]["name"]: crd for crd in crds(AGENT_CHART)}


@pytest.mark.parametrize("name", ["serviceexports.multicluster.x-k8s.io",
                                  "serviceimports.multicluster.x-k8s.io"])
def test_mcs_crds_carry_the_upstream_labels(name: str) -> None:
    labels = shipped()[name]["metadata"]["labels"]
    assert {k: labels[k] for k in MCS_LABELS} == PINNED
    # The emulator's CRDs (what agent tests meet) say the same.
    rt = CATALOG.by_plural(name.split(".")[0])
    assert crd_object(rt)["metadata"]["labels"] == PINNED


@pytest.mark.skipif(not UPSTREAM_MCS.is_dir(), reason="../shared/mcs-api is not checked out")
@pytest.mark.parametrize("name", ["serviceexports.multicluster.x-k8s.io",
                                  "serviceimports.multicluster.x-k8s.io"])
def test_mcs_crds_match_the_upstream_files(name: str) -> None:
    upstream_file = UPSTREAM_MCS / f"multicluster.x-k8s.io_{name.split('.')[0]}.yaml"
    upstream: dict[str, Any] = yaml.safe_load(Path(upstream_file).read_text())
    ours = shipped()[name]
    assert {k: ours["metadata"]["labels"][k] for k in MCS_LABELS} == {
        k: upstream["metadata"]["labels"][k] for k in MCS_LABELS}
    assert ours["spec"] == upstream["spec"]


# -- coredns.multicluster: CoreDNS serves clusterset.local (docs/reference.md#import-path)
# ----------------------

COREDNS = {**BASE, "coredns": {"multicluster": {"enabled": True}}}


def coredns_objects(rendered: Rendered) -> list[dict[str, Any]]:
    """Everything the CoreDNS value renders: what touches CoreDNS or runs its hook."""
    return [o for o in rendered.objects
            if "coredns" in o["metadata"]["name"] or "corefile" in o["metadata"]["name"]]


def test_coredns_is_left_alone_when_off() -> None:
    rendered = render(AGENT_CHART, BASE)
    assert coredns_objects(rendered) == []
    assert rendered.of_kind("Job") == []
    assert all(o["metadata"].get("namespace") in (None, NAMESPACE) for o in rendered.objects)


def test_coredns_may_read_serviceimports_and_nothing_more() -> None:
    assert_lint_clean(AGENT_CHART, COREDNS)
    rendered = render(AGENT_CHART, COREDNS)
    load_all(rendered)
    assert_hardened(rendered)
    roles = {r["metadata"]["name"]: r for r in rendered.of_kind("ClusterRole")}
    (binding,) = [b for b in rendered.of_kind("ClusterRoleBinding")
                  if b["subjects"][0]["name"] == "coredns"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}]
    role = roles[binding["roleRef"]["name"]]
    assert role["rules"] == [{"apiGroups": ["multicluster.x-k8s.io"],
                              "resources": ["serviceimports"],
                              "verbs": ["get", "list", "watch"]}]


def test_the_hook_may_edit_only_the_corefile_configmap() -> None:
    rendered = render(AGENT_CHART, COREDNS)
    (role,) = [r for r in rendered.of_kind("Role") if r["metadata"]["namespace"] == "kube-system"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"],
                              "resourceNames": ["coredns"], "verbs": ["get", "update"]}]
    (binding,) = [b for b in rendered.of_kind("RoleBinding")
                  if b["metadata"]["namespace"] == "kube-system"]
    (account,) = [a for a in rendered.of_kind("ServiceAccount")
                  if "corefile" in a["metadata"]["name"]]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount",
                                    "name": account["metadata"]["name"],
                                    "namespace": NAMESPACE}]
    for job in rendered.of_kind("Job"):
        pod = job["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == account["metadata"]["name"]
        # The hook's pod is never selected by the agent's Deployment or metrics Service.
        selector = rendered.one("Deployment")["spec"]["selector"]["matchLabels"]
        labels = job["spec"]["template"]["metadata"]["labels"]
        assert not selector.items() <= labels.items()


def hook_jobs(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    jobs = render(AGENT_CHART, values).of_kind("Job")
    return {job["metadata"]["annotations"]["helm.sh/hook"]: job for job in jobs}


def test_hooks_add_after_install_and_upgrade_and_remove_before_delete(
    kube_cluster: KubeCluster,  # noqa: F811 (the fixture imported above)
) -> None:
    """The rendered Jobs' command lines, run against an emulated cluster's CoreDNS
    ConfigMap: the stanza goes in, then comes out, leaving the Corefile as it was."""
    jobs = hook_jobs(COREDNS)
    assert set(jobs) == {"post-install,post-upgrade", "pre-delete"}
    corefile = ".:53 {\n    errors\n    kubernetes cluster.local\n    reload\n}\n"
    kube_cluster.state.create("configmaps", "kube-system", {
        "metadata": {"name": "coredns"}, "data": {"Corefile": corefile}})

    def run(job: dict[str, Any]) -> None:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["python", "-m", "member.corefile"]
        assert corefile_main([*container["args"], "--kubeconfig",
                              str(kube_cluster.kubeconfig)]) == 0

    def current() -> str:
        found = kube_cluster.state.get("configmaps", "kube-system", "coredns")
        assert found is not None
        return str(found["data"]["Corefile"])

    run(jobs["post-install,post-upgrade"])
    assert "    multicluster clusterset.local\n" in current()
    run(jobs["pre-delete"])
    assert current() == corefile


def test_hook_flags_come_from_values() -> None:
    values = {**BASE, "coredns": {"multicluster": {
        "enabled": True, "namespace": "dns", "configMap": "corefile", "zone": "mesh.example"}}}
    (container,) = hook_jobs(values)["pre-delete"]["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["remove", "--namespace=dns", "--configmap=corefile",
                                 "--zone=mesh.example"]


def test_the_install_guide_shows_the_stanza_the_hook_adds() -> None:
    guide = (REPO / "docs" / "install.md").read_text()
    assert f"    {MARKER}\n    multicluster clusterset.local\n" in guide
    assert "--set coredns.multicluster.enabled=true" in guide
