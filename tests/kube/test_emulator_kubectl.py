"""What kubectl needs, driven with the real kubectl: Tables, CRDs, categories, OpenAPI v3.

Operators look at imports with `kubectl get serviceimports -A`, `kubectl get endpointslices
-l …`, `kubectl get svc`; these tests run exactly that against the emulator (through the
kubeconfig the fixture writes) and check the columns a real cluster shows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from shared.constants import LABEL_ENDPOINTSLICE_MANAGED_BY, LABEL_SERVICE_NAME, MCS_GROUP
from tests.kube.fixtures import KubeCluster
from tests.kube.support import service

NS = "team-a"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def kubectl(cluster: KubeCluster, *args: str, stdin: str | None = None) -> str:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "--kubeconfig", str(cluster.kubeconfig), *args],
                          input=stdin, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def seed_import(cluster: KubeCluster, name: str = "web", namespace: str = NS,
                ips: tuple[str, ...] = ("10.96.100.1",)) -> None:
    cluster.state.create("serviceimports", namespace, {
        "metadata": {"name": name},
        "spec": {"type": "ClusterSetIP", "ips": list(ips),
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})


def seed_slice(cluster: KubeCluster, name: str, service_name: str, managed_by: str,
               addresses: tuple[str, ...]) -> None:
    cluster.state.create("endpointslices", NS, {
        "metadata": {"name": name, "labels": {LABEL_SERVICE_NAME: service_name,
                                              LABEL_ENDPOINTSLICE_MANAGED_BY: managed_by}},
        "addressType": "IPv4", "endpoints": [{"addresses": [a]} for a in addresses],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})


@needs_kubectl
def test_kubectl_get_serviceimports_across_namespaces(kube_cluster: KubeCluster) -> None:
    seed_import(kube_cluster, "web", NS)
    seed_import(kube_cluster, "db", "team-b", ips=("10.96.100.2",))
    table = rows(kubectl(kube_cluster, "get", "serviceimports", "-A"))
    assert table[0] == ["NAMESPACE", "NAME", "TYPE", "IP", "AGE"]  # the CRD's printer columns
    assert [r[:4] for r in table[1:]] == [
        [NS, "web", "ClusterSetIP", '["10.96.100.1"]'],
        ["team-b", "db", "ClusterSetIP", '["10.96.100.2"]'],
    ]
    by_short_name = rows(kubectl(kube_cluster, "get", "svcim", "-n", "team-b"))
    assert [r[0] for r in by_short_name[1:]] == ["db"]


@needs_kubectl
def test_kubectl_get_endpointslices_with_a_label_selector(kube_cluster: KubeCluster) -> None:
    seed_slice(kube_cluster, "web-1", "web", "endpointslice-controller.k8s.io",
               ("10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"))
    seed_slice(kube_cluster, "web-mirror", "web", "mcsync.io", ("10.2.0.1",))
    seed_slice(kube_cluster, "db-1", "db", "endpointslice-controller.k8s.io", ("10.1.1.1",))
    out = kubectl(kube_cluster, "get", "endpointslices", "-n", NS, "-l",
                  f"{LABEL_SERVICE_NAME}=web,{LABEL_ENDPOINTSLICE_MANAGED_BY}!=mcsync.io")
    table = rows(out)
    assert table[0] == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert table[1][:4] == ["web-1", "IPv4", "8080", "10.1.0.1,10.1.0.2,10.1.0.3"]
    assert "+ 1 more..." in out
    assert len(table) == 2


@needs_kubectl
def test_kubectl_get_svc_shows_the_allocated_addresses(kube_cluster: KubeCluster) -> None:
    created = kube_cluster.state.create("services", NS, service("web", selector={"app": "web"}))
    table = rows(kubectl(kube_cluster, "get", "svc", "-n", NS, "-o", "wide"))
    assert table[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE",
                        "SELECTOR"]
    name, type_, cluster_ip, external, ports, _age, selector = table[1]
    assert (name, type_, cluster_ip, external, ports, selector) == (
        "web", "ClusterIP", created["spec"]["clusterIP"], "<none>", "80/TCP", "app=web")


@needs_kubectl
def test_kubectl_get_all_uses_categories(kube_cluster: KubeCluster) -> None:
    kube_cluster.state.create("services", NS, service("web"))
    seed_import(kube_cluster)
    out = kubectl(kube_cluster, "get", "all", "-n", NS)
    assert "web" in out and "ClusterIP" in out
    assert "ClusterSetIP" not in out  # the upstream MCS CRDs are in no category


@needs_kubectl
def test_kubectl_create_and_delete_from_a_file(kube_cluster: KubeCluster, tmp_path: Path) -> None:
    manifest = tmp_path / "import.yaml"
    manifest.write_text(f"""\
apiVersion: {MCS_GROUP}/v1beta1
kind: ServiceImport
metadata: {{name: web, namespace: {NS}}}
spec: {{type: ClusterSetIP, ips: ["10.96.100.9"], ports: [{{port: 80, protocol: TCP}}]}}
""")
    assert "serviceimport.multicluster.x-k8s.io/web created" in kubectl(
        kube_cluster, "create", "-f", str(manifest))
    stored = kube_cluster.state.get("serviceimports", NS, "web")
    assert stored is not None and stored["spec"]["ips"] == ["10.96.100.9"]
    kubectl(kube_cluster, "delete", "-f", str(manifest))  # waits for the object to go
    assert kube_cluster.state.get("serviceimports", NS, "web") is None


@needs_kubectl
def test_kubectl_lists_the_crds_and_explains_a_kind(kube_cluster: KubeCluster) -> None:
    crds = rows(kubectl(kube_cluster, "get", "crd"))
    assert crds[0] == ["NAME", "CREATED", "AT"]
    assert [r[0] for r in crds[1:]] == [f"serviceexports.{MCS_GROUP}",
                                       f"serviceimports.{MCS_GROUP}"]
    explained = kubectl(kube_cluster, "explain", "serviceimports")
    assert "KIND:       ServiceImport" in explained
    assert f"GROUP:      {MCS_GROUP}" in explained


@needs_kubectl
def test_kubectl_in_a_missing_namespace_says_not_found(kube_cluster: KubeCluster,
                                                       tmp_path: Path) -> None:
    assert KUBECTL is not None
    manifest = tmp_path / "svc.yaml"
    manifest.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: "
                        "nowhere}\nspec: {ports: [{port: 80}]}\n")
    done = subprocess.run([KUBECTL, "--kubeconfig", str(kube_cluster.kubeconfig), "create",
                           "-f", str(manifest)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode != 0
    assert 'namespaces "nowhere" not found' in done.stderr


def test_table_answer_uses_the_crd_printer_columns(kube_cluster: KubeCluster) -> None:
    seed_import(kube_cluster)
    answer = httpx.get(f"{kube_cluster.url}/apis/{MCS_GROUP}/v1alpha1/namespaces/{NS}/"
                       "serviceimports", headers={"Accept": TABLE})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json;as=Table")
    table = answer.json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Type", "IP", "Age"]
    (row,) = table["rows"]
    assert row["cells"][:3] == ["web", "ClusterSetIP", '["10.96.100.1"]']
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["namespace"] == NS
    single = httpx.get(f"{kube_cluster.url}/apis/{MCS_GROUP}/v1beta1/namespaces/{NS}/"
                       "serviceimports/web", headers={"Accept": TABLE}).json()
    assert single["kind"] == "Table" and len(single["rows"]) == 1
    plain = httpx.get(f"{kube_cluster.url}/apis/{MCS_GROUP}/v1beta1/namespaces/{NS}/"
                      "serviceimports/web").json()
    assert plain["kind"] == "ServiceImport"


def test_crd_objects_describe_what_is_served(kube_cluster: KubeCluster) -> None:
    api: Any = client.ApiextensionsV1Api(kube_cluster.api_client())
    crd = api.read_custom_resource_definition(f"serviceimports.{MCS_GROUP}")
    assert crd.spec.group == MCS_GROUP and crd.spec.scope == "Namespaced"
    assert crd.spec.names.short_names == ["svcim", "svcimport"]
    assert crd.metadata.labels["multicluster.x-k8s.io/release-version"] == "v0.5.0"
    versions = {v.name: v for v in crd.spec.versions}
    assert set(versions) == {"v1alpha1", "v1beta1"}
    assert versions["v1beta1"].storage and not versions["v1alpha1"].storage
    assert all(v.served and v.subresources.status is not None for v in versions.values())
    assert [(c.name, c.json_path) for c in versions["v1beta1"].additional_printer_columns] == [
        ("Type", ".spec.type"), ("IP", ".spec.ips"), ("Age", ".metadata.creationTimestamp")]
    established = {c.type: c.status for c in crd.status.conditions}
    assert established["Established"] == "True"
    listed = api.list_custom_resource_definition().items
    assert [c.metadata.name for c in listed] == [f"serviceexports.{MCS_GROUP}",
                                                 f"serviceimports.{MCS_GROUP}"]
    refused = httpx.delete(f"{kube_cluster.url}/apis/apiextensions.k8s.io/v1/"
                           f"customresourcedefinitions/serviceimports.{MCS_GROUP}")
    assert refused.status_code == 405  # the emulator's CRDs are fixed


def test_crds_follow_the_configured_mcs_versions(kube_cluster_factory: Any) -> None:
    cluster = kube_cluster_factory("old", mcs_versions=("v1alpha1",))
    crd = cluster.state.get("customresourcedefinitions", None, f"serviceexports.{MCS_GROUP}")
    assert crd is not None
    assert [(v["name"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1alpha1", True)]


def test_openapi_v3_advertises_server_side_field_validation(kube_cluster: KubeCluster) -> None:
    index = httpx.get(f"{kube_cluster.url}/openapi/v3").json()["paths"]
    assert {"api/v1", "apis/discovery.k8s.io/v1", f"apis/{MCS_GROUP}/v1beta1",
            f"apis/{MCS_GROUP}/v1alpha1", "apis/apiextensions.k8s.io/v1"} <= set(index)
    doc = httpx.get(kube_cluster.url + index[f"apis/{MCS_GROUP}/v1beta1"]["serverRelativeURL"]
                    ).json()
    item = doc["paths"][f"/apis/{MCS_GROUP}/v1beta1/namespaces/{{namespace}}/serviceimports/"
                        "{name}"]
    assert item["patch"]["x-kubernetes-group-version-kind"] == {
        "group": MCS_GROUP, "version": "v1beta1", "kind": "ServiceImport"}
    assert "fieldValidation" in [p["name"] for p in item["patch"]["parameters"]]
    assert httpx.get(f"{kube_cluster.url}/openapi/v3/apis/nope/v1").status_code == 404


def test_watch_as_table_sends_one_row_tables(kube_cluster: KubeCluster) -> None:
    kube_cluster.state.create("services", NS, service("web"))
    answer = httpx.get(f"{kube_cluster.url}/api/v1/namespaces/{NS}/services",
                       params={"watch": "true", "timeoutSeconds": "1"},
                       headers={"Accept": TABLE}, timeout=15)
    (line,) = answer.text.splitlines()
    event = json.loads(line)
    assert event["type"] == "ADDED"
    assert event["object"]["kind"] == "Table"
    assert [r["cells"][0] for r in event["object"]["rows"]] == ["web"]


@needs_kubectl
def test_kubectl_apply_twice_changes_a_service_port(kube_cluster: KubeCluster,
                                                    tmp_path: Path) -> None:
    manifest = tmp_path / "svc.yaml"
    template = ("apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: {ns}}}\n"
                "spec: {{selector: {{app: web}}, ports: [{{name: http, port: {port}}}]}}\n")
    manifest.write_text(template.format(ns=NS, port=80))
    assert "service/web created" in kubectl(kube_cluster, "apply", "-f", str(manifest))
    allocated = kube_cluster.state.get("services", NS, "web")
    assert allocated is not None
    manifest.write_text(template.format(ns=NS, port=81))
    assert "service/web configured" in kubectl(kube_cluster, "apply", "-f", str(manifest))
    stored = kube_cluster.state.get("services", NS, "web")
    assert stored is not None
    assert [(p["name"], p["port"]) for p in stored["spec"]["ports"]] == [("http", 81)]
    assert stored["spec"]["clusterIP"] == allocated["spec"]["clusterIP"]  # kept by apply
    assert "service/web unchanged" in kubectl(kube_cluster, "apply", "-f", str(manifest))


# -- kubectl's typed commands (protobuf bodies), describe, and what the emulator refuses ----


def kubectl_fails(cluster: KubeCluster, *args: str, stdin: str | None = None) -> str:
    """kubectl's stderr for a command that must fail."""
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "--kubeconfig", str(cluster.kubeconfig), *args],
                          input=stdin, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0, done.stdout
    return done.stderr


@needs_kubectl
def test_kubectl_create_namespace_and_service_send_protobuf(kube_cluster: KubeCluster) -> None:
    assert "namespace/shop created" in kubectl(kube_cluster, "create", "namespace", "shop")
    assert kube_cluster.state.get("namespaces", None, "shop") is not None
    assert "AlreadyExists" in kubectl_fails(kube_cluster, "create", "namespace", "shop")
    kubectl(kube_cluster, "create", "service", "clusterip", "cart", "--tcp=80:8080", "-n",
            "shop")
    stored = kube_cluster.state.get("services", "shop", "cart")
    assert stored is not None
    assert stored["metadata"]["labels"] == {"app": "cart"}
    assert stored["spec"]["selector"] == {"app": "cart"}
    assert stored["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"], p["targetPort"], p["protocol"])
            for p in stored["spec"]["ports"]] == [("80-8080", 80, 8080, "TCP")]
    assert "nodePort" not in stored["spec"]["ports"][0]  # protobuf's zero is JSON's absent


@needs_kubectl
def test_kubectl_describe_namespace_service_and_export(kube_cluster: KubeCluster) -> None:
    kube_cluster.state.create("services", NS, service("web", selector={"app": "web"}))
    kube_cluster.state.create("serviceexports", NS, {"metadata": {"name": "web"}})
    assert "Status:       Active" in kubectl(kube_cluster, "describe", "namespace", NS)
    described = kubectl(kube_cluster, "describe", "service", "web", "-n", NS)
    assert "Selector:" in described and "app=web" in described
    assert "Kind:         ServiceExport" in kubectl(kube_cluster, "describe", "serviceexport",
                                                    "web", "-n", NS)


@needs_kubectl
def test_kubectl_is_told_what_the_emulator_does_not_serve(kube_cluster: KubeCluster) -> None:
    refused = kubectl_fails(kube_cluster, "create", "secret", "generic", "s",
                            "--from-literal=a=b", "-n", NS)
    assert "the mcsync emulator does not serve secrets (v1)" in refused
    assert "services" in refused  # and says what it serves
    crd = ("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
           "metadata: {name: foos.example.com}\nspec: {group: example.com, names: {kind: Foo, "
           "plural: foos}, scope: Namespaced, versions: [{name: v1, served: true, storage: "
           "true, schema: {openAPIV3Schema: {type: object}}}]}\n")
    refused = kubectl_fails(kube_cluster, "apply", "-f", "-", stdin=crd)
    assert "MethodNotAllowed" in refused and "its CRDs are built in" in refused


@pytest.mark.parametrize(("accept", "code"), [
    ("application/vnd.kubernetes.protobuf,application/json", 200),  # kubectl's typed clients
    ("application/vnd.kubernetes.protobuf, */*", 200),
    ("", 200),
    ("application/vnd.kubernetes.protobuf", 406),
    ("application/yaml", 406),
])
def test_json_is_answered_when_the_accept_header_allows_it(kube_cluster: KubeCluster,
                                                           accept: str, code: int) -> None:
    answer = httpx.get(f"{kube_cluster.url}/api/v1/namespaces", headers={"Accept": accept})
    assert answer.status_code == code
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json()["kind"] == ("NamespaceList" if code == 200 else "Status")
    # A path that does not exist is 404 whatever it accepts (kubectl tolerates OpenAPI v2's).
    v2 = httpx.get(f"{kube_cluster.url}/openapi/v2", headers={"Accept": accept or "*/*"})
    assert v2.status_code == 404


@needs_kubectl
def test_kubectl_create_and_expose_a_deployment(kube_cluster_factory: Any) -> None:
    """Stored only (no Pods follow), but enough for the usual two commands; with the
    EndpointSlice stand-in on, the exposed Service has endpoints."""
    demo = kube_cluster_factory("demo", endpoint_cidr="192.0.2.0/24", namespaces=(NS,))
    assert "deployment.apps/web created" in kubectl(demo, "create", "deployment", "web",
                                                    "--image=nginx", "-n", NS)
    stored = demo.state.get("deployments", NS, "web")
    assert stored is not None
    assert stored["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert stored["spec"]["template"]["spec"]["containers"] == [
        {"name": "nginx", "image": "nginx"}]
    assert "service/web exposed" in kubectl(demo, "expose", "deployment", "web", "--port",
                                            "80", "--target-port", "8080", "-n", NS)
    table = rows(kubectl(demo, "get", "endpointslices", "-n", NS))
    deadline = 50
    while len(table) < 2 and deadline:
        deadline -= 1
        table = rows(kubectl(demo, "get", "endpointslices", "-n", NS))
    assert table[1][1:4] == ["IPv4", "8080", "192.0.2.1,192.0.2.2"]
