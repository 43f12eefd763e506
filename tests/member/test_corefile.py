"""The chart's CoreDNS hook (`member.corefile`, docs/reference.md#import-path): the `multicluster`
stanza goes into the root server block and comes out again, nothing else of the Corefile changes,
and against an emulated cluster's ConfigMap an unchanged Corefile is never rewritten."""

from __future__ import annotations

import pytest

from member.corefile import MARKER, CorefileError, add_stanza, main, remove_stanza
from tests.kube.fixtures import KubeCluster

# kubeadm's (and kind's) default Corefile.
KUBEADM = """.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
"""
TABS = ".:53 {\n\terrors\n\treload\n}\n"
ZONES = "example.org:53 {\n    forward . 10.0.0.1\n}\n. {\n    errors\n}\n"
HAND_MADE = ".:53 {\n    errors\n    multicluster clusterset.local {\n      noendpoints\n    }\n}\n"

# (Corefile, zone) → the lines expected right after the root block's opening line.
ADD_CASES = [
    ("kubeadm default", KUBEADM, "clusterset.local",
     [f"    {MARKER}", "    multicluster clusterset.local"]),
    ("tab-indented", TABS, "clusterset.local", [f"\t{MARKER}", "\tmulticluster clusterset.local"]),
    ("root block after another zone", ZONES, "clusterset.local",
     [f"    {MARKER}", "    multicluster clusterset.local"]),
    ("another zone name", KUBEADM, "mesh.example",
     [f"    {MARKER}", "    multicluster mesh.example"]),
]


@pytest.mark.parametrize(("corefile", "zone", "stanza"), [c[1:] for c in ADD_CASES],
                         ids=[c[0] for c in ADD_CASES])
def test_add_then_remove_gives_the_corefile_back(corefile: str, zone: str,
                                                 stanza: list[str]) -> None:
    added = add_stanza(corefile, zone=zone)
    lines = added.splitlines()
    root = next(i for i, line in enumerate(lines) if line.startswith("."))
    assert lines[root + 1: root + 3] == stanza
    assert [line for line in lines if line not in stanza] == corefile.splitlines()
    assert add_stanza(added, zone=zone) == added  # once
    assert remove_stanza(added) == corefile


def test_a_hand_made_multicluster_line_is_kept_and_never_removed() -> None:
    assert add_stanza(HAND_MADE) == HAND_MADE
    assert remove_stanza(HAND_MADE) == HAND_MADE


def test_no_root_block_is_an_error_naming_the_stanza() -> None:
    with pytest.raises(CorefileError, match=r"multicluster clusterset\.local"):
        add_stanza("example.org:53 {\n    errors\n}\n")


def _configmap(cluster: KubeCluster, corefile: str) -> None:
    cluster.state.create("configmaps", "kube-system", {
        "metadata": {"name": "coredns"}, "data": {"Corefile": corefile}})


def _corefile(cluster: KubeCluster) -> str:
    found = cluster.state.get("configmaps", "kube-system", "coredns")
    assert found is not None
    return str(found["data"]["Corefile"])


def test_the_hook_against_a_cluster(kube_cluster: KubeCluster,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    _configmap(kube_cluster, KUBEADM)
    args = ["--kubeconfig", str(kube_cluster.kubeconfig)]
    assert main(["add", *args]) == 0
    assert "multicluster clusterset.local" in _corefile(kube_cluster)
    assert kube_cluster.state.writes("configmaps") == 1
    assert main(["add", *args]) == 0  # an upgrade: nothing to change, nothing written
    assert kube_cluster.state.writes("configmaps") == 1
    assert main(["remove", *args]) == 0
    assert _corefile(kube_cluster) == KUBEADM
    assert kube_cluster.state.writes("configmaps") == 2
    out = capsys.readouterr().out.splitlines()
    assert out == ["multicluster stanza added to kube-system/coredns",
                   "multicluster stanza already as wanted in kube-system/coredns",
                   "multicluster stanza removed from kube-system/coredns"]


def test_no_coredns_configmap_is_one_line(kube_cluster: KubeCluster,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["add", "--kubeconfig", str(kube_cluster.kubeconfig)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == ("python -m member.corefile: error: ConfigMap kube-system/coredns does not "
                    "exist: is CoreDNS managed elsewhere? (docs/install.md)")
