"""Benchmark: a scoped import watch re-opening from an old revision after the fleet's
changes.

    python -m bench.import_replay [--changes 20000] [--watches 20] [--backend postgresql|sqlite]
                                  [--smoke]

Every agent's import watch re-opens from its last resourceVersion when its timeout ends
(every 300-600 s), and all of a killed replica's agents re-open at once; meanwhile the
whole fleet has written. A cluster with `spec.importNamespaces` must pay for its scope's
changes, not the fleet's (docs/reference.md#fleet-scale). One hub process (PostgreSQL or
SQLite); `--watches` clusters with the import scope `SCOPE`; then `--changes` import-feed
changes in namespaces outside it (clusters syncing new exports, each a ServiceImport
ADDED, in 1,000 namespaces), then `INSIDE` changes in the scope, the last of which is a
marker Service. Each cluster re-opens its watch (`GET …/imports?watch=true&resourceVersion=R`):

* `from_before_fleet_changes`: from R before the fleet's changes (the replay must cross
  them all), one watch at a time, then all at once (`burst`: a killed replica's agents);
* `from_after_fleet_changes`: from R after them, before the scope's changes (the floor:
  the same events to send, no history of other namespaces to cross).

Per re-open: the time from the request to the marker's event (the replay's end; the
client looks for the marker's bytes and counts lines, nothing more) and the hub's CPU
(user + system from /proc/<pid>/stat, over all the re-opens of the phase, divided by
them), and the lines the client received (the events of the scope, and whatever BOOKMARKs
the replay sent). A burst's CPU per re-open and its wall time are reported the same way.

Target: a re-open from before the fleet's changes costs the hub less than twice the CPU of
one from after them (the scope's changes, not the fleet's).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from bench.slices import progress, watch_session
from bench.support import (
    HubProcess,
    base_parser,
    cpu_seconds,
    created_at,
    export_wire,
    fresh_database,
    machine,
    percentiles,
    write_result,
)

NAME = "import_replay"
# The watches' import scope: plain names and a glob (each read by its own index range).
SCOPE = ["team-1", "team-2", "shop-*"]
# The scope's changes, written after the fleet's: (namespace, Service), the last the marker.
INSIDE = [("team-1", "web"), ("team-2", "api"), ("shop-eu", "cart"), ("team-1", "zz-last")]
MARKER = b'"zz-last"'
FLEET_NAMESPACES = 1000
CHUNK = 2000  # exports per exporting cluster's sync (one body of a few MiB)
MAX_BODY = 64 * 1024 * 1024
WATCH_TIMEOUT = 600  # seconds: a re-open must end by its marker, not its deadline
TARGET_RATIO = 2.0


def _list_body(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "mcsync.io/v1alpha1",
        "kind": "InternalServiceExportList",
        "metadata": {},
        "items": items,
    }


async def _register(client: httpx.AsyncClient, hub: HubProcess, name: str, **spec: Any) -> str:
    body: dict[str, Any] = {"metadata": {"name": name}}
    if spec:
        body["spec"] = spec
    answer = await client.post(f"{hub.url}/api/v1/clusters", json=body, headers=hub.admin_headers())
    if answer.status_code != 201:
        raise RuntimeError(f"register {name}: {answer.status_code} {answer.text}")
    token: str = answer.json()["token"]
    return token


async def _revision(client: httpx.AsyncClient, hub: HubProcess, cluster: str, token: str) -> int:
    answer = await client.get(
        f"{hub.url}/api/v1/clusters/{cluster}/imports?limit=1",
        headers={"Authorization": f"Bearer {token}"},
    )
    answer.raise_for_status()
    return int(answer.json()["metadata"]["resourceVersion"])


async def _fleet_changes(client: httpx.AsyncClient, hub: HubProcess, changes: int) -> None:
    """`changes` new exports outside the scope, CHUNK per exporting cluster: each one
    ServiceImport ADDED in the import feed."""
    for first in range(0, changes, CHUNK):
        cluster = f"fleet-{first // CHUNK}"
        token = await _register(client, hub, cluster)
        items = [
            export_wire(cluster, f"fleet-{i % FLEET_NAMESPACES}", f"svc-{i}", created=created_at(i))
            for i in range(first, min(changes, first + CHUNK))
        ]
        answer = await client.put(
            f"{hub.url}/api/v1/clusters/{cluster}/serviceexports",
            json=_list_body(items),
            headers={"Authorization": f"Bearer {token}"},
        )
        if answer.status_code != 200:
            raise RuntimeError(f"sync {cluster}: {answer.status_code} {answer.text[:300]}")


async def _scope_changes(client: httpx.AsyncClient, hub: HubProcess) -> None:
    token = await _register(client, hub, "scope-src")
    for index, (namespace, name) in enumerate(INSIDE):
        body = export_wire("scope-src", namespace, name, created=created_at(index))
        answer = await client.put(
            f"{hub.url}/api/v1/clusters/scope-src/serviceexports/{namespace}/{name}",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        if answer.status_code not in (200, 201):
            raise RuntimeError(f"PUT {namespace}/{name}: {answer.status_code} {answer.text}")


async def _reopen(
    session: aiohttp.ClientSession, url: str, cluster: str, token: str, start: int
) -> tuple[float, int]:
    """One re-open from `start`: seconds from the request to the marker's event, and the
    lines received until then."""
    path = (
        f"{url}/api/v1/clusters/{cluster}/imports?watch=true&resourceVersion={start}"
        f"&timeoutSeconds={WATCH_TIMEOUT}"
    )
    sent = time.perf_counter()
    async with session.get(path, headers={"Authorization": f"Bearer {token}"}) as answer:
        if answer.status != 200:
            raise RuntimeError(f"watch {cluster}: {answer.status} {await answer.text()}")
        lines = 0
        async for line in answer.content:
            lines += 1
            if MARKER in line and b'"BOOKMARK"' not in line:
                return time.perf_counter() - sent, lines
    raise RuntimeError(f"watch {cluster} ended before the marker")


async def _phase(
    session: aiohttp.ClientSession,
    hub: HubProcess,
    tokens: dict[str, str],
    start: int,
    *,
    burst: bool,
) -> dict[str, Any]:
    clusters = sorted(tokens)
    cpu0 = cpu_seconds(hub.pid)
    wall0 = time.perf_counter()
    if burst:
        results = await asyncio.gather(
            *(_reopen(session, hub.url, c, tokens[c], start) for c in clusters)
        )
    else:
        results = [await _reopen(session, hub.url, c, tokens[c], start) for c in clusters]
    wall = time.perf_counter() - wall0
    cpu = cpu_seconds(hub.pid) - cpu0
    lines = {n for _, n in results}
    return {
        "reopens": len(results),
        "request_to_replay_end": percentiles([s for s, _ in results]),
        "hub_cpu_ms_per_reopen": round(cpu / len(results) * 1000, 2),
        "lines_per_reopen": sorted(lines),
        "wall_seconds": round(wall, 2),
    }


async def run(args: Any) -> dict[str, Any]:
    async with fresh_database(args.backend) as url:
        with tempfile.TemporaryDirectory(prefix="mcsync-bench-") as tmp:
            hub = HubProcess(url, Path(tmp), extra_args=["--max-body-bytes", str(MAX_BODY)])
            with hub:
                async with httpx.AsyncClient(timeout=600) as client:
                    tokens = {
                        f"scoped-{i}": await _register(
                            client, hub, f"scoped-{i}", importNamespaces=SCOPE
                        )
                        for i in range(args.watches)
                    }
                    first = next(iter(tokens))
                    before = await _revision(client, hub, first, tokens[first])
                    t0 = time.perf_counter()
                    await _fleet_changes(client, hub, args.changes)
                    filled = time.perf_counter() - t0
                    after = await _revision(client, hub, first, tokens[first])
                    await _scope_changes(client, hub)
                    end = await _revision(client, hub, first, tokens[first])
                progress(NAME, f"{args.changes} changes outside the scope in {filled:.1f}s")
                async with watch_session() as session:
                    # Warm both paths (the first request of a kind pays imports, plans).
                    await _reopen(session, hub.url, first, tokens[first], before)
                    await _reopen(session, hub.url, first, tokens[first], after)
                    load_before = machine()["load_average"]
                    crossing = await _phase(session, hub, tokens, before, burst=False)
                    floor = await _phase(session, hub, tokens, after, burst=False)
                    burst = await _phase(session, hub, tokens, before, burst=True)
                    load_after = machine()["load_average"]
    ratio = (
        crossing["hub_cpu_ms_per_reopen"] / floor["hub_cpu_ms_per_reopen"]
        if floor["hub_cpu_ms_per_reopen"]
        else None
    )
    return {
        "changes_outside_scope": args.changes,
        "changes_inside_scope": len(INSIDE),
        "watches": args.watches,
        "scope": SCOPE,
        "revisions": {"before": before, "after_fleet_changes": after, "end": end},
        "fill_seconds": round(filled, 1),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "from_before_fleet_changes": crossing,
        "from_after_fleet_changes": floor,
        "burst_from_before_fleet_changes": burst,
        "cpu_ratio_before_to_after": round(ratio, 2) if ratio is not None else None,
        "target": {
            "cpu_ratio_before_to_after_below": TARGET_RATIO,
            "met": ratio is not None and ratio < TARGET_RATIO,
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20_000)
    parser.add_argument("--watches", type=int, default=20)
    args = parser.parse_args()
    if args.smoke:
        args.changes, args.watches = 300, 2
    write_result(NAME, args, asyncio.run(run(args)))


if __name__ == "__main__":
    main()
