"""Kubernetes objects of odd shapes never crash the agent (issue: hostile input, the
Kubernetes side). Each one ends with a condition on its ServiceExport that says why, or a
log line naming it, while a well-formed export beside them is exported as usual.

The emulated API server refuses what Kubernetes refuses (a port without a number, an
unknown protocol or Service type, a Service name that is not a DNS-1035 label), so those
never reach an agent; the shapes here are the ones a real API server accepts and a buggy
controller may well write: no ports, duplicate port names or numbers, no spec at all, a
ServiceExport with unknown fields, one whose name (a DNS-1123 subdomain, up to 253
characters) no Service can ever have.
A ServiceExport API version the agent does not know stops it at start with one line
naming the problem, exit code 2.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from shared import conditions as c
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    REPO_ROOT,
    AgentFactory,
    HubProcess,
    condition,
    conditions_of,
    service_body,
    service_export_body,
    wait_for,
)
from tests.member.test_agent_resilience import CLUSTER, exported
from tests.reliability.support import Figures, RecordProperty

pytestmark = [pytest.mark.e2e, pytest.mark.reliability]

LONG = "l" + "o" * 70 + "ng"  # 73 characters: a valid ServiceExport name, no Service's
DOTTED = "web.v2"  # a DNS-1123 subdomain: valid for a ServiceExport, never for a Service


def odd_services() -> dict[str, dict[str, Any]]:
    """name -> the Service (the ServiceExport beside it is well formed)."""
    no_spec = service_body("no-spec", "odd")
    del no_spec["spec"]
    return {
        "no-ports": service_body("no-ports", "odd", ports=[]),
        "dup-names": service_body(
            "dup-names", "odd", ports=[{"name": "http", "port": 80}, {"name": "http", "port": 81}]
        ),
        "dup-numbers": service_body(
            "dup-numbers", "odd", ports=[{"name": "a", "port": 80}, {"name": "b", "port": 80}]
        ),
        "no-spec": no_spec,
    }


def verdict(kube: KubeCluster, name: str) -> dict[str, Any] | None:
    """The ServiceExport once the agent has said something about it (Valid and Ready)."""
    obj = kube.state.get("serviceexports", "odd", name)
    conditions = conditions_of(obj)
    if c.VALID in conditions and c.READY in conditions and conditions[c.READY] != (
        c.FALSE, c.REASON_PENDING
    ):
        return obj
    return None


def test_odd_services_get_a_condition_never_a_crash(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory,
    record_property: RecordProperty,
) -> None:
    figures = Figures("odd Kubernetes shapes", record_property)
    state = kube_cluster.state
    odd = odd_services()
    for name, service in odd.items():
        state.create("services", "odd", service)
        state.create("serviceexports", "odd", service_export_body(name, "odd"))
    # A ServiceExport with no spec at all and unknown fields, beside a good Service.
    state.create("services", "odd", service_body("bare-export", "odd"))
    bare = service_export_body("bare-export", "odd")
    del bare["spec"]
    bare["unexpected"] = {"field": True}
    state.create("serviceexports", "odd", bare)
    for name in (LONG, DOTTED):  # no Service can be called this: NoService, in a sentence
        state.create("serviceexports", "odd", service_export_body(name, "odd"))
    state.create("services", "shop", service_body("fine", "shop"))
    state.create("serviceexports", "shop", service_export_body("fine", "shop"))

    agent = agent_factory("odd", kubeconfig=kube_cluster.kubeconfig, hub=hub_process,
                          cluster_id=CLUSTER, token=hub_process.register(CLUSTER))
    wait_for(lambda: exported(kube_cluster, "fine"), what="the well-formed export")
    outcomes: dict[str, str] = {}
    for name in [*odd, "bare-export", LONG, DOTTED]:
        obj = wait_for(lambda name=name: verdict(kube_cluster, name) or (  # type: ignore[misc]
            conditions_of(kube_cluster.state.get("serviceexports", "odd", name)).get(c.VALID)
            == (c.FALSE, c.REASON_NO_SERVICE)
            and kube_cluster.state.get("serviceexports", "odd", name)
        ), what=f"a verdict on odd/{name}")
        ready = condition(obj, c.READY) or {}
        valid = condition(obj, c.VALID) or {}
        outcomes[name[:20]] = f"Valid={valid.get('reason')} Ready={ready.get('reason')}"
        if ready.get("status") != c.TRUE:
            # Refused: the message says why in a sentence, not a stack trace.
            message = ready.get("message") or valid.get("message") or ""
            assert message and "Traceback" not in message, (name, obj["status"])
    figures["objects"] = len(outcomes)
    figures["outcomes"] = outcomes
    assert outcomes["dup-names"].endswith("Failed")
    assert outcomes["dup-numbers"].endswith("Failed")
    assert outcomes["bare-export"].endswith("Exported")
    assert outcomes[LONG[:20]].startswith("Valid=NoService")
    assert outcomes[DOTTED].startswith("Valid=NoService")
    assert agent.process is not None and agent.process.poll() is None  # never crashed
    assert "Traceback" not in agent.logs()
    figures.report()
    assert agent.stop() == 0


def test_unknown_serviceexport_api_version_is_one_line_and_exit_2(
    kube_cluster: KubeCluster, hub_process: HubProcess, tmp_path: Any,
) -> None:
    """No ServiceExport version the agent knows (v1beta1, v1alpha1) is served: the agent
    stops at start with one line saying so, not a traceback or a crash loop of retries."""
    from tests.member.test_kube_client import uninstall_serviceexport_crd

    kube = kube_cluster
    uninstall_serviceexport_crd(kube)
    token_file = tmp_path / "token"
    token_file.write_text(hub_process.register(CLUSTER))
    done = subprocess.run(
        [sys.executable, "-m", "member", "--hub-url", hub_process.url, "--cluster-id", CLUSTER,
         "--token-file", str(token_file), "--kubeconfig", str(kube.kubeconfig),
         "--metrics-port", "0"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "does not serve ServiceExports" in lines[0], lines[0]
