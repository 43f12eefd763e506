"""Benchmark 8: the cost of one slice write as the EndpointSliceExport table grows.

    python -m bench.slice_growth [--sizes 1000,1000000] [--writes 1000] [--smoke]

docs/reference.md#import-path and `hub.store.endpointslices` promise a few indexed statements per
slice written, whatever the number stored. For each size N this benchmark starts a hub process
on a fresh PostgreSQL database, registers 50 clusters that export 200 Services each (10,000
exports, through the sync API, the same at every size), then fills `endpoint_slices` with N
slices of 10 endpoints, spread over those exports, with one `INSERT … SELECT
generate_series` from a template row the hub itself wrote through `PUT` (so the stored
JSON is exactly the hub's), then `VACUUM ANALYZE` and `CHECKPOINT` (a long-lived table's
steady state, as `bench.growth` explains). The history (`changes`) is not filled: the hub
keeps at most `history_limit` rows of it (100,000 by default), whatever N.

Then `--writes` PUTs of existing slices, one at a time over HTTP (the cost of a write, not
the queue in front of it), each moving a pod IP (a real change: a revision, a change row
cut to the served ports): their latency, and the hub's CPU per PUT from /proc/<pid>/stat.
A warm-up of 100 PUTs runs first at every size.

Headline: p99 latency and CPU per PUT at the largest size over the smallest.
Target: at most 1.5.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.slices import SHARING, Fleet, cluster_name, moved, progress, slice_wire
from bench.support import (
    HubProcess,
    asyncpg_url,
    base_parser,
    cpu_seconds,
    fresh_database,
    machine,
    percentiles,
    ratio,
    write_result,
)

NAME = "slice_growth"
TARGET_RATIO = 1.5
CLUSTERS = 50
SERVICES = 200
ENDPOINTS = 10


def target_of(fleet: Fleet, k: int) -> tuple[int, str, str, str]:
    """(cluster, namespace, Service, slice name) of bulk row `k` (the SQL below, in Python)."""
    cluster = k % fleet.clusters
    slot = (k // fleet.clusters) % fleet.services
    ns, svc = fleet.key(cluster, slot)
    return cluster, ns, svc, f"{svc}-{k}"


async def bulk_load(url: str, fleet: Fleet, hub: HubProcess, size: int) -> dict[str, Any]:
    """Fill `endpoint_slices` with `size` rows shaped like the template the hub wrote."""
    import asyncpg

    ns, svc = fleet.key(0, 0)
    template_body = fleet.slice(0, 0)
    async with aiohttp.ClientSession() as session:
        path = f"/api/v1/clusters/{cluster_name(0)}/endpointslices/{ns}/{svc}-template"
        template_body["metadata"]["name"] = f"{svc}-template"
        async with session.put(hub.url + path, json=template_body, headers=fleet.headers(0)) as a:
            if a.status != 201:
                raise RuntimeError(f"template PUT: {a.status} {await a.text()}")
    conn = await asyncpg.connect(asyncpg_url(url))
    try:
        spec = await conn.fetchval("SELECT spec FROM endpoint_slices")
        cluster_token = f'"clusterId":"{cluster_name(0)}"'
        service_token = f'"serviceName":"{svc}"'
        if cluster_token not in spec or service_token not in spec:
            raise RuntimeError(f"unexpected stored spec form: {spec[:200]}")
        await conn.execute("DELETE FROM endpoint_slices")
        revision = await conn.fetchval("SELECT value FROM revision")
        c, s = fleet.clusters, fleet.services  # Fleet.key in SQL: (i * s / SHARING + j) % keys
        key_sql = f"((k % {c}) * {s} / {SHARING} + (k / {c}) % {s}) % {fleet.keys}"
        started = time.perf_counter()
        await conn.execute(
            "INSERT INTO endpoint_slices (cluster_id, namespace, name, service_name, spec, "
            "resource_version, created_at) "
            f"SELECT 'member-' || (k % {fleet.clusters}), 'ns-' || ({key_sql} % 100), "
            f"'svc-' || {key_sql} || '-' || k, 'svc-' || {key_sql}, "
            'replace(replace($1::text, $2::text, \'"clusterId":"member-\' || '
            f"(k % {fleet.clusters}) || '\"'), $3::text, '\"serviceName\":\"svc-' || "
            f"{key_sql} || '\"'), $4::bigint, now() "
            f"FROM generate_series(0, {size - 1}) AS k",
            spec,
            cluster_token,
            service_token,
            revision,
        )
        seconds = time.perf_counter() - started
        await conn.execute("VACUUM ANALYZE")
        await conn.execute("CHECKPOINT")
        count = await conn.fetchval("SELECT count(*) FROM endpoint_slices")
        table_bytes = await conn.fetchval("SELECT pg_total_relation_size('endpoint_slices')")
    finally:
        await conn.close()
    return {
        "slices": count,
        "load_seconds": round(seconds, 1),
        "endpoint_slices_table_mib": round(table_bytes / 2**20, 1),
    }


async def measure(
    fleet: Fleet, hub: HubProcess, *, size: int, writes: int, seconds: float, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    latencies: list[float] = []
    errors = 0
    async with aiohttp.ClientSession() as session:
        cpu0, t0 = cpu_seconds(hub.pid), time.perf_counter()
        deadline = t0 + seconds
        for i in range(writes):
            if time.perf_counter() >= deadline:
                break
            cluster, ns, svc, name = target_of(fleet, rng.randrange(size))
            body = moved(
                slice_wire(
                    ns,
                    svc,
                    name=name,
                    addresses=[f"10.0.0.{e + 1}" for e in range(fleet.endpoints)],
                ),
                seed * writes + i,
            )
            path = f"/api/v1/clusters/{cluster_name(cluster)}/endpointslices/{ns}/{name}"
            started = time.perf_counter()
            async with session.put(hub.url + path, json=body, headers=fleet.headers(cluster)) as a:
                await a.read()
                ok = a.status == 200
            if ok:
                latencies.append(time.perf_counter() - started)
            else:
                errors += 1
                if errors <= 3:
                    progress(NAME, f"PUT {path}: {a.status}")
        elapsed = time.perf_counter() - t0
        hub_cpu = cpu_seconds(hub.pid) - cpu0
    done = len(latencies) + errors
    return {
        "writes": done,
        "errors": errors,
        "seconds": round(elapsed, 1),
        "latency": percentiles(latencies),
        "hub_cpu_ms_per_put": round(hub_cpu / done * 1000, 3) if done else None,
    }


async def one_size(args: Any, size: int) -> dict[str, Any]:
    fleet = Fleet(clusters=args.clusters, services=args.services, endpoints=ENDPOINTS)
    async with fresh_database("postgresql") as url:
        with tempfile.TemporaryDirectory(prefix="mcsync-bench-") as tmp:
            with HubProcess(url, Path(tmp)) as hub:
                async with aiohttp.ClientSession() as session:
                    await fleet.fill(hub, session, slices=False)
                loaded = await bulk_load(url, fleet, hub, size)
                progress(NAME, f"{size}: loaded {loaded}")
                await measure(
                    fleet, hub, size=size, writes=min(100, args.writes), seconds=60, seed=1
                )
                load_average = machine()["load_average"]
                measured = await measure(
                    fleet, hub, size=size, writes=args.writes, seconds=args.seconds, seed=2
                )
                progress(NAME, f"{size}: {measured}")
    return {"size": size, "load_average": load_average, "loaded": loaded, **measured}


async def run(args: Any) -> dict[str, Any]:
    results = [await one_size(args, size) for size in args.sizes]
    small, large = results[0], results[-1]
    latency_growth = ratio(large["latency"]["p99_ms"], small["latency"]["p99_ms"])
    p50_growth = ratio(large["latency"]["p50_ms"], small["latency"]["p50_ms"])
    cpu_growth = ratio(large["hub_cpu_ms_per_put"], small["hub_cpu_ms_per_put"])
    return {
        "sizes": args.sizes,
        "exports": args.clusters * args.services,
        "endpoints_per_slice": ENDPOINTS,
        "results": results,
        "p99_latency_growth": latency_growth,
        "p50_latency_growth": p50_growth,
        "hub_cpu_per_put_growth": cpu_growth,
        "target": {
            "growth_at_most": TARGET_RATIO,
            "met": latency_growth is not None
            and cpu_growth is not None
            and latency_growth <= TARGET_RATIO
            and cpu_growth <= TARGET_RATIO,
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,1000000", help="comma-separated slice counts")
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=120.0, help="time bound per size")
    parser.add_argument("--clusters", type=int, default=CLUSTERS)
    parser.add_argument("--services", type=int, default=SERVICES, help="exports per cluster")
    args = parser.parse_args()
    if args.backend != "postgresql":
        parser.error("slice_growth runs on PostgreSQL only (its bulk load is PostgreSQL SQL)")
    args.sizes = [int(s) for s in str(args.sizes).split(",")]
    if args.smoke:
        args.sizes, args.writes, args.clusters, args.services = [100, 1000], 40, 5, 20
    write_result(NAME, args, asyncio.run(run(args)))


if __name__ == "__main__":
    main()
