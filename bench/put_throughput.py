"""Benchmark 1: single-export PUT throughput and latency, beside two ceilings of the same run.

    python -m bench.put_throughput [--clients 64] [--requests 20000] [--seconds 20]
                                   [--backend postgresql|sqlite] [--smoke]

Three phases, the same aiohttp client and the same 64 concurrent workers each:

* framework ceiling — PUT the same bodies to the no-op route that `bench.hubserver`
  mounts in the same server process (same middleware, same event loop); run before AND
  after the real phase, and the mean taken, so drift on a shared machine shows up;
* hub — PUT /api/v1/clusters/{c}/serviceexports/{ns}/{name}, every request a new export
  (an insert, a judged key, a revision, a change row: the full write path);
* database ceiling (PostgreSQL) — the same rows as raw asyncpg upserts
  (`INSERT … ON CONFLICT DO UPDATE`, one statement per export, autocommit) into a copy of
  the `exports` table, at the same concurrency: what the database alone allows.

Each HTTP phase also records the hub process's CPU per answered request. Their ratio (no-op
CPU / PUT CPU) is what the throughput ratio would be with the hub's core to itself; other
work on a shared host moves it far less than it moves req/s.
It records the local PostgreSQL server's CPU per request too: the database's work per PUT
shares the machine's cores with the hub and the client, and the no-op route has none.

Target (issue): hub throughput ≥ 50 % of the framework ceiling.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import httpx

from bench.support import (
    EXPORT_COLUMNS,
    HubProcess,
    base_parser,
    closed_loop,
    cpu_seconds,
    created_at,
    database_cpu_seconds,
    export_wire,
    fresh_database,
    mib,
    ratio,
    raw_export_row,
    rss_bytes,
    write_result,
)

NAME = "put_throughput"
CLUSTER = "bench-put"
NAMESPACES = 50
TARGET_RATIO = 0.5


def bodies(count: int, *, prefix: str) -> list[tuple[str, str, bytes]]:
    """(namespace, name, encoded body) of `count` distinct exports."""
    out = []
    for i in range(count):
        namespace, name = f"ns-{i % NAMESPACES}", f"{prefix}-{i}"
        body = export_wire(CLUSTER, namespace, name, created=created_at(i))
        out.append((namespace, name, json.dumps(body).encode()))
    return out


async def http_phase(
    session: aiohttp.ClientSession,
    *,
    hub_pid: int,
    url_of: Any,
    items: list[tuple[str, str, bytes]],
    headers: dict[str, str],
    clients: int,
    seconds: float,
) -> dict[str, Any]:
    async def one(i: int) -> bool:
        namespace, name, body = items[i]
        async with session.put(url_of(namespace, name), data=body, headers=headers) as answer:
            await answer.read()
            return answer.status < 300

    cpu0, db0 = cpu_seconds(hub_pid), database_cpu_seconds()
    result = await closed_loop(one, concurrency=clients, total=len(items), max_seconds=seconds)
    summary = result.summary()
    summary["hub_cpu_seconds"] = round(cpu_seconds(hub_pid) - cpu0, 2)
    summary["hub_cpu_ms_per_request"] = cpu_per_request_ms(summary)
    db1 = database_cpu_seconds()
    summary["database_cpu_ms_per_request"] = (
        round((db1 - db0) * 1000 / summary["requests"], 3)
        if db0 is not None and db1 is not None and summary["requests"]
        else None
    )
    return summary


def cpu_per_request_ms(summary: dict[str, Any]) -> float | None:
    """The hub's CPU per answered request in a phase, in ms."""
    if not summary["requests"]:
        return None
    return round(summary["hub_cpu_seconds"] * 1000 / summary["requests"], 3)


async def database_phase(
    url: str, *, items: list[tuple[str, str, bytes]], clients: int, seconds: float
) -> dict[str, Any]:
    """Raw asyncpg upserts of the same rows, `clients` at a time."""
    now = created_at(0)
    rows = [raw_export_row(body, now=now) for _, _, body in items]
    placeholders = ", ".join(f"${i + 1}" for i in range(len(EXPORT_COLUMNS)))
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in EXPORT_COLUMNS[3:])
    sql = (
        f"INSERT INTO bench_raw_exports ({', '.join(EXPORT_COLUMNS)}) VALUES ({placeholders}) "
        f"ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET {updates}"
    )
    plain = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    setup = await asyncpg.connect(plain)
    try:
        await setup.execute("CREATE TABLE bench_raw_exports (LIKE exports INCLUDING ALL)")
    finally:
        await setup.close()
    pool = await asyncpg.create_pool(plain, min_size=clients, max_size=clients)
    assert pool is not None
    try:

        async def one(i: int) -> bool:
            async with pool.acquire() as conn:
                await conn.execute(sql, *rows[i])
            return True

        result = await closed_loop(one, concurrency=clients, total=len(rows), max_seconds=seconds)
    finally:
        await pool.close()
    return result.summary()


async def run(args: Any) -> dict[str, Any]:
    clients = args.clients
    async with fresh_database(args.backend) as url:
        with tempfile.TemporaryDirectory(prefix="mcsync-bench-") as tmp:
            hub = HubProcess(url, Path(tmp), extra_args=["--pool-size", str(args.pool_size)])
            with hub:
                async with httpx.AsyncClient(timeout=30) as admin:
                    token = await hub.register(admin, CLUSTER)
                headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
                base = f"{hub.url}/api/v1/clusters/{CLUSTER}/serviceexports"

                def real(ns: str, n: str) -> str:
                    return f"{base}/{ns}/{n}"

                def noop(ns: str, n: str) -> str:
                    return f"{hub.url}/bench/noop/{CLUSTER}/{ns}/{n}"

                connector = aiohttp.TCPConnector(limit=clients)
                async with aiohttp.ClientSession(connector=connector) as session:
                    phase = {
                        "hub_pid": hub.pid,
                        "headers": headers,
                        "clients": clients,
                        "seconds": args.seconds,
                    }
                    warm = bodies(args.warmup, prefix="warm")
                    await http_phase(session, url_of=noop, items=warm, **phase)
                    await http_phase(session, url_of=real, items=warm, **phase)
                    items = bodies(args.requests, prefix="svc")
                    noop_before = await http_phase(session, url_of=noop, items=items, **phase)
                    hub_put = await http_phase(session, url_of=real, items=items, **phase)
                    noop_after = await http_phase(session, url_of=noop, items=items, **phase)
                hub_rss = rss_bytes(hub.pid)
            database: dict[str, Any] | None = None
            if args.backend == "postgresql":
                try:
                    database = await database_phase(
                        url, items=items, clients=clients, seconds=args.seconds
                    )
                except asyncpg.TooManyConnectionsError as exc:
                    # A shared server may not have `clients` connections to spare; the
                    # hub's figures above are still worth keeping.
                    database = {"per_second": None, "error": str(exc)}
    ceiling = (noop_before["per_second"] + noop_after["per_second"]) / 2
    framework_ratio = ratio(hub_put["per_second"], ceiling)
    cpu_before, cpu_after = (p["hub_cpu_ms_per_request"] for p in (noop_before, noop_after))
    noop_cpu_ms = (
        (cpu_before + cpu_after) / 2 if cpu_before is not None and cpu_after is not None else None
    )
    return {
        "clients": clients,
        "hub_pool_size": args.pool_size,
        "framework_ceiling": {"before": noop_before, "after": noop_after, "per_second": ceiling},
        "hub_put": hub_put,
        "database_ceiling": database,
        "hub_cpu_seconds_during_put_phase": hub_put["hub_cpu_seconds"],
        # CPU per request of each route, and their ratio: what the throughput ratio would
        # be with the hub's core to itself. A busy host moves it far less than req/s.
        "hub_cpu_ms_per_request": {"noop": noop_cpu_ms, "put": hub_put["hub_cpu_ms_per_request"]},
        "cpu_ratio_noop_to_put": ratio(noop_cpu_ms, hub_put["hub_cpu_ms_per_request"]),
        # The database server's CPU per PUT runs on the same cores as the hub (and the
        # benchmark's own client): what the hub's Python cannot win back.
        "database_cpu_ms_per_put": hub_put["database_cpu_ms_per_request"],
        "hub_rss_mib": mib(hub_rss),
        "ratio_to_framework_ceiling": framework_ratio,
        "ratio_to_database_ceiling": ratio(
            hub_put["per_second"], database["per_second"] if database else None
        ),
        "target": {
            "ratio_to_framework_ceiling_at_least": TARGET_RATIO,
            "met": framework_ratio is not None and framework_ratio >= TARGET_RATIO,
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=20_000, help="requests per phase")
    parser.add_argument("--seconds", type=float, default=20.0, help="time bound per phase")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--pool-size", type=int, default=10, help="the hub's database pool")
    args = parser.parse_args()
    if args.smoke:
        args.clients, args.requests, args.seconds, args.warmup = 8, 60, 10.0, 10
    started = time.perf_counter()
    result = asyncio.run(run(args))
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    write_result(NAME, args, result)


if __name__ == "__main__":
    main()
