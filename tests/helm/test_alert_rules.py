"""mcsync's alerting rules (helm/mcsync-hub/rules/mcsync-alerts.yaml), checked by Prometheus's
own tools: `promtool check rules` parses every expression and template, `promtool test rules`
runs the unit tests beside the file (one case per outcome an operator relies on: the first
failed request fires, a replica that leads clears "no leader", conflicts counted by every
hub replica are one alert). The chart ships the same groups, verbatim, as a PrometheusRule.

promtool is Debian's `prometheus` package; scripts/test installs it. Under CI a missing
promtool fails these tests instead of skipping them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helm.conftest import HUB_CHART, render
from tests.helm.test_hub_chart import SCENARIOS

RULES = HUB_CHART / "rules" / "mcsync-alerts.yaml"
RULE_TESTS = HUB_CHART / "rules" / "mcsync-alerts.test.yaml"


def prometheus_binary(name: str) -> str:
    """The path of `prometheus` or `promtool`; skips the test where it is missing, fails
    under CI (which installs it)."""
    found = shutil.which(name)
    if found is None:
        message = f"{name} is not installed (Debian package prometheus; scripts/test installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([prometheus_binary("promtool"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def test_rules_parse() -> None:
    answer = run_promtool("check", "rules", RULES.name, cwd=RULES.parent)
    assert answer.returncode == 0, answer.stdout + answer.stderr
    groups = yaml.safe_load(RULES.read_text())["groups"]
    alerts = [r for g in groups for r in g["rules"]]
    assert len(alerts) >= 10
    for alert in alerts:  # every alert says how bad it is and what to do
        assert alert["labels"]["severity"] in {"critical", "warning", "info"}, alert["alert"]
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]


def test_rule_unit_tests_pass() -> None:
    answer = run_promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "SUCCESS" in answer.stdout


def test_every_alert_has_a_unit_test() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    alerts = {r["alert"] for g in groups for r in g["rules"]}
    tested = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    }
    # Three alerts on plain gauges are covered by the live test (tests/e2e/test_prometheus.py)
    # loading them; every alert on a rate, a join or a histogram has a unit test here.
    untested = alerts - tested - {
        "MCSyncAgentVersionUnsupported", "MCSyncServiceImportsUnmanaged",
        "MCSyncHubWatchesTooSlow",
    }
    assert untested == set()


def test_chart_ships_the_same_rules_as_a_prometheus_rule() -> None:
    assert render(HUB_CHART, SCENARIOS["external-url"]).of_kind("PrometheusRule") == []
    rule = render(HUB_CHART, SCENARIOS["ha-existing-secrets"]).one("PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "prom"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
