"""`mcsync status`: what it finds needs attention (one row per finding), its page, and the
command against a real hub process (exit 1 while a cluster is Pending and a service in
conflict). The all-well exit 0 against real processes is in tests/e2e/test_sandbox.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cli.status import Fleet, findings, report
from shared.constants import CONDITION_WITHDRAWAL_HELD
from shared.models import (
    Condition,
    Identity,
    MemberCluster,
    ServiceImport,
    Status,
    VersionInfo,
)
from tests.cli.conftest import RunningHub, run_cli
from tests.cli.samples import NOW, ago, cluster, service_import
from tests.cli.test_cli_e2e import BASE, put_export

READY = Status(status="Success", code=200, reason="OK",
               message="database reachable (writable), schema at head")
VERSION = VersionInfo(hub_version="0.3.0", min_agent_version="0.2.0")


def held(name: str) -> MemberCluster:
    one = cluster(name, heartbeat=ago(seconds=5), agent_version="0.3.0")
    one.status.conditions = [Condition(
        type=CONDITION_WITHDRAWAL_HELD, status="True", reason="MassWithdrawal",
        message="a repair would withdraw 12 of 20 exports", last_transition_time=ago(minutes=1))]
    return one


def fleet(clusters: list[MemberCluster], *, imports: list[ServiceImport] | None = None,
          readiness: Status = READY) -> Fleet:
    return Fleet(hub_url="http://hub:8080", version=VERSION, identity=Identity(role="reader"),
                 readiness=readiness, clusters=clusters, imports=imports or [])


def well(name: str) -> MemberCluster:
    return cluster(name, heartbeat=ago(seconds=5), agent_version="0.3.0")


def with_invalid(name: str, count: int) -> MemberCluster:
    one = well(name)
    one.status.invalid_export_count = count
    return one


@pytest.mark.parametrize(("case", "expected"), [
    (fleet([well("east"), well("west")], imports=[service_import()]), []),
    (fleet([well("east"), cluster("west", state="Stale", heartbeat=ago(minutes=3),
                                  agent_version="0.3.0")]),
     ["cluster west is Stale (no heartbeat for 3m): is its agent running and can it reach "
      "the hub? (its log says why)"]),
    (fleet([cluster("south", state="Pending", created=ago(minutes=5), agent_version=None)]),
     ["cluster south is Pending: registered 5m ago, never heartbeated: start its agent "
      "(mcsync-agent --cluster-id south with the token file from `mcsync clusters "
      "register`)"]),
    (fleet([held("east")]),
     ["cluster east holds a withdrawal: a repair would withdraw 12 of 20 exports; restore "
      "its ServiceExports, or let it through once with `mcsync clusters allow-withdrawal "
      "east`"]),
    (fleet([cluster("old", heartbeat=ago(seconds=5), agent_version="0.1.0")]),
     ["cluster old runs agent 0.1.0, older than the hub's minimum 0.2.0: it does not export "
      "until it is upgraded"]),
    (fleet([well("east")], imports=[service_import(name="cart", conflicts=["PortConflict"],
                                                   winner="east")]),
     ["service demo/cart is in conflict (PortConflict; winner east): `mcsync describe "
      "conflict demo/cart` shows what to change"]),
    (fleet([well("east")], readiness=Status(code=503, reason="ServiceUnavailable",
                                            message="no writable primary")),
     ["the hub's database is not ready: no writable primary"]),
    (fleet([well("east"), *(cluster(n, state="Stale", heartbeat=ago(minutes=3),
                                    agent_version="0.3.0") for n in ("north", "west"))]),
     [f"cluster {n} is Stale (no heartbeat for 3m): is its agent running and can it reach "
      "the hub? (its log says why)" for n in ("north", "west")]
     + ["2 of the 3 clusters that have heartbeated are Stale and none has its endpoints "
        "withdrawn: the hub is most likely past its panic threshold (--stale-panic-fraction, "
        "default 0.5) and withholds withdrawals, suspecting its own network "
        "(docs/reference.md#failover): "
        "check the hub's connectivity first"]),
    (fleet([with_invalid("east", 3), with_invalid("west", 1)]),
     ["cluster east has 3 ServiceExports it cannot export (Valid=False): `mcsync exports "
      "--invalid` says why, and what to fix in the member cluster",
      "cluster west has 1 ServiceExport it cannot export (Valid=False): `mcsync exports "
      "--invalid` says why, and what to fix in the member cluster"]),
], ids=["all-well", "stale", "pending", "held", "old-agent", "conflict", "database", "panic",
        "invalid-exports"])
def test_findings(case: Fleet, expected: list[str]) -> None:
    assert findings(case, now=NOW) == expected


def test_many_conflicts_are_named_up_to_ten_then_counted() -> None:
    imports = [service_import(name=f"s{i:02}", conflicts=["TypeConflict"]) for i in range(13)]
    found = findings(fleet([well("east")], imports=imports), now=NOW)
    assert len(found) == 11
    assert found[-1] == "... and 3 more services in conflict: `mcsync conflicts` lists them all"


def test_the_page_counts_the_fleet() -> None:
    east = cluster("east", heartbeat=ago(seconds=5), exports=3, conflicts=1, imports=(2, 6),
                   agent_version="0.3.0")
    west = cluster("west", state="Stale", heartbeat=ago(minutes=2), agent_version="0.3.0")
    west.status.endpoints_withdrawn = True
    page, found = report(fleet([east, west], imports=[
        service_import(), service_import(name="cart", conflicts=["PortConflict"])]), now=NOW)
    assert page.splitlines()[:7] == [
        "Hub:        http://hub:8080 (version 0.3.0, API mcsync.io/v1alpha1, agents from "
        "0.2.0)",
        "Token:      reader",
        "Database:   database reachable (writable), schema at head",
        "Clusters:   2 registered: 1 Ready, 1 Stale, 0 Pending",
        "Exports:    3 from 1 clusters, 1 in conflict, 0 invalid",
        "Conflicts:  1 services",
        "Imports:    2 services (held per cluster: east 2)",
    ]
    assert "Needs attention (2):" in page
    assert "its endpoints are withdrawn from every importing cluster" in found[0]
    page, found = report(fleet([well("east")]), now=NOW)
    assert found == [] and page.endswith(
        "All well: every cluster Ready, nothing held, no conflict.\n")


@pytest.mark.e2e
def test_status_against_a_hub_exits_1_and_names_what_needs_attention(
        hub: RunningHub) -> None:
    tokens = {}
    for name in ("s-east", "s-west"):
        answer = hub.call("POST", "/api/v1/clusters", token=hub.admin_token,
                          body={"metadata": {"name": name}})
        assert answer.status_code == 201, answer.text
        tokens[name] = answer.json()["token"]
    beat = hub.call("POST", "/api/v1/clusters/s-east/heartbeat", token=tokens["s-east"],
                    body={"agentVersion": "0.1.0", "invalidExports": {"total": 2, "items": [
                        {"namespace": "st", "name": "gone", "reason": "NoService",
                         "message": "no Service st/gone"}]}})
    assert beat.status_code == 200, beat.text
    put_export(hub, tokens["s-east"], "s-east", "st", "web", port=80, created=BASE)
    put_export(hub, tokens["s-west"], "s-west", "st", "web", port=81,
               created=BASE + timedelta(hours=1))
    done = run_cli("status", env={"MCSYNC_HUB_URL": hub.url, "MCSYNC_TOKEN": hub.reader_token})
    assert done.returncode == 1, done.stderr
    assert "Token:      reader" in done.stdout
    assert "Database:   database reachable" in done.stdout
    assert "cluster s-west is Pending" in done.stdout
    # The hub counts what the agent reported, the ones it did not list too.
    assert "cluster s-east has 2 ServiceExports it cannot export (Valid=False)" in done.stdout
    assert ", 2 invalid" in done.stdout
    assert "service st/web is in conflict (PortConflict; winner s-east)" in done.stdout
    admin = run_cli("status", env={"MCSYNC_HUB_URL": hub.url, "MCSYNC_TOKEN": hub.admin_token})
    assert "Token:      admin" in admin.stdout
    refused = run_cli("status", "-o", "json", env={"MCSYNC_HUB_URL": hub.url})
    assert refused.returncode == 2 and "argument -o/--output" in refused.stderr
