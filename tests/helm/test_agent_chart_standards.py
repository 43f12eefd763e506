"""The member chart's MCS standards pieces: the About API CRD behind `aboutApi.installCRD`
(SPEC §2.1, KEP-2149) and the upstream labels of the shipped MCS CRDs (§2.1).

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

from sandbox.emulator.crds import crd_object
from sandbox.emulator.resources import CLUSTER_PROPERTIES, ResourceCatalog
from tests.helm.conftest import AGENT_CHART, REPO, crds, load_model, render

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
