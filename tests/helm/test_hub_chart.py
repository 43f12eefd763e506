"""The mcsync-hub chart: what operators rely on when they `helm install` the hub.

Scenarios cover the shapes a real install takes: no values at all (a single-replica SQLite
hub on a volume, the embedded default), an external PostgreSQL given by URL, an HA install
with every secret pre-made (plus Ingress with TLS, a ServiceMonitor and the Grafana
dashboard ConfigMap), the bundled trial PostgreSQL, and SQLite configured explicitly.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helm.conftest import (
    HUB_CHART,
    REPO,
    Rendered,
    args_of,
    assert_hardened,
    assert_lint_clean,
    container_named,
    flag_values,
    install_doc_values,
    load_all,
    render,
    render_as,
    render_error,
)

PG_URL = "postgresql://mcsync:s3cretPassw0rd@db.example.com:5432/mcsync"
ADMIN = "admin-token-literal-0123456789"
READER = "reader-token-literal-0123456789"

SCENARIOS: dict[str, dict[str, Any]] = {
    "no-values": {},
    "external-url": {
        "database": {"url": PG_URL},
        "auth": {"adminToken": ADMIN, "readerToken": READER},
    },
    "ha-existing-secrets": {
        "replicaCount": 3,
        "database": {"existingSecret": "hub-db", "existingSecretKey": "url"},
        "auth": {
            "existingSecret": "hub-tokens",
            "adminTokenKey": "admin",
            "readerTokenKey": "reader",
        },
        "ingress": {
            "enabled": True,
            "className": "nginx",
            "hosts": [
                {"host": "mcsync.example.com", "paths": [{"path": "/", "pathType": "Prefix"}]}
            ],
            "tls": [{"secretName": "mcsync-tls", "hosts": ["mcsync.example.com"]}],
        },
        "metrics": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
            "grafanaDashboard": {"enabled": True},
            "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
        },
    },
    "bundled-postgres": {"postgresql": {"enabled": True, "auth": {"password": "Pgpass123"}}},
    "sqlite": {
        "database": {"type": "sqlite", "url": "sqlite:////data/mcsync.db"},
        "persistence": {"enabled": True},
    },
}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def scenario(request: pytest.FixtureRequest) -> tuple[str, Rendered]:
    return request.param, render(HUB_CHART, SCENARIOS[request.param])


def hub_pod(rendered: Rendered) -> dict[str, Any]:
    spec: dict[str, Any] = rendered.one("Deployment")["spec"]["template"]["spec"]
    return spec


def test_every_object_is_valid_kubernetes(scenario: tuple[str, Rendered]) -> None:
    load_all(scenario[1])


def test_every_container_is_hardened(scenario: tuple[str, Rendered]) -> None:
    assert_hardened(scenario[1])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_helm_lint_is_clean(name: str) -> None:
    assert_lint_clean(HUB_CHART, SCENARIOS[name])


def test_probes_hit_health_endpoints_on_the_serve_port(scenario: tuple[str, Rendered]) -> None:
    rendered = scenario[1]
    hub = container_named(hub_pod(rendered), "hub")
    assert hub["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert hub["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    (port,) = hub["ports"]
    assert port["name"] == "http"
    assert flag_values(hub, "--port") == [str(port["containerPort"])]
    service = rendered.one("Service", "mc-mcsync-hub")
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert (
        service["spec"]["selector"] == rendered.one("Deployment")["spec"]["selector"]["matchLabels"]
    )


def test_database_url_comes_from_a_secret_never_a_literal(scenario: tuple[str, Rendered]) -> None:
    name, rendered = scenario
    for obj in rendered.of_kind("Deployment") + rendered.of_kind("Job"):
        container = obj["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        ref = env["MCSYNC_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
        if name == "ha-existing-secrets":
            assert ref == {"name": "hub-db", "key": "url"}
        else:
            assert ref == {"name": "mc-mcsync-hub", "key": "database-url"}
            secret = rendered.one("Secret", "mc-mcsync-hub")
            assert "database-url" in secret["stringData"]
        assert "value" not in env["MCSYNC_DATABASE_URL"]
        text = rendered.manifest(obj["kind"], obj["metadata"]["name"])
        for literal in (PG_URL, ADMIN, READER, "Pgpass123"):
            assert literal not in text


def test_tokens_are_files_mounted_from_the_secret(scenario: tuple[str, Rendered]) -> None:
    name, rendered = scenario
    pod = hub_pod(rendered)
    hub = container_named(pod, "hub")
    (admin_file,) = flag_values(hub, "--admin-token-file")
    (reader_file,) = flag_values(hub, "--reader-token-file")
    mount = next(m for m in hub["volumeMounts"] if admin_file.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    # Files are root:fsGroup; only the group read bit lets the hub's gid read them.
    assert volume["secret"]["defaultMode"] == 0o440
    assert pod["securityContext"]["fsGroup"] == hub["securityContext"]["runAsGroup"]
    items = {i["path"]: i["key"] for i in volume["secret"]["items"]}
    relative = {f.removeprefix(mount["mountPath"] + "/") for f in (admin_file, reader_file)}
    assert relative == set(items)
    if name == "ha-existing-secrets":
        assert volume["secret"]["secretName"] == "hub-tokens"
        assert set(items.values()) == {"admin", "reader"}
        assert rendered.of_kind("Secret") == []
    else:
        assert volume["secret"]["secretName"] == "mc-mcsync-hub"
        data = rendered.one("Secret")["stringData"]
        assert set(items.values()) <= set(data)
    if name == "external-url":
        data = rendered.one("Secret")["stringData"]
        assert (data["admin-token"], data["reader-token"]) == (ADMIN, READER)


def test_generated_tokens_are_long_random_strings() -> None:
    rendered = render(HUB_CHART, {"database": {"url": PG_URL}})
    data = rendered.one("Secret")["stringData"]
    assert len(data["admin-token"]) >= 32 and len(data["reader-token"]) >= 32
    assert data["admin-token"] != data["reader-token"]


def test_migration_job_is_a_hook_and_the_deployment_skips_migrating() -> None:
    rendered = render(HUB_CHART, SCENARIOS["external-url"])
    job = rendered.one("Job", "mc-mcsync-hub-migrate")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert set(annotations["helm.sh/hook-delete-policy"].split(",")) == {
        "before-hook-creation",
        "hook-succeeded",
    }
    job_weight = int(annotations["helm.sh/hook-weight"])
    migrate = job["spec"]["template"]["spec"]["containers"][0]
    assert args_of(migrate) == ["mcsync-hub", "migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    # The Secret the Job reads must exist before it: an earlier hook.
    secret = rendered.one("Secret", "mc-mcsync-hub")["metadata"]["annotations"]
    assert "pre-install" in secret["helm.sh/hook"].split(",")
    assert int(secret["helm.sh/hook-weight"]) < job_weight
    hub = container_named(hub_pod(rendered), "hub")
    assert args_of(hub)[:2] == ["mcsync-hub", "serve"]
    assert "--no-migrate" in args_of(hub)


def test_migration_job_disabled_means_the_hub_migrates_at_start() -> None:
    rendered = render(
        HUB_CHART, {"database": {"url": PG_URL}, "migrations": {"job": {"enabled": False}}}
    )
    assert rendered.of_kind("Job") == []
    assert "--no-migrate" not in args_of(container_named(hub_pod(rendered), "hub"))
    assert "helm.sh/hook" not in rendered.one("Secret")["metadata"].get("annotations", {})


def test_bundled_postgres_migrates_after_it_exists() -> None:
    rendered = render(HUB_CHART, SCENARIOS["bundled-postgres"])
    statefulset = rendered.one("StatefulSet", "mc-mcsync-hub-postgresql")
    assert statefulset["spec"]["volumeClaimTemplates"]
    job = rendered.one("Job")
    # pre-install would run before the StatefulSet exists and never connect.
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,pre-upgrade"
    data = rendered.one("Secret")["stringData"]
    assert data["database-url"] == (
        "postgresql://mcsync:Pgpass123@mc-mcsync-hub-postgresql:5432/mcsync"
    )
    pg_env = {e["name"]: e for e in statefulset["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert pg_env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "postgres-password"
    rendered.one("Service", "mc-mcsync-hub-postgresql")


def test_no_bundled_postgres_by_default() -> None:
    rendered = render(HUB_CHART, SCENARIOS["external-url"])
    assert rendered.of_kind("StatefulSet") == []


@pytest.mark.parametrize("name", ["no-values", "sqlite"])
def test_sqlite_runs_one_replica_on_a_volume_and_migrates_itself(name: str) -> None:
    rendered = render(HUB_CHART, SCENARIOS[name])
    assert rendered.one("Secret")["stringData"]["database-url"] == "sqlite:////data/mcsync.db"
    deployment = rendered.one("Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert rendered.of_kind("Job") == []
    assert rendered.of_kind("PodDisruptionBudget") == []
    pod = hub_pod(rendered)
    hub = container_named(pod, "hub")
    assert "--no-migrate" not in args_of(hub)
    mount = next(m for m in hub["volumeMounts"] if m["mountPath"] == "/data")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    pvc = rendered.one("PersistentVolumeClaim")
    assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]


@pytest.mark.parametrize(("replicas", "expected"), [(1, False), (2, True), (3, True)])
def test_disruption_budget_only_with_several_replicas(replicas: int, expected: bool) -> None:
    rendered = render(HUB_CHART, {"replicaCount": replicas, "database": {"url": PG_URL}})
    assert rendered.one("Deployment")["spec"]["replicas"] == replicas
    budgets = rendered.of_kind("PodDisruptionBudget")
    assert bool(budgets) is expected
    if budgets:
        selector = rendered.one("Deployment")["spec"]["selector"]["matchLabels"]
        assert budgets[0]["spec"]["selector"]["matchLabels"] == selector
        assert budgets[0]["spec"]["minAvailable"] == 1


def test_service_monitor_scrapes_metrics_when_enabled() -> None:
    assert render(HUB_CHART, SCENARIOS["external-url"]).of_kind("ServiceMonitor") == []
    rendered = render(HUB_CHART, SCENARIOS["ha-existing-secrets"])
    monitor = rendered.one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    service = rendered.one("Service", "mc-mcsync-hub")
    assert "http" in {p["name"] for p in service["spec"]["ports"]}
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_ingress_with_tls_routes_to_the_hub_service() -> None:
    assert render(HUB_CHART, SCENARIOS["external-url"]).of_kind("Ingress") == []
    ingress = render(HUB_CHART, SCENARIOS["ha-existing-secrets"]).one("Ingress")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"secretName": "mcsync-tls", "hosts": ["mcsync.example.com"]}]
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == "mcsync.example.com"
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "mc-mcsync-hub", "port": {"name": "http"}}


def test_hub_pods_get_no_kubernetes_api_token() -> None:
    rendered = render(HUB_CHART, SCENARIOS["external-url"])
    assert hub_pod(rendered)["automountServiceAccountToken"] is False
    assert rendered.one("Job")["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"replicaCount": -1, "database": {"url": PG_URL}}, "/replicaCount"),
        ({"replicaCount": "3", "database": {"url": PG_URL}}, "/replicaCount"),
        (
            {
                "replicaCount": 3,
                "database": {"type": "sqlite", "url": "sqlite:////data/mcsync.db"},
                "persistence": {"enabled": True},
            },
            "/replicaCount",
        ),
        (
            {
                "database": {"type": "sqlite", "url": "sqlite:////data/mcsync.db"},
                "persistence": {"enabled": False},
            },
            "/persistence/enabled",
        ),
        ({"database": {"type": "mysql", "url": PG_URL}}, "/database/type"),
        ({"database": {"url": "mysql://db/x"}}, "/database/url"),
        ({"database": {"url": PG_URL}, "service": {"type": "External"}}, "/service/type"),
        ({"database": {"url": PG_URL}, "hub": {"logFormat": "xml"}}, "/hub/logFormat"),
        ({"database": {"url": PG_URL}, "hub": {"clusterTTL": 0}}, "/hub/clusterTTL"),
        ({"database": {"url": PG_URL}, "hub": {"clusterTTL": 2}}, "/hub/clusterTTL"),
        (
            {"database": {"url": PG_URL}, "hub": {"stalePanicFraction": 0}},
            "/hub/stalePanicFraction",
        ),
        (
            {"database": {"url": PG_URL}, "hub": {"stalePanicFraction": 1.5}},
            "/hub/stalePanicFraction",
        ),
        ({"database": {"url": PG_URL}, "containerPort": 70000}, "/containerPort"),
        ({"database": {"url": PG_URL}, "auth": {"adminToken": "short"}}, "/auth/adminToken"),
        ({"database": {"url": PG_URL}, "replica": 2}, "replica"),
        (
            {"database": {"url": PG_URL}, "ingress": {"enabled": True, "tls": [{"hosts": ["a"]}]}},
            "/ingress/tls/0",
        ),
    ],
)
def test_schema_rejects_bad_values_naming_the_field(values: dict[str, Any], field: str) -> None:
    message = render_error(HUB_CHART, values)
    assert "schema" in message
    assert field in message


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        (
            {"database": {"type": "postgresql"}},
            "database.url or database.existingSecret is required",
        ),
        ({"replicaCount": 2}, "replicaCount > 1 needs PostgreSQL"),
        (
            {"database": {"type": "postgresql", "url": "sqlite:////data/mcsync.db"}},
            "database.type=sqlite",
        ),
        (
            {
                "database": {"type": "sqlite", "url": "sqlite:///mcsync.db"},
                "persistence": {"enabled": True},
            },
            "persistence.mountPath",
        ),
        ({"database": {"url": PG_URL}, "postgresql": {"enabled": True}}, "postgresql.enabled"),
    ],
)
def test_templates_refuse_database_settings_that_cannot_work(
    values: dict[str, Any], needle: str
) -> None:
    assert needle in render_error(HUB_CHART, values)


def test_install_guide_matches_the_chart() -> None:
    values = install_doc_values("hub-values.yaml")
    rendered = render_as(HUB_CHART, "mcsync-hub", "mcsync", values)
    guide = (REPO / "docs" / "install.md").read_text()
    job = rendered.one("Job")["metadata"]["name"]
    assert f"job/{job}" in guide
    assert f"svc/{rendered.one('Service')['metadata']['name']}" in guide
    pod = hub_pod(rendered)
    ref = container_named(pod, "hub")["env"][0]["valueFrom"]["secretKeyRef"]
    assert f"create secret generic {ref['name']}" in guide
    assert f"--from-literal={ref['key']}=" in guide
    tokens = next(v for v in pod["volumes"] if v["name"] == "auth")["secret"]
    assert f"get secret {tokens['secretName']}" in guide
    assert "{.data.admin-token}" in guide
    assert {"admin-token", "reader-token"} == {i["key"] for i in tokens["items"]}
    assert len(rendered.of_kind("PodDisruptionBudget")) == 1


@pytest.mark.parametrize("name", ["no-values", "bundled-postgres"])
def test_notes_tell_the_next_steps_with_commands_that_work(name: str) -> None:
    """NOTES.txt: how to get the admin token, install the CLI and register a cluster — and
    every `mcsync` command in it parses with the CLI's own parser."""
    import shlex

    from cli.args import parse_args

    rendered = render(HUB_CHART, SCENARIOS[name])
    notes = next(text for path, text in rendered.text.items() if path.endswith("NOTES.txt"))
    secret = rendered.one("Secret", "mc-mcsync-hub")["metadata"]["name"]
    assert f"get secret {secret}" in notes and "{.data.admin-token}" in notes
    assert "pip install mcsync" in notes
    assert ("SQLite" in notes) is (name == "no-values")
    # The commands are the indented lines, as a reader copies them.
    commands = [line.strip() for line in notes.splitlines() if line.startswith("  mcsync ")]
    assert any(c.startswith("mcsync clusters register ") for c in commands), commands
    # The token file is read at parse time; any readable file stands in for it.
    environ = {
        "MCSYNC_HUB_URL": "http://127.0.0.1:8080",
        "MCSYNC_TOKEN_FILE": str(HUB_CHART / "Chart.yaml"),
    }
    for command in commands:
        parse_args(shlex.split(command)[1:], environ)
