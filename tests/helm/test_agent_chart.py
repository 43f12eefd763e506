"""The mcsync-agent chart: CRDs, least-privilege RBAC, leader election and the member token.

Exporting, the agent writes only ServiceExport status, its finalizer, Events and its Lease
(docs/reference.md#export-path); importing, it creates, replaces and deletes the ServiceImports,
derived Services and mirrored EndpointSlices it manages (docs/reference.md#import-path) and reads
Namespaces and the ServiceImport CRD. The RBAC tests hold the chart to exactly that, so a later
"just add a verb" shows up as a failing test and a review question.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from member.imports.importspec import (
    OPTIONAL_IMPORT_FIELDS,
    desired_service_import,
    desired_service_import_status,
)
from member.settings import parse_args
from shared.models import ServiceImport
from tests.helm.conftest import (
    AGENT_CHART,
    NAMESPACE,
    RELEASE,
    REPO,
    Rendered,
    assert_hardened,
    assert_lint_clean,
    container_named,
    crds,
    flag_values,
    install_doc_values,
    load_all,
    load_model,
    render,
    render_as,
    render_error,
)

TOKEN = "member-token-literal-9f8e7d6c5b4a"
BASE: dict[str, Any] = {
    "hubUrl": "https://mcsync.example.com",
    "clusterId": "east-1",
    "token": {"value": TOKEN},
}

SCENARIOS: dict[str, dict[str, Any]] = {
    "minimal": BASE,
    "ha-existing-secret": {
        **BASE,
        "replicaCount": 3,
        "token": {"existingSecret": "mcsync-member-token", "existingSecretKey": "member"},
        "metrics": {"serviceMonitor": {"enabled": True}},
    },
    "watch-namespaces": {**BASE, "watchNamespaces": ["shop", "payments"]},
    "export-only": {**BASE, "import": {"enabled": False}},
    "watch-namespaces-export-only": {
        **BASE,
        "watchNamespaces": ["shop"],
        "import": {"enabled": False},
    },
}

# docs/reference.md#export-path: read Services; read and update ServiceExports (finalizer); write
# their status; record Events (core and events.k8s.io); read EndpointSlices to export them
# (docs/reference.md#import-path). As (apiGroup, resource) -> verbs.
EXPORT_RULES = {
    ("", "services"): {"get", "list", "watch"},
    ("multicluster.x-k8s.io", "serviceexports"): {"get", "list", "watch", "update", "patch"},
    ("multicluster.x-k8s.io", "serviceexports/status"): {"get", "update", "patch"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("discovery.k8s.io", "endpointslices"): {"get", "list", "watch"},
}
# docs/reference.md#import-path, per watched namespace: the import reconcilers POST, PUT (the whole
# object, or the ServiceImport's status) and DELETE their three kinds; never PATCH.
WRITE = {"create", "update", "delete"}
IMPORT_RULES = {
    **EXPORT_RULES,
    ("", "services"): {"get", "list", "watch"} | WRITE,
    ("discovery.k8s.io", "endpointslices"): {"get", "list", "watch"} | WRITE,
    ("multicluster.x-k8s.io", "serviceimports"): {"get", "list", "watch"} | WRITE,
    ("multicluster.x-k8s.io", "serviceimports/status"): {"update"},
}
# Cluster-scoped reads of the import side: Namespaces (informers) and the ServiceImport CRD
# (which optional spec fields its schema has). As (apiGroup, resource) -> verbs.
CLUSTER_READS = {
    ("", "namespaces"): {"list", "watch"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"get"},
}
# docs/reference.md#export-path (KEP-2149): read the About API's ClusterProperties and create them
# when absent, in every scenario (another tool may have installed the CRD); never update or delete.
# list/watch: every property is reported to the hub (docs/reference.md#cluster-properties).
IDENTITY_RULES = {("about.k8s.io", "clusterproperties"): {"get", "create", "list", "watch"}}
SERVICEIMPORT_CRD = "serviceimports.multicluster.x-k8s.io"
LEASE_RULES = {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
RBAC_KINDS = ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def scenario(request: pytest.FixtureRequest) -> tuple[str, Rendered]:
    return request.param, render(AGENT_CHART, SCENARIOS[request.param])


def agent_container(rendered: Rendered) -> dict[str, Any]:
    return container_named(rendered.one("Deployment")["spec"]["template"]["spec"], "agent")


def rules_of(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """A role's rules flattened to (apiGroup, resource) -> verbs, refusing duplicates."""
    flat: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "resourceNames" not in rule or rule["resourceNames"]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert (group, resource) not in flat, f"{group}/{resource} granted twice"
                flat[(group, resource)] = set(rule["verbs"])
    return flat


def names_of(role: dict[str, Any]) -> dict[tuple[str, str], list[str] | None]:
    """(apiGroup, resource) -> the resourceNames its rule is limited to (None: any)."""
    return {
        (group, resource): rule.get("resourceNames")
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def import_enabled(values: dict[str, Any]) -> bool:
    return bool(values.get("import", {}).get("enabled", True))


def test_every_object_is_valid_kubernetes(scenario: tuple[str, Rendered]) -> None:
    load_all(scenario[1])


def test_every_container_is_hardened(scenario: tuple[str, Rendered]) -> None:
    assert_hardened(scenario[1])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_helm_lint_is_clean(name: str) -> None:
    assert_lint_clean(AGENT_CHART, SCENARIOS[name])


def test_no_wildcard_and_nothing_cluster_admin(scenario: tuple[str, Rendered]) -> None:
    rendered = scenario[1]
    for role in rendered.of_kind("ClusterRole") + rendered.of_kind("Role"):
        assert "aggregationRule" not in role
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, []), f"{role['metadata']['name']}: * in {key}"
            assert "nonResourceURLs" not in rule
    for binding in rendered.of_kind("ClusterRoleBinding") + rendered.of_kind("RoleBinding"):
        assert binding["roleRef"]["name"] not in {"cluster-admin", "admin", "edit"}
        (subject,) = binding["subjects"]
        assert subject == {
            "kind": "ServiceAccount",
            "name": rendered.one("ServiceAccount")["metadata"]["name"],
            "namespace": NAMESPACE,
        }
        # It binds a role of this release (a RoleBinding: one in its own namespace).
        bound = [
            r
            for r in rendered.of_kind(binding["roleRef"]["kind"])
            if r["metadata"]["name"] == binding["roleRef"]["name"]
            and r["metadata"].get("namespace") == binding["metadata"].get("namespace")
        ]
        assert len(bound) == 1, binding["metadata"]


@pytest.mark.parametrize("name", ["minimal", "export-only"])
def test_cluster_role_grants_exactly_what_the_agent_needs(name: str) -> None:
    rendered = render(AGENT_CHART, SCENARIOS[name])
    role = rendered.one("ClusterRole")
    if import_enabled(SCENARIOS[name]):
        assert rules_of(role) == {**IMPORT_RULES, **CLUSTER_READS, **IDENTITY_RULES}
        names = names_of(role)
        # Every namespace may receive imports: all of them, watched.
        assert names[("", "namespaces")] is None
        assert names[("apiextensions.k8s.io", "customresourcedefinitions")] == [SERVICEIMPORT_CRD]
    else:
        assert rules_of(role) == {**EXPORT_RULES, **IDENTITY_RULES}
    binding = rendered.one("ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert NAMESPACE in role["metadata"]["name"], "two releases would share one ClusterRole"


@pytest.mark.parametrize("name", ["watch-namespaces", "watch-namespaces-export-only"])
def test_watch_namespaces_get_roles_and_only_named_cluster_reads(name: str) -> None:
    values = SCENARIOS[name]
    rendered = render(AGENT_CHART, values)
    watched = values["watchNamespaces"]
    roles = {r["metadata"]["namespace"]: r for r in rendered.of_kind("Role")}
    assert set(roles) == set(watched)
    expected = IMPORT_RULES if import_enabled(values) else EXPORT_RULES
    for role in roles.values():
        assert rules_of(role) == expected
    bindings = {b["metadata"]["namespace"] for b in rendered.of_kind("RoleBinding")}
    assert bindings == set(watched)
    agent = agent_container(rendered)
    assert flag_values(agent, "--namespace") == watched
    role = rendered.one("ClusterRole")
    if not import_enabled(values):
        # Only the cluster's identity is cluster-wide (ClusterProperties are cluster-scoped).
        assert rules_of(role) == IDENTITY_RULES
        return
    # Namespaces are cluster-scoped: no Role can grant them. The agent lists and watches
    # each watched namespace with fieldSelector metadata.name=<ns>, which the API server
    # authorises as a request for that name: the ClusterRole names exactly those.
    assert rules_of(role) == {**CLUSTER_READS, **IDENTITY_RULES}
    assert names_of(role) == {
        ("", "namespaces"): watched,
        ("apiextensions.k8s.io", "customresourcedefinitions"): [SERVICEIMPORT_CRD],
        ("about.k8s.io", "clusterproperties"): None,
    }
    binding = rendered.one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert NAMESPACE in role["metadata"]["name"], "two releases would share one ClusterRole"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_import_enabled_false_passes_no_import_and_grants_no_import_rules(name: str) -> None:
    values = SCENARIOS[name]
    rendered = render(AGENT_CHART, values)
    agent = agent_container(rendered)
    enabled = import_enabled(values)
    assert ("--no-import" in agent["args"]) is not enabled
    import_only = (set(IMPORT_RULES) - set(EXPORT_RULES)) | set(CLUSTER_READS)
    for role in rendered.of_kind("ClusterRole") + rendered.of_kind("Role"):
        granted = rules_of(role)
        if enabled:
            continue
        assert not import_only & set(granted), role["metadata"]["name"]
        for key, verbs in granted.items():
            allowed = {**EXPORT_RULES, **LEASE_RULES, **IDENTITY_RULES}
            assert verbs <= allowed.get(key, set()), key


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_agent_accepts_every_flag_the_chart_passes(name: str) -> None:
    """The rendered command line through the agent's own parser (member.settings)."""
    values = SCENARIOS[name]
    agent = agent_container(render(AGENT_CHART, values))
    settings = parse_args([str(a) for a in agent["args"]])
    assert settings.no_import is not import_enabled(values)
    assert settings.namespace == values.get("watchNamespaces", [])
    assert settings.cluster_id == values["clusterId"]


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_leader_election_iff_several_replicas(replicas: int) -> None:
    rendered = render(AGENT_CHART, {**BASE, "replicaCount": replicas})
    deployment = rendered.one("Deployment")
    assert deployment["spec"]["replicas"] == replicas
    agent = agent_container(rendered)
    elected = replicas > 1
    assert ("--leader-elect" in agent["args"]) is elected
    assert flag_values(agent, "--lease-namespace") == ([NAMESPACE] if elected else [])
    lease_roles = [
        r for r in rendered.of_kind("Role") if ("coordination.k8s.io", "leases") in rules_of(r)
    ]
    if elected:
        (role,) = lease_roles
        assert role["metadata"]["namespace"] == NAMESPACE
        assert rules_of(role) == LEASE_RULES
        binding = next(
            b
            for b in rendered.of_kind("RoleBinding")
            if b["roleRef"]["name"] == role["metadata"]["name"]
        )
        assert binding["metadata"]["namespace"] == NAMESPACE
    else:
        assert lease_roles == []
        # No Lease to keep two agents apart: the old pod must stop before the new starts.
        assert deployment["spec"]["strategy"]["type"] == "Recreate"


def test_leases_only_in_a_namespaced_role(scenario: tuple[str, Rendered]) -> None:
    rendered = scenario[1]
    for role in rendered.of_kind("ClusterRole"):
        assert all(g != "coordination.k8s.io" for g, _ in rules_of(role))
    for role in rendered.of_kind("Role"):
        if ("coordination.k8s.io", "leases") in rules_of(role):
            assert role["metadata"]["namespace"] == NAMESPACE


def test_program_flags_come_from_values() -> None:
    values = {
        **BASE,
        "denyNamespaces": ["kube-system", "kube-public", "secrets"],
        "agent": {"workers": 8, "heartbeatInterval": 20, "logFormat": "text"},
        "metrics": {"port": 9100},
    }
    agent = agent_container(render(AGENT_CHART, values))
    assert agent["command"] == ["mcsync-agent"]
    assert flag_values(agent, "--hub-url") == ["https://mcsync.example.com"]
    assert flag_values(agent, "--cluster-id") == ["east-1"]
    assert flag_values(agent, "--deny-namespace") == ["kube-system", "kube-public", "secrets"]
    assert flag_values(agent, "--namespace") == []
    assert flag_values(agent, "--workers") == ["8"]
    assert flag_values(agent, "--heartbeat-interval") == ["20"]
    assert flag_values(agent, "--log-format") == ["text"]
    assert flag_values(agent, "--metrics-port") == ["9100"]


def test_probes_and_metrics_on_the_metrics_port(scenario: tuple[str, Rendered]) -> None:
    rendered = scenario[1]
    agent = agent_container(rendered)
    (port,) = agent["ports"]
    assert port["name"] == "metrics"
    assert flag_values(agent, "--metrics-port") == [str(port["containerPort"])]
    assert agent["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert agent["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    service = rendered.one("Service")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_service_monitor_scrapes_agent_metrics() -> None:
    assert render(AGENT_CHART, BASE).of_kind("ServiceMonitor") == []
    rendered = render(AGENT_CHART, SCENARIOS["ha-existing-secret"])
    (endpoint,) = rendered.one("ServiceMonitor")["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")


def test_token_is_a_file_from_the_secret_never_a_literal(scenario: tuple[str, Rendered]) -> None:
    name, rendered = scenario
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    agent = container_named(pod, "agent")
    (token_file,) = flag_values(agent, "--token-file")
    mount = next(m for m in agent["volumeMounts"] if token_file.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    (item,) = volume["secret"]["items"]
    assert item["path"] == token_file.removeprefix(mount["mountPath"] + "/")
    # Owner root, group fsGroup (the agent's gid): readable by the agent and no one else.
    assert volume["secret"]["defaultMode"] == 0o440
    assert pod["securityContext"]["fsGroup"] == agent["securityContext"]["runAsGroup"]
    assert "env" not in agent or all("TOKEN" not in e["name"] for e in agent["env"])
    assert TOKEN not in rendered.manifest("Deployment")
    if name == "ha-existing-secret":
        assert volume["secret"]["secretName"] == "mcsync-member-token"
        assert item["key"] == "member"
        assert rendered.of_kind("Secret") == []
    else:
        secret = rendered.one("Secret", volume["secret"]["secretName"])
        assert secret["stringData"] == {item["key"]: TOKEN}


def test_a_rotated_token_reaches_the_running_agent(scenario: tuple[str, Rendered]) -> None:
    """The Secret is mounted as a directory, never with subPath: the kubelet updates a
    directory mount in place when the Secret changes (a subPath mount keeps the old
    file for the pod's life), and the agent reads the changed file without a restart
    (docs/reference.md#credentials)."""
    _, rendered = scenario
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    agent = container_named(pod, "agent")
    (token_file,) = flag_values(agent, "--token-file")
    mounts = [m for m in agent["volumeMounts"] if token_file.startswith(m["mountPath"] + "/")]
    assert len(mounts) == 1 and "subPath" not in mounts[0] and "subPathExpr" not in mounts[0]
    assert all("subPath" not in m for m in agent["volumeMounts"] if m["name"] == "token")
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[0]["name"])
    assert "secret" in volume
    # An existing Secret is the operator's to rotate: no checksum that would restart pods.
    annotations = rendered.one("Deployment")["spec"]["template"]["metadata"].get(
        "annotations", {}
    )
    if volume["secret"]["secretName"] == "mcsync-member-token":
        assert "checksum/token" not in annotations


def test_a_token_is_required() -> None:
    message = render_error(AGENT_CHART, {**BASE, "token": {"value": ""}})
    assert "token.existingSecret" in message and "token.value" in message


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"clusterId": "east-1", "token": {"value": TOKEN}}, "/hubUrl"),
        ({**BASE, "hubUrl": "mcsync.example.com"}, "/hubUrl"),
        ({**BASE, "hubUrl": "ftp://mcsync.example.com"}, "/hubUrl"),
        ({**BASE, "clusterId": "Bad_Name"}, "/clusterId"),
        ({**BASE, "clusterId": "x" * 64}, "/clusterId"),
        ({"hubUrl": "https://mcsync.example.com", "token": {"value": TOKEN}}, "/clusterId"),
        ({**BASE, "replicaCount": -1}, "/replicaCount"),
        ({**BASE, "replicaCount": 0}, "/replicaCount"),
        ({**BASE, "watchNamespaces": ["Shop"]}, "/watchNamespaces/0"),
        ({**BASE, "agent": {"workers": 0}}, "/agent/workers"),
        ({**BASE, "agent": {"logFormat": "xml"}}, "/agent/logFormat"),
        ({**BASE, "metrics": {"port": 80}}, "/metrics/port"),
        ({**BASE, "leaderElection": {"leaseDuration": 0}}, "/leaderElection/leaseDuration"),
        ({**BASE, "hubURL": "https://typo.example.com"}, "hubURL"),
    ],
)
def test_schema_rejects_bad_values_naming_the_field(values: dict[str, Any], field: str) -> None:
    message = render_error(AGENT_CHART, values)
    assert "schema" in message
    assert field in message


# sha256 of sigs.k8s.io/mcs-api v0.5.0 (commit ded161a) config/crd/ files, licence header
# included. The chart ships them byte for byte, so that other MCS installers (which compare
# the release-version and crd-schema-revision labels) recognise them; to upgrade, replace
# the files with a newer release's and these digests with theirs.
UPSTREAM_CRDS = {
    "serviceexports.yaml": "1ec6ffc8094c8f67434431737b9c1d5132e686f21577250a615ed1e30da67097",
    "serviceimports.yaml": "dfec64055b7a5dd47013706c26706ef20f7ae3319b0ae594f6353585cc052ec4",
}
UPSTREAM_LABELS = {
    "multicluster.x-k8s.io/release-version": "v0.5.0",
    "multicluster.x-k8s.io/crd-schema-revision": "0",
}


def shipped_crds() -> dict[str, dict[str, Any]]:
    return {crd["spec"]["names"]["kind"]: crd for crd in crds(AGENT_CHART)}


def test_both_crds_are_shipped_outside_templates() -> None:
    # crds/ is installed by Helm before templates and is never templated or deleted.
    rendered = render(AGENT_CHART, BASE)
    assert rendered.of_kind("CustomResourceDefinition") == []
    assert {c["metadata"]["name"] for c in shipped_crds().values()} == {
        "serviceexports.multicluster.x-k8s.io",
        SERVICEIMPORT_CRD,
    }


@pytest.mark.parametrize("filename", sorted(UPSTREAM_CRDS))
def test_crd_files_are_upstream_byte_for_byte(filename: str) -> None:
    data = (AGENT_CHART / "crds" / filename).read_bytes()
    assert hashlib.sha256(data).hexdigest() == UPSTREAM_CRDS[filename]


@pytest.mark.parametrize(
    ("kind", "plural", "short_names"),
    [
        ("ServiceExport", "serviceexports", ["svcex", "svcexport"]),
        ("ServiceImport", "serviceimports", ["svcim", "svcimport"]),
    ],
)
def test_crd_has_upstream_labels_serves_both_versions_and_stores_v1beta1(
    kind: str, plural: str, short_names: list[str]
) -> None:
    crd = shipped_crds()[kind]
    load_model(crd)
    assert crd["metadata"]["labels"] == UPSTREAM_LABELS
    spec = crd["spec"]
    assert spec["group"] == "multicluster.x-k8s.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["plural"] == plural
    assert spec["names"]["shortNames"] == short_names
    versions = {v["name"]: v for v in spec["versions"]}
    assert set(versions) == {"v1alpha1", "v1beta1"}
    assert all(v["served"] for v in versions.values())
    assert [n for n, v in versions.items() if v["storage"]] == ["v1beta1"]
    for version in versions.values():
        assert version["subresources"] == {"status": {}}
    # One schema for both versions: no conversion webhook needed.
    assert versions["v1alpha1"]["schema"] == versions["v1beta1"]["schema"]
    assert spec.get("conversion", {"strategy": "None"})["strategy"] == "None"


def test_serviceexport_schema_has_exported_maps_and_metav1_conditions() -> None:
    crd = shipped_crds()["ServiceExport"]
    schema = crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    for key in ("exportedLabels", "exportedAnnotations"):
        assert spec[key]["type"] == "object"
        assert spec[key]["additionalProperties"] == {"type": "string"}
    conditions = schema["properties"]["status"]["properties"]["conditions"]
    assert conditions["type"] == "array"
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert set(item["required"]) == {"type", "status", "reason", "message", "lastTransitionTime"}
    props = item["properties"]
    assert props["status"]["enum"] == ["True", "False", "Unknown"]
    assert props["observedGeneration"] == {
        "type": "integer",
        "format": "int64",
        "minimum": 0,
        "description": props["observedGeneration"]["description"],
    }
    assert props["lastTransitionTime"]["format"] == "date-time"


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_serviceimport_schema_keeps_every_field_the_agent_writes(version: str) -> None:
    """A field the schema lacks is pruned by the API server, and the agent would see a
    difference and rewrite the object on every reconcile: the shipped CRD must have every
    spec and status field the agent states (member.imports.importspec)."""
    imported = ServiceImport.model_validate(
        {
            "metadata": {"name": "web", "namespace": "demo"},
            "spec": {
                "type": "ClusterSetIP",
                "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
                "ipFamilies": ["IPv4"],
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 30}},
                "internalTrafficPolicy": "Local",
                "trafficDistribution": "PreferClose",
            },
            "status": {"clusters": [{"cluster": "east"}]},
        }
    )
    desired = desired_service_import(
        imported,
        api_version=f"multicluster.x-k8s.io/{version}",
        derived_service={"spec": {"clusterIPs": ["10.96.0.9"]}},
        optional_fields=OPTIONAL_IMPORT_FIELDS,
    )
    served = {v["name"]: v for v in shipped_crds()["ServiceImport"]["spec"]["versions"]}
    schema = served[version]["schema"]["openAPIV3Schema"]["properties"]
    assert set(desired["spec"]) <= set(schema["spec"]["properties"])
    assert set(desired["spec"]["ports"][0]) <= set(
        schema["spec"]["properties"]["ports"]["items"]["properties"]
    )
    status = desired_service_import_status(imported)
    assert set(status) <= set(schema["status"]["properties"])
    cluster_item = schema["status"]["properties"]["clusters"]["items"]["properties"]
    assert set(status["clusters"][0]) <= set(cluster_item)
    # kubectl get serviceimports shows the type and the ClusterSetIP (the quickstart's output).
    columns = [c["name"] for c in served[version]["additionalPrinterColumns"]]
    assert columns == ["Type", "IP", "Age"]


def test_release_name_does_not_leak_between_releases() -> None:
    rendered = render(AGENT_CHART, BASE)
    names = {o["metadata"]["name"] for o in rendered.objects}
    assert all(RELEASE in n for n in names)


def test_install_guide_matches_the_chart() -> None:
    values = install_doc_values("agent-values.yaml")
    rendered = render_as(AGENT_CHART, "mcsync-agent", "mcsync-system", values)
    guide = (REPO / "docs" / "install.md").read_text()
    deployment = rendered.one("Deployment")
    assert f"deploy/{deployment['metadata']['name']}" in guide
    pod = deployment["spec"]["template"]["spec"]
    token = next(v for v in pod["volumes"] if v["name"] == "token")["secret"]
    assert f"create secret generic {token['secretName']}" in guide
    assert f"--from-literal={token['items'][0]['key']}=" in guide
    agent = container_named(pod, "agent")
    assert "--leader-elect --lease-namespace=mcsync-system" in guide.replace("\n  ", " ")
    assert flag_values(agent, "--lease-namespace") == ["mcsync-system"]
    assert f"`{rendered.one('Service')['metadata']['name']}`" in guide
