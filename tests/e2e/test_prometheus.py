"""A real Prometheus (2.42, Debian's package) scraping a real hub and a real agent.

What an operator's monitoring relies on, checked with Prometheus's own tools rather than by
parsing our text: both /metrics pages pass `promtool check metrics` (names, units, help,
types); Prometheus scrapes both and loads the chart's alerting rules; every query of the
Grafana dashboard evaluates and, with the cluster picker set to the agent's cluster, the
agent panels have data (the join on `mcsync_agent_info`); and the first failed hub request of
an agent shows in `increase()` and sets the alert going — which needs the error counters to
exist at 0 before that first error (issue 16).

One hub (per back end), one emulated member cluster with its agent, one Prometheus scraping
every second and evaluating rules every second. Under CI a missing Prometheus fails.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from shared.metrics import EXPORT_DURATION_METRIC
from tests.conftest import BACKENDS, dispose_database_url, make_database_url
from tests.e2e.fleet import NAMESPACE, Member, new_member
from tests.helm.test_alert_rules import RULES, prometheus_binary
from tests.helm.test_dashboard import queries
from tests.kube.fixtures import FIXTURE_NAMESPACES, start_emulator_process
from tests.member import agent_support
from tests.member.agent_support import AgentProcess, HubProcess, free_port, wait_for
from tests.support.processes import spawn

CLUSTER = "west"
SCRAPE = "1s"


@dataclass
class Prometheus:
    """A Prometheus server process and its HTTP API."""

    process: subprocess.Popen[bytes]
    url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body = answer.json()
        assert answer.status_code == 200 and body["status"] == "success", (expr, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def get(self, path: str) -> Any:
        answer = httpx.get(f"{self.url}{path}", timeout=10)
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]


def start_prometheus(directory: Path, *, hub: HubProcess, agent_port: int) -> Prometheus:
    port = free_port()
    rules = directory / "mcsync-alerts.yaml"
    shutil.copy(RULES, rules)
    config = {
        "global": {"scrape_interval": SCRAPE, "evaluation_interval": SCRAPE},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {"job_name": "mcsync-hub", "static_configs": [{"targets": [f"127.0.0.1:{hub.port}"]}]},
            {"job_name": "mcsync-agent",
             "static_configs": [{"targets": [f"127.0.0.1:{agent_port}"]}]},
        ],
    }
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = (directory / "prometheus.log").open("ab")
    process = spawn(
        [prometheus_binary("prometheus"), f"--config.file={directory / 'prometheus.yml'}",
         f"--storage.tsdb.path={directory / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()
    server = Prometheus(process=process, url=f"http://127.0.0.1:{port}")

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"prometheus exited with {process.returncode}")
        try:
            return httpx.get(f"{server.url}/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(ready, what="prometheus /-/ready")
    return server


@dataclass
class Monitored:
    hub: HubProcess
    member: Member
    prometheus: Prometheus


@pytest.fixture(scope="module", params=BACKENDS)
def monitored(request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitored]:
    prometheus_binary("prometheus")
    directory = tmp_path_factory.mktemp(f"prometheus-{request.param}")
    database = make_database_url(str(request.param), directory)
    hub = HubProcess(directory=directory, database=database)
    emulator = start_emulator_process(directory, CLUSTER,
                                      namespaces=(*FIXTURE_NAMESPACES, NAMESPACE))
    prometheus: Prometheus | None = None
    member: Member | None = None
    try:
        hub.start()
        member = new_member(CLUSTER, directory=directory, hub=hub, emulator=emulator)
        member.agent.start()
        # One export, so the export-duration panels have a sample from this cluster.
        member.kube.create_service("web", ports=[{"name": "http", "port": 80}])
        member.kube.create_export("web")
        prometheus = start_prometheus(directory, hub=hub, agent_port=member.agent.metrics_port)
        yield Monitored(hub=hub, member=member, prometheus=prometheus)
    finally:
        if prometheus is not None:
            prometheus.process.terminate()
            prometheus.process.wait(20)
        if member is not None:
            member.agent.kill()
            member.kube.close()
        emulator.stop()
        hub.stop()
        agent_support.forget_logs()
        dispose_database_url(database)


def agent_url(agent: AgentProcess) -> str:
    return f"http://127.0.0.1:{agent.metrics_port}"


def metrics_page(url: str) -> str:
    answer = httpx.get(f"{url}/metrics", timeout=10)
    assert answer.status_code == 200
    return answer.text


# promtool's one complaint we keep on purpose: these histograms count milliseconds. SPEC §2.6
# fixes the export-duration name and unit (fleet-networking's, so its dashboards work), and
# the import lag uses the same buckets so the two compare on one axis (issue 15, SPEC §6).
MILLISECOND_HISTOGRAMS = {EXPORT_DURATION_METRIC, "mcsync_agent_import_lag_milliseconds"}


def test_both_metrics_pages_pass_promtool_lint(monitored: Monitored) -> None:
    for name, url in (("hub", monitored.hub.url), ("agent", agent_url(monitored.member.agent))):
        lint = subprocess.run([prometheus_binary("promtool"), "check", "metrics"],
                              input=metrics_page(url), capture_output=True, text=True,
                              timeout=60, check=False)
        problems = [line for line in (lint.stdout + lint.stderr).splitlines() if line and not (
            line.split()[0] in MILLISECOND_HISTOGRAMS
            and 'use base unit "seconds" instead of "milliseconds"' in line)]
        assert problems == [], name
        assert lint.returncode in (0, 3), lint.stderr  # 3: lint findings, 1: unparsable


def test_prometheus_scrapes_both_and_loads_every_alert(monitored: Monitored) -> None:
    prometheus = monitored.prometheus

    def both_up() -> bool:
        up = {r["metric"]["job"]: r["value"][1] for r in prometheus.query("up")}
        return up == {"mcsync-hub": "1", "mcsync-agent": "1"}

    wait_for(both_up, what="both targets up in Prometheus")
    groups = prometheus.get("/api/v1/rules")["groups"]
    loaded = {r["name"]: r["health"] for g in groups for r in g["rules"]}
    expected = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"]
                for r in g["rules"]}

    def evaluated() -> bool:
        groups = prometheus.get("/api/v1/rules")["groups"]
        return all(r["health"] == "ok" for g in groups for r in g["rules"])

    assert set(loaded) == expected
    wait_for(evaluated, what="every alert rule evaluated without error")


def dashboard_query(expr: str) -> str:
    """A dashboard query as Grafana sends it with the picker on our cluster."""
    return expr.replace("$cluster", CLUSTER).replace("$__rate_interval", "30s")


def test_every_dashboard_query_evaluates_and_agent_panels_follow_the_picker(
    monitored: Monitored,
) -> None:
    prometheus = monitored.prometheus
    member = monitored.member
    wait_for(lambda: member.condition("web", "Ready") is not None,
             what="the export of web reported back")
    # Agent panels join on mcsync_agent_info{cluster_id=~"$cluster"}: with the picker on our
    # cluster they have a series; on another cluster they have none.
    joined = [q for q in queries() if "mcsync_agent_info" in q]
    assert joined
    for expr in queries():
        prometheus.query(dashboard_query(expr))  # asserts it evaluates

    def agent_panels_have_data() -> list[str]:
        return [q for q in joined if not prometheus.query(dashboard_query(q))]

    wait_for(lambda: not agent_panels_have_data(),
             what="every agent panel has data for the picked cluster",
             timeout=agent_support.DEADLINE)
    other = [q.replace("$cluster", "no-such-cluster").replace("$__rate_interval", "30s")
             for q in joined]
    assert all(prometheus.query(q) == [] for q in other)
    # The export-duration panels filter on the origin cluster label directly.
    wait_for(lambda: prometheus.query(
        f'mcsync_service_export_duration_milliseconds_count{{origin_cluster_id="{CLUSTER}"}}'),
        what="the export-duration histogram scraped")


def agent_errors(agent: AgentProcess) -> float:
    """The agent's failed hub requests, summed over every series."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics_page(agent_url(agent)))
        for sample in family.samples
        if sample.name == "mcsync_agent_hub_request_errors_total"
    )


def test_first_failed_hub_request_shows_in_increase_and_sets_the_alert_going(
    monitored: Monitored,
) -> None:
    prometheus = monitored.prometheus
    agent = monitored.member.agent
    errors = "sum(mcsync_agent_hub_request_errors_total)"
    # The series exist before any error, at 0: that is what lets increase() see the first.
    wait_for(lambda: prometheus.query(errors), what="the error counters scraped at 0")
    assert float(prometheus.query(errors)[0]["value"][1]) == 0
    time.sleep(3)  # a few scrapes at 0 before the error
    monitored.hub.stop()
    try:
        wait_for(lambda: agent_errors(agent) > 0, what="the agent counted a failed hub request")
        wait_for(lambda: prometheus.query(
            "sum(increase(mcsync_agent_hub_request_errors_total[1m])) > 0"),
            what="increase() saw the first failed requests")
        alert = 'ALERTS{alertname="MCSyncAgentHubRequestErrors"}'
        found = wait_for(lambda: prometheus.query(alert), what="the alert pending or firing")
        assert found[0]["metric"]["cluster_id"] == CLUSTER
        assert found[0]["metric"]["alertstate"] in {"pending", "firing"}
    finally:
        monitored.hub.start()
