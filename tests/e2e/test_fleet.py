"""The whole loop as an operator runs it: hub, three member clusters, agents, `mcsync`.

Every scenario asserts on the three things people read: the ServiceExport status (and
Events) in the member clusters, the hub's REST answers, and the CLI's output. The fleet
(`tests/e2e/fleet.py`) is shared by the scenarios of one back end; each works on Services
of its own in namespace `shop` and restarts what it stops, so each also runs alone (`-k`).
Clusters are `west`, `north` and `east`; exports are created in that order, a second apart
where the winner matters, so the oldest (`west`) is last in alphabetical order and a
tie-break by cluster id could not pass for precedence by age.

Deadlines are generous polls (`wait_for`, 60 s); nothing asserts on timing.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared import conditions as c
from shared.constants import (
    LABEL_ENDPOINTSLICE_MANAGED_BY,
    LABEL_MCS_SERVICE_NAME,
    LABEL_MCS_SOURCE_CLUSTER,
    LABEL_SERVICE_NAME,
    MCS_GROUP,
)
from tests.cli.conftest import ok, table
from tests.e2e.fleet import CLUSTERS, NAMESPACE, Fleet, Member, next_second
from tests.member.agent_support import wait_for

pytestmark = pytest.mark.e2e

HTTP_80 = [{"name": "http", "port": 80}]
HTTP_8080 = [{"name": "http", "port": 8080}]
CLEAN = {
    c.VALID: (c.TRUE, c.REASON_VALID),
    c.CONFLICT: (c.FALSE, c.NO_CONFLICTS),
    c.READY: (c.TRUE, c.REASON_EXPORTED),
}


def conflict(member: Member, service: str) -> tuple[str, str] | None:
    return member.conditions(service).get(c.CONFLICT)


def wait_conflict(members: list[Member], service: str, expected: tuple[str, str]) -> None:
    for member in members:
        wait_for(lambda m=member: conflict(m, service) == expected,  # type: ignore[misc]
                 what=f"Conflict={expected[0]}/{expected[1]} on {member.name}'s {service}")


def wait_clean(members: list[Member], service: str) -> None:
    for member in members:
        wait_for(lambda m=member: m.conditions(service) == CLEAN,  # type: ignore[misc]
                 what=f"{member.name}'s {service} exported without conflict")


def event_count(member: Member, service: str, reason: str) -> int:
    return sum(int(e.get("count") or 1) for e in member.kube.events(service)
               if e.get("reason") == reason)


def import_of(fleet: Fleet, service: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = fleet.read(f"/api/v1/serviceimports/{NAMESPACE}/{service}")
    return found


def rows_named(stdout: str, service: str) -> list[dict[str, str]]:
    return [row for row in table(stdout) if row["NAME"] == service]


def clusters_of(cell: str) -> set[str]:
    return set(cell.split(","))


def test_identical_exports_from_three_clusters_make_one_clean_import(fleet: Fleet) -> None:
    fleet.export(("api", {"ports": HTTP_80}), order=CLUSTERS, stagger=False)
    members = list(fleet.members.values())
    wait_clean(members, "api")

    imported = import_of(fleet, "api")
    assert imported is not None
    assert sorted(cl["cluster"] for cl in imported["status"]["clusters"]) == sorted(CLUSTERS)
    assert imported["status"]["conflicts"] == []
    assert [(p["name"], p["port"]) for p in imported["spec"]["ports"]] == [("http", 80)]
    assert fleet.read("/api/v1/serviceexports", namespace=NAMESPACE, name="api",
                      conflict="true")["items"] == []

    (row,) = rows_named(ok(fleet.cli("imports", "-n", NAMESPACE)), "api")
    assert clusters_of(row["CLUSTERS"]) == set(CLUSTERS)
    assert row["CONFLICTS"] == "<none>" and row["PORTS"] == "80/TCP"
    exports = table(ok(fleet.cli("exports", "-n", NAMESPACE, "--name", "api")))
    assert {r["CLUSTER"]: (r["CONFLICT"], r["REASON"]) for r in exports} == {
        name: ("False", "NoConflicts") for name in CLUSTERS
    }
    assert rows_named(ok(fleet.cli("conflicts")), "api") == []


def test_newer_cluster_brings_port_then_type_conflict_and_fixing_clears_it(
    fleet: Fleet,
) -> None:
    west, north, east = (fleet[name] for name in CLUSTERS)
    members = [west, north, east]
    fleet.export(("web", {"ports": HTTP_80}), order=CLUSTERS)
    wait_clean(members, "web")

    # The newest export moves its port: same name, another number.
    east.kube.patch_service("web", {"spec": {"ports": HTTP_8080}})
    wait_conflict(members, "web", (c.TRUE, c.PORT_CONFLICT))
    for member in members:
        wait_for(lambda m=member: event_count(m, "web", c.EVENT_CONFLICT_FOUND) > 0,  # type: ignore[misc]
                 what=f"a Warning {c.EVENT_CONFLICT_FOUND} Event in {member.name}")
        message = member.condition("web", c.CONFLICT)["message"]  # type: ignore[index]
        assert "west wins as the oldest export" in message, message
    assert all(e["type"] == c.EVENT_TYPE_WARNING for e in east.kube.events("web")
               if e["reason"] == c.EVENT_CONFLICT_FOUND)

    # Then a headless Service (clusterIP is immutable: recreated, as a team would do it).
    east.kube.delete_service("web")
    east.kube.create_service("web", ports=HTTP_8080, headless=True)
    both = f"{c.PORT_CONFLICT},{c.TYPE_CONFLICT}"
    wait_conflict(members, "web", (c.TRUE, both))

    listed = fleet.read("/api/v1/serviceexports", namespace=NAMESPACE, name="web",
                        conflict="true")["items"]
    assert sorted(e["spec"]["serviceReference"]["clusterId"] for e in listed) == sorted(CLUSTERS)
    imported = import_of(fleet, "web")
    assert imported is not None
    assert imported["status"]["conflicts"] == [c.PORT_CONFLICT, c.TYPE_CONFLICT]
    assert imported["status"]["winningCluster"] == "west"
    assert imported["spec"]["type"] == "ClusterSetIP"  # the winner's
    assert [p["port"] for p in imported["spec"]["ports"]] == [80]
    east_message = east.condition("web", c.CONFLICT)["message"]  # type: ignore[index]
    assert "overridden" in east_message, east_message

    (row,) = rows_named(ok(fleet.cli("conflicts", "-n", NAMESPACE)), "web")
    assert row["WINNER"] == "west" and row["REASONS"] == both
    assert clusters_of(row["LOSING-CLUSTERS"]) == {"north", "east"}
    exports = {r["CLUSTER"]: r for r in rows_named(
        ok(fleet.cli("exports", "-n", NAMESPACE, "--conflict", "true")), "web")}
    assert set(exports) == set(CLUSTERS)
    assert {r["REASON"] for r in exports.values()} == {both}
    assert exports["east"]["TYPE"] == "Headless" and exports["east"]["PORTS"] == "8080/TCP"

    # The team fixes east's Service: the conflict clears in every cluster, with Events.
    normal_before = {m.name: event_count(m, "web", c.EVENT_NO_CONFLICT_FOUND) for m in members}
    east.kube.delete_service("web")
    east.kube.create_service("web", ports=HTTP_80)
    wait_clean(members, "web")
    for member in members:
        wait_for(
            lambda m=member: event_count(m, "web", c.EVENT_NO_CONFLICT_FOUND)  # type: ignore[misc]
            > normal_before[m.name],
            what=f"a Normal {c.EVENT_NO_CONFLICT_FOUND} Event in {member.name} after the fix",
        )
    assert (import_of(fleet, "web") or {})["status"]["conflicts"] == []
    assert rows_named(ok(fleet.cli("conflicts")), "web") == []


def test_winner_unexports_and_the_next_oldest_wins(fleet: Fleet) -> None:
    west, north, east = (fleet[name] for name in CLUSTERS)
    fleet.export(("cart", {"ports": HTTP_80}), order=("west",))
    next_second()
    fleet.export(("cart", {"ports": HTTP_8080}), order=("north", "east"))
    wait_conflict([west, north, east], "cart", (c.TRUE, c.PORT_CONFLICT))
    (row,) = rows_named(ok(fleet.cli("conflicts")), "cart")
    assert row["WINNER"] == "west" and clusters_of(row["LOSING-CLUSTERS"]) == {"north", "east"}

    west.kube.delete_export("cart")
    wait_for(lambda: west.kube.export("cart") is None,
             what="west's ServiceExport gone (finalizer removed once the hub confirmed)")
    assert fleet.hub.export("west", NAMESPACE, "cart") is None
    # North's export is now the oldest; north and east agree, so both verdicts flip.
    wait_conflict([north, east], "cart", (c.FALSE, c.NO_CONFLICTS))
    for member in (north, east):
        message = member.condition("cart", c.CONFLICT)["message"]  # type: ignore[index]
        assert "north's export is the oldest" in message, message

    imported = import_of(fleet, "cart")
    assert imported is not None
    assert imported["status"]["winningCluster"] == "north"
    assert sorted(cl["cluster"] for cl in imported["status"]["clusters"]) == ["east", "north"]
    assert [p["port"] for p in imported["spec"]["ports"]] == [8080]
    assert rows_named(ok(fleet.cli("conflicts")), "cart") == []
    detail = ok(fleet.cli("get", "import", f"{NAMESPACE}/cart"))
    assert any(line.split() == ["Winning", "cluster:", "north"] for line in detail.splitlines())


def test_agent_killed_mid_change_loses_nothing_and_counts_nothing_twice(fleet: Fleet) -> None:
    north = fleet["north"]
    fleet.export(("orders", {"ports": HTTP_80}), order=("north",))
    wait_clean([north], "orders")
    # Precondition: every data point of north's current exports is taken
    # (docs/reference.md#export-path).
    for name in north.kube.export_names():
        wait_for(lambda n=name: fleet.observed("north", n),  # type: ignore[misc]
                 what=f"north's {name} observed")

    # Mid-change: a spec change and a new export, and the agent dies at once (kill -9).
    changed = north.kube.patch_service(
        "orders", {"spec": {"ports": [*HTTP_80, {"name": "grpc", "port": 9090}]}})
    ledger = north.kube.create_service("ledger", ports=HTTP_80)
    north.kube.create_export("ledger")
    north.agent.kill()
    versions = {"orders": changed["metadata"]["resourceVersion"],
                "ledger": ledger["metadata"]["resourceVersion"]}
    # What the dead process already observed is on the hub; the rest is the new one's. A
    # request it sent just before it died may still be in the hub's hands: read once the
    # hub's records of north stopped changing.
    fleet.wait_quiet("north")
    expected = sum(
        not fleet.observed("north", name, resource_version=rv) for name, rv in versions.items()
    )

    north.agent.start()
    wait_clean([north], "ledger")
    wait_clean([north], "orders")
    wait_for(lambda: [p["port"] for p in (fleet.hub.export("north", NAMESPACE, "orders")
                                          or {"spec": {"ports": []}})["spec"]["ports"]]
             == [80, 9090], what="orders' new ports on the hub")
    for name, rv in versions.items():
        wait_for(lambda n=name, v=rv: fleet.observed("north", n, resource_version=v),  # type: ignore[misc]
                 what=f"{name}'s new version observed")
    names = north.kube.export_names()
    wait_for(lambda: north.agent.settled(reconciles=len(names)),
             what="the restarted agent reconciled every key")
    wait_for(lambda: north.histogram_count() >= expected,
             what=f"{expected} data point(s) in the restarted agent")
    # No lost export: the hub holds exactly north's ServiceExports.
    on_hub = sorted(e["metadata"]["name"] for e in fleet.hub.exports("north"))
    assert on_hub == sorted(names)
    # Settled, every key reconciled again: nothing the dead process counted is counted twice.
    assert north.histogram_count() == expected, north.agent.logs()[-4000:]
    listed = {r["NAME"]: r for r in table(ok(fleet.cli("exports", "--cluster", "north")))}
    assert set(listed) == set(names)
    assert listed["orders"]["PORTS"] == "80/TCP,9090/TCP"


def test_hub_restart_agents_reconnect_and_converge(fleet: Fleet) -> None:
    west, north = fleet["west"], fleet["north"]
    fleet.hub.stop()
    # Work goes on in the clusters while the hub is down.
    west.kube.create_service("pay", ports=HTTP_80)
    west.kube.create_export("pay")
    wait_for(lambda: west.conditions("pay").get(c.READY) == (c.FALSE, c.REASON_PENDING),
             what="west's pay waiting for the hub (Ready=False/Pending)")

    fleet.hub.start()
    wait_clean([west], "pay")
    # The agents' feeds reconnected: a change after the restart reaches the other cluster.
    next_second()
    north.kube.create_service("pay", ports=HTTP_8080)
    north.kube.create_export("pay")
    wait_conflict([west, north], "pay", (c.TRUE, c.PORT_CONFLICT))
    wait_for(lambda: all(cl["status"]["state"] == "Ready"
                         for cl in fleet.read("/api/v1/clusters")["items"]),
             what="every cluster Ready again")
    rows = {r["NAME"]: r for r in table(ok(fleet.cli("clusters")))}
    assert {name: r["STATE"] for name, r in rows.items()} == {n: "Ready" for n in CLUSTERS}
    assert int(rows["west"]["CONFLICTS"]) >= 1


def test_stopped_agent_makes_its_cluster_stale_not_forgotten(fleet: Fleet) -> None:
    east = fleet["east"]
    fleet.export(("inventory", {"ports": HTTP_80}), order=("east",))
    wait_clean([east], "inventory")
    exported = sorted(e["metadata"]["name"] for e in fleet.hub.exports("east"))
    assert east.agent.stop() == 0  # SIGTERM: a graceful exit

    wait_for(lambda: fleet.read("/api/v1/clusters/east")["status"]["state"] == "Stale",
             what="east Stale after the TTL")
    rows = {r["NAME"]: r for r in table(ok(fleet.cli("clusters")))}
    assert rows["east"]["STATE"] == "Stale"
    # Stale, not deleted: the exports stay, and queries say their cluster is stale.
    listed = fleet.read("/api/v1/serviceexports", cluster="east")["items"]
    assert sorted(e["metadata"]["name"] for e in listed) == exported
    assert {e["status"]["clusterState"] for e in listed} == {"Stale"}
    wide = table(ok(fleet.cli("exports", "--cluster", "east", "-o", "wide")))
    assert {r["CLUSTER-STATE"] for r in wide} == {"Stale"}
    states = {cl["cluster"]: cl["state"] for cl in (import_of(fleet, "inventory") or {})
              ["status"]["clusters"]}
    assert states == {"east": "Stale"}
    # In the cluster nothing changed: a stopped agent leaves its last verdict in place.
    assert east.conditions("inventory") == CLEAN

    east.agent.start()
    wait_for(lambda: fleet.read("/api/v1/clusters/east")["status"]["state"] == "Ready",
             what="east Ready once its agent is back")
    rows = {r["NAME"]: r for r in table(ok(fleet.cli("clusters")))}
    assert rows["east"]["STATE"] == "Ready"


# --- docs/reference.md#failover: a lost cluster stops receiving traffic, and gets it back
# -----------------

SLICES = f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"


def create_slice(member: Member, service: str, address: str) -> None:
    """The Service's EndpointSlice, as kube-controller-manager writes it for one ready pod."""
    member.kube.create(SLICES, {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-{member.name}", "labels": {
            LABEL_SERVICE_NAME: service,
            LABEL_ENDPOINTSLICE_MANAGED_BY: "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address],
                       "conditions": {"ready": True, "serving": True, "terminating": False}}],
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
    })


def serving_sources(member: Member, service: str) -> set[str]:
    """The source clusters of the ready endpoints mirrored for `service` in `member`."""
    return {
        eps["metadata"]["labels"][LABEL_MCS_SOURCE_CLUSTER]
        for eps in member.kube.items(SLICES)
        if (eps["metadata"].get("labels") or {}).get(LABEL_MCS_SERVICE_NAME) == service
        and any((e.get("conditions") or {}).get("ready") for e in eps.get("endpoints") or [])
    }


def test_a_lost_clusters_endpoints_leave_every_cluster_and_return_with_it(fleet: Fleet) -> None:
    """North lost: its endpoints leave; west lost too (a panic): they come back; west
    back: north's leave again; north back: they return."""
    west, north, east = fleet["west"], fleet["north"], fleet["east"]
    fleet.export(("checkout", {"ports": HTTP_80}), order=("west", "north"), stagger=False)
    fleet.export(("receipts", {"ports": HTTP_80}), order=("north",), stagger=False)
    create_slice(west, "checkout", "10.1.0.10")
    create_slice(north, "checkout", "10.2.0.10")
    create_slice(north, "receipts", "10.2.0.11")
    importers = (west, east)
    for member in importers:
        wait_for(lambda m=member: serving_sources(m, "checkout") == {"west", "north"},  # type: ignore[misc]
                 what=f"checkout's endpoints of west and north mirrored in {member.name}")
    wait_for(lambda: serving_sources(east, "receipts") == {"north"},
             what="receipts' endpoints of north mirrored in east")
    imported = east.kube.read(f"/apis/{MCS_GROUP}/v1beta1/namespaces/{NAMESPACE}"
                              "/serviceimports/checkout")
    assert imported is not None

    north.agent.kill()  # its heartbeats stop: after the TTL the hub calls north Stale
    for member in importers:
        wait_for(lambda m=member: serving_sources(m, "checkout") == {"west"},  # type: ignore[misc]
                 what=f"north's checkout endpoints gone from {member.name}")
    # Fail open: north alone serves receipts, so its endpoints stay everywhere.
    assert serving_sources(east, "receipts") == {"north"}
    # Only the endpoints go: the ServiceImport is not rewritten, the export records stay.
    after = east.kube.read(f"/apis/{MCS_GROUP}/v1beta1/namespaces/{NAMESPACE}"
                           "/serviceimports/checkout")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == imported["metadata"]["resourceVersion"]
    assert {e["metadata"]["name"] for e in fleet.hub.exports("north")} >= {"checkout",
                                                                            "receipts"}
    cluster = fleet.read("/api/v1/clusters/north")
    assert (cluster["status"]["state"], cluster["status"]["endpointsWithdrawn"]) == (
        "Stale", True)
    rows = {r["NAME"]: r for r in table(ok(fleet.cli("clusters")))}
    assert rows["north"]["STATE"] == "Stale,EndpointsWithdrawn"

    # West lost too: two of three clusters Stale is more than --stale-panic-fraction (0.5).
    # The hub suspects itself, withdraws nothing and gives north's endpoints back.
    west.agent.kill()
    wait_for(lambda: serving_sources(east, "checkout") == {"west", "north"},
             what="the panic gives north's checkout endpoints back to east")
    wait_for(lambda: fleet.read("/api/v1/clusters/west")["status"]["state"] == "Stale",
             what="west Stale")
    assert serving_sources(east, "checkout") == {"west", "north"}
    assert fleet.read("/api/v1/clusters/north")["status"]["endpointsWithdrawn"] is False
    west.agent.start()
    # West back: one of three Stale, no panic; north is withdrawn again.
    wait_for(lambda: serving_sources(east, "checkout") == {"west"},
             what="north's checkout endpoints withdrawn again once the panic ends")

    north.agent.start()  # its first heartbeat gives them back
    for member in importers:
        wait_for(lambda m=member: serving_sources(m, "checkout") == {"west", "north"},  # type: ignore[misc]
                 what=f"north's checkout endpoints back in {member.name}")
    assert fleet.read("/api/v1/clusters/north")["status"]["endpointsWithdrawn"] is False
