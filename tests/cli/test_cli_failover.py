"""What the CLI shows and does of docs/reference.md#failover: `mcsync clusters` qualifies a
cluster's state with `EndpointsWithdrawn` / `WithdrawalHeld`, `describe cluster` shows its
conditions, and `mcsync clusters allow-withdrawal NAME` lets a held mass withdrawal through once —
against a real hub process for the command, with an unknown cluster refused by name."""

from __future__ import annotations

import pytest

from cli import render
from cli.args import UsageError, parse_args
from cli.cmd import clusters
from shared.models import Condition
from tests.cli.conftest import RunningHub, ok, run_cli, table
from tests.cli.samples import NOW, ago, cluster

HELD = Condition(
    type="WithdrawalHeld",
    status="True",
    reason="MassWithdrawal",
    message="the agent holds a repair that would withdraw 12 of the cluster's 20 exports",
    last_transition_time=ago(minutes=3),
)


@pytest.mark.parametrize(
    ("state", "withdrawn", "conditions", "shown"),
    [
        ("Ready", False, [], "Ready"),
        ("Stale", True, [], "Stale,EndpointsWithdrawn"),
        # Fail open or a panic: Stale, yet still served.
        ("Stale", False, [], "Stale"),
        ("Ready", False, [HELD], "Ready,WithdrawalHeld"),
    ],
)
def test_the_state_column_says_what_failover_does(
    state: str, withdrawn: bool, conditions: list[Condition], shown: str
) -> None:
    item = cluster("east", state=state, heartbeat=ago(seconds=5))
    item.status.endpoints_withdrawn = withdrawn
    item.status.conditions = conditions
    (row,) = clusters.table([item], now=NOW).rows
    assert row[1] == shown


def test_describe_cluster_shows_the_hold_and_the_withdrawal() -> None:
    item = cluster("east", state="Stale", heartbeat=ago(minutes=5))
    plain = render.describe_cluster(item, now=NOW)
    assert "Endpoints:" in plain and "served" in plain
    assert plain.splitlines()[-1].split() == ["Conditions:", "<none>"]
    item.status.endpoints_withdrawn = True
    item.status.conditions = [HELD]
    page = render.describe_cluster(item, now=NOW)
    assert "withdrawn: the fleet sends it no traffic until its next heartbeat" in page
    lines = page.splitlines()
    conditions = lines.index("Conditions:")
    assert lines[conditions + 1].split()[:4] == ["TYPE", "STATUS", "REASON", "AGE"]
    assert lines[conditions + 2].split()[:4] == ["WithdrawalHeld", "True", "MassWithdrawal", "3m"]
    assert "would withdraw 12 of the cluster's 20 exports" in lines[conditions + 2]


def test_allow_withdrawal_parses_and_needs_a_name() -> None:
    options = parse_args(["clusters", "allow-withdrawal", "east"], environ={})
    assert (options.command, options.name) == ("clusters allow-withdrawal", "east")
    with pytest.raises(UsageError, match="NAME"):
        parse_args(["clusters", "allow-withdrawal"], environ={})
    with pytest.raises(UsageError, match="Not_A_Name"):
        parse_args(["clusters", "allow-withdrawal", "Not_A_Name"], environ={})


def test_allow_withdrawal_against_a_real_hub(hub: RunningHub) -> None:
    env = {"MCSYNC_HUB_URL": hub.url, "MCSYNC_TOKEN": hub.admin_token}
    registered = hub.call(
        "POST", "/api/v1/clusters", token=hub.admin_token, body={"metadata": {"name": "held"}}
    )
    assert registered.status_code == 201, registered.text
    member = registered.json()["token"]
    hold = {"wouldWithdraw": 12, "exports": 20, "since": "2026-11-28T04:00:00Z"}
    beat = hub.call(
        "POST",
        "/api/v1/clusters/held/heartbeat",
        token=member,
        body={"agentVersion": "0.1.0", "withdrawalHeld": hold},
    )
    assert beat.status_code == 200, beat.text

    rows = {row["NAME"]: row for row in table(ok(run_cli("clusters", env=env)))}
    assert rows["held"]["STATE"] == "Ready,WithdrawalHeld"
    page = ok(run_cli("describe", "cluster", "held", env=env))
    assert "mcsync clusters allow-withdrawal held" in page

    allowed = ok(run_cli("clusters", "allow-withdrawal", "held", env=env))
    assert allowed == (
        "cluster/held: its held withdrawal goes through at the agent's next heartbeat, once\n"
    )
    # Shown while armed.
    rows = {row["NAME"]: row for row in table(ok(run_cli("clusters", env=env)))}
    assert rows["held"]["STATE"] == "Ready,WithdrawalHeld,WithdrawalAllowed"
    assert "an admin allowed it" in ok(run_cli("describe", "cluster", "held", env=env))
    answer = hub.call(
        "POST",
        "/api/v1/clusters/held/heartbeat",
        token=member,
        body={"agentVersion": "0.1.0", "withdrawalHeld": hold},
    )
    assert answer.json()["withdrawalAllowed"] is True
    rows = {row["NAME"]: row for row in table(ok(run_cli("clusters", env=env)))}
    assert rows["held"]["STATE"] == "Ready,WithdrawalHeld"  # used: no longer armed

    # Nothing held: nothing to allow.
    cleared = {"agentVersion": "0.1.0"}
    hub.call("POST", "/api/v1/clusters/held/heartbeat", token=member, body=cleared)
    refused = run_cli("clusters", "allow-withdrawal", "held", env=env)
    assert refused.returncode == 1
    assert "holds no mass withdrawal" in refused.stderr

    unknown = run_cli("clusters", "allow-withdrawal", "nowhere", env=env)
    assert unknown.returncode == 1
    assert unknown.stderr == "error: cluster 'nowhere' is not registered\n"
    reader = run_cli(
        "clusters", "allow-withdrawal", "held", env={**env, "MCSYNC_TOKEN": hub.reader_token}
    )
    assert (reader.returncode, reader.stderr) == (
        1,
        "error: only the admin may do this; the caller is the reader; give the admin token "
        "with --token-file (or --token), MCSYNC_TOKEN_FILE (or MCSYNC_TOKEN) or the "
        "token-file of the config file's context: a hub started without one wrote it to its "
        "admin token file (mcsync-admin-token beside its SQLite database, unless "
        "--admin-token-file or MCSYNC_ADMIN_TOKEN set it)\n",
    )
