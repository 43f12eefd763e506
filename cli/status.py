"""`mcsync status`: the fleet at a glance, and whether anything needs attention.

What `cilium clustermesh status` is to a mesh (docs/reference.md#cli): the hub (URL, version), the
token's role, the database (`/readyz`'s own words), the clusters by state, exports,
conflicts and imports — then one line per thing an operator must look at, each saying
what to do: a Stale or Pending cluster, a held mass withdrawal (docs/reference.md#failover),
ServiceExports a member cannot export (`Valid=False`), an agent older than the hub accepts, a
conflict, a database that is not ready. Exit code 0 when there is
none of these, 1 when there is (so a script or a cron job can alert on it).

The data is a fixed handful of requests whatever the size of the fleet: version, whoami,
readyz, the clusters (whose status carries export and conflict counts), and the imports
listing (paged). `gather` fetches, `findings` judges and `report` writes, so the last two
are tested with plain objects.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from packaging.version import InvalidVersion, Version

from cli import render
from cli.client import HubClient
from cli.commands import Context
from shared.constants import CONDITION_WITHDRAWAL_HELD
from shared.models import Identity, MemberCluster, ServiceImport, Status, VersionInfo

MAX_NAMED_CONFLICTS = 10
STATES: tuple[Literal["Ready", "Stale", "Pending"], ...] = ("Ready", "Stale", "Pending")


@dataclass(frozen=True)
class Fleet:
    """What the hub said, as fetched by `gather`."""

    hub_url: str
    version: VersionInfo
    identity: Identity | None
    readiness: Status
    clusters: list[MemberCluster]
    imports: list[ServiceImport]


def gather(client: HubClient, *, page_size: int) -> Fleet:
    return Fleet(
        hub_url=client.base_url,
        version=client.version(),
        identity=client.whoami(),
        readiness=client.readiness(),
        clusters=client.list_clusters().items,
        imports=client.list_imports(page_size=page_size).items,
    )


def _held(cluster: MemberCluster) -> str | None:
    """The message of the cluster's `WithdrawalHeld` condition, when it is True."""
    for condition in cluster.status.conditions:
        if condition.type == CONDITION_WITHDRAWAL_HELD and condition.status == "True":
            return condition.message or condition.reason
    return None


def _too_old(agent: str | None, minimum: str) -> bool:
    try:
        return agent is not None and Version(agent) < Version(minimum)
    except InvalidVersion:
        return False


def findings(fleet: Fleet, *, now: datetime) -> list[str]:
    """One line per thing that needs attention, each saying what to do; empty: all well."""
    found: list[str] = []
    if fleet.readiness.code != 200:
        found.append(f"the hub's database is not ready: {fleet.readiness.message}")
    for cluster in fleet.clusters:
        name, status = cluster.metadata.name, cluster.status
        if status.state == "Stale":
            since = (f"no heartbeat for {render.age(status.last_heartbeat_time, now=now)}"
                     if status.last_heartbeat_time else "no heartbeat")
            withdrawn = ("; its endpoints are withdrawn from every importing cluster"
                         if status.endpoints_withdrawn else "")
            found.append(f"cluster {name} is Stale ({since}){withdrawn}: is its agent "
                         "running and can it reach the hub? (its log says why)")
        elif status.state == "Pending":
            found.append(f"cluster {name} is Pending: registered "
                         f"{render.age(cluster.metadata.creation_timestamp, now=now)} ago, "
                         f"never heartbeated: start its agent (mcsync-agent --cluster-id "
                         f"{name} with the token file from `mcsync clusters register`)")
        held = _held(cluster)
        if held is not None:
            found.append(f"cluster {name} holds a withdrawal: {held}; restore its "
                         f"ServiceExports, or let it through once with `mcsync clusters "
                         f"allow-withdrawal {name}`")
        if status.invalid_export_count:
            count = status.invalid_export_count
            found.append(f"cluster {name} has {count} ServiceExport{'s' if count > 1 else ''} "
                         "it cannot export (Valid=False): `mcsync exports --invalid` says "
                         "why, and what to fix in the member cluster")
        if _too_old(status.agent_version, fleet.version.min_agent_version):
            found.append(f"cluster {name} runs agent {status.agent_version}, older than the "
                         f"hub's minimum {fleet.version.min_agent_version}: it does not "
                         "export until it is upgraded")
    found += _panic(fleet.clusters)
    conflicting = [i for i in fleet.imports if i.status.conflicts]
    for item in conflicting[:MAX_NAMED_CONFLICTS]:
        key = f"{item.metadata.namespace}/{item.metadata.name}"
        found.append(f"service {key} is in conflict ({', '.join(item.status.conflicts)}; "
                     f"winner {render.or_none(item.status.winning_cluster)}): "
                     f"`mcsync describe conflict {key}` shows what to change")
    if len(conflicting) > MAX_NAMED_CONFLICTS:
        found.append(f"... and {len(conflicting) - MAX_NAMED_CONFLICTS} more services in "
                     "conflict: `mcsync conflicts` lists them all")
    return found


def _fields(pairs: list[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in pairs) + 1
    return [f"{(label + ':').ljust(width)}  {value}" for label, value in pairs]


def _panic(clusters: list[MemberCluster]) -> list[str]:
    """docs/reference.md#failover's panic threshold as far as the CLI can see it: most clusters that
    ever heartbeated are Stale and none has its endpoints withdrawn. The hub's threshold is its
    own setting, so this says what is seen and what it most likely means."""
    heard = [c for c in clusters if c.status.last_heartbeat_time is not None]
    stale = [c for c in heard if c.status.state == "Stale"]
    if not heard or len(stale) * 2 <= len(heard):
        return []
    if any(c.status.endpoints_withdrawn for c in stale):
        return []
    return [f"{len(stale)} of the {len(heard)} clusters that have heartbeated are Stale and "
            "none has its endpoints withdrawn: the hub is most likely past its panic "
            "threshold (--stale-panic-fraction, default 0.5) and withholds withdrawals, "
            "suspecting its own network (docs/reference.md#failover): check the hub's connectivity "
            "first"]


def _role(identity: Identity | None) -> str:
    if identity is None:
        return "unknown (this hub has no /api/v1/whoami)"
    if identity.role == "member":
        return f"member of cluster {identity.cluster}"
    return identity.role


def report(fleet: Fleet, *, now: datetime) -> tuple[str, list[str]]:
    """The status page and its findings (what needs attention)."""
    clusters = fleet.clusters
    states = Counter(c.status.state for c in clusters)
    by_state = ", ".join(f"{states[s]} {s}" for s in STATES)
    exports = sum(c.status.export_count for c in clusters)
    exporting = sum(1 for c in clusters if c.status.export_count)
    in_conflict = sum(c.status.conflict_count for c in clusters)
    invalid = sum(c.status.invalid_export_count for c in clusters)
    conflicting = sum(1 for i in fleet.imports if i.status.conflicts)
    importing = [f"{c.metadata.name} {c.status.imported_services}" for c in clusters
                 if c.status.imported_services is not None]
    version = fleet.version
    lines = _fields([
        ("Hub", f"{fleet.hub_url} (version {version.hub_version}, API "
                f"{version.api_version}, agents from {version.min_agent_version})"),
        ("Token", _role(fleet.identity)),
        ("Database", fleet.readiness.message),
        ("Clusters", f"{len(clusters)} registered: {by_state}"),
        ("Exports", f"{exports} from {exporting} clusters, {in_conflict} in conflict, "
                    f"{invalid} invalid"),
        ("Conflicts", f"{conflicting} services"),
        ("Imports", f"{len(fleet.imports)} services"
                    + (f" (held per cluster: {', '.join(importing)})" if importing else "")),
    ])
    found = findings(fleet, now=now)
    if found:
        lines += ["", f"Needs attention ({len(found)}):", *(f"  - {line}" for line in found)]
    else:
        lines += ["", "All well: every cluster Ready, nothing held, no conflict."]
    return "\n".join(lines) + "\n", found


def status(ctx: Context) -> int:
    """`mcsync status`: 0 when all is well, 1 when something needs attention."""
    fleet = gather(ctx.client, page_size=ctx.options.page_size)
    page, found = report(fleet, now=ctx.now())
    ctx.out.write(page)
    return 1 if found else 0
