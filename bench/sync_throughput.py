"""Benchmark 2: full-state sync throughput (exports/s), beside a raw bulk insert of the rows.

    python -m bench.sync_throughput [--exports 10000] [--backend postgresql|sqlite] [--smoke]

One cluster PUTs its whole set, `PUT /api/v1/clusters/{c}/serviceexports`, three times:
`create` (every export new), `update` (every spec changed: a port number) and `unchanged`
(the same body again: the idempotent path an agent's relist takes). Each is timed from the
request to the answer, through HTTP, validation, the hub's batched transactions
(`hub.store.exports.SYNC_BATCH` keys each, `SYNC_PARALLEL` in flight) and the conflict
judge. Each phase also records the hub process's CPU time per export, which a shared
machine's load moves far less than the rate, the local PostgreSQL server's CPU per export
(`database_cpu_us_per_export`), and from both the rate this machine's cores allow at all
(`cores_allow_per_second`: every core busy with nothing but the hub and the database): a
target above it is out of reach here, whatever the hub's Python does.

Ceiling (PostgreSQL): the same rows, already converted to columns, `COPY`ed by asyncpg
into a copy of the `exports` table (same indexes) in one transaction — the fastest way
the database takes these rows at all.

The hub's default body limit is 1 MiB; 10,000 exports are ~6 MiB, so the benchmark's hub
runs with a 64 MiB limit (`--max-body-bytes`), as an operator syncing such clusters would.
Target (issue): at least 20,000 exports/s.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.support import (
    EXPORT_COLUMNS,
    HubProcess,
    base_parser,
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

NAME = "sync_throughput"
CLUSTER = "bench-sync"
TARGET_PER_SECOND = 20_000
MAX_BODY = 64 * 1024 * 1024


def sync_body(count: int, *, port: int) -> dict[str, Any]:
    items = [
        export_wire(CLUSTER, f"ns-{i % 100}", f"svc-{i}", port=port, created=created_at(i))
        for i in range(count)
    ]
    return {
        "apiVersion": "mcsync.io/v1alpha1",
        "kind": "InternalServiceExportList",
        "metadata": {},
        "items": items,
    }


def cpu_bound(hub_cpu: float, database_cpu: float | None, exports: int) -> dict[str, Any]:
    """The database server's CPU per export, and the rate this machine's cores allow at
    all: hub and database together, each export's CPU spread over every core. A target
    above it cannot be met here by the hub's Python alone."""
    if database_cpu is None:
        return {"database_cpu_us_per_export": None, "cores_allow_per_second": None}
    per_export = (hub_cpu + database_cpu) / exports
    return {
        "database_cpu_us_per_export": round(1e6 * database_cpu / exports, 1),
        "cores_allow_per_second": round((os.cpu_count() or 1) / per_export) if per_export else None,
    }


async def bulk_insert_ceiling(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """COPY the same rows into a copy of `exports` in one transaction."""
    import asyncpg

    now = created_at(0)
    records = [raw_export_row(item, now=now) for item in body["items"]]
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        await conn.execute("CREATE TABLE bench_raw_exports (LIKE exports INCLUDING ALL)")
        started = time.perf_counter()
        async with conn.transaction():
            await conn.copy_records_to_table(
                "bench_raw_exports", records=records, columns=EXPORT_COLUMNS
            )
        seconds = time.perf_counter() - started
    finally:
        await conn.close()
    return {
        "exports": len(records),
        "seconds": round(seconds, 3),
        "per_second": round(len(records) / seconds, 1),
    }


async def run(args: Any) -> dict[str, Any]:
    first = sync_body(args.exports, port=80)
    second = sync_body(args.exports, port=8080)
    phases: dict[str, Any] = {}
    async with fresh_database(args.backend) as url:
        with tempfile.TemporaryDirectory(prefix="mcsync-bench-") as tmp:
            hub = HubProcess(url, Path(tmp), extra_args=["--max-body-bytes", str(MAX_BODY)])
            with hub:
                async with httpx.AsyncClient(timeout=600) as client:
                    token = await hub.register(client, CLUSTER)
                    headers = {
                        "Authorization": f"Bearer {token}",
                        "Content-Type": "application/json",
                    }
                    path = f"{hub.url}/api/v1/clusters/{CLUSTER}/serviceexports"
                    for phase, body in (
                        ("create", first),
                        ("update", second),
                        ("unchanged", second),
                    ):
                        content = json.dumps(body).encode()
                        cpu_before, db_before = cpu_seconds(hub.pid), database_cpu_seconds()
                        started = time.perf_counter()
                        answer = await client.put(path, content=content, headers=headers)
                        seconds = time.perf_counter() - started
                        hub_cpu = cpu_seconds(hub.pid) - cpu_before
                        db_after = database_cpu_seconds()
                        if answer.status_code != 200:
                            raise RuntimeError(f"sync {phase}: {answer.status_code} {answer.text}")
                        phases[phase] = {
                            "exports": args.exports,
                            "body_mib": mib(len(content)),
                            "seconds": round(seconds, 3),
                            "per_second": round(args.exports / seconds, 1),
                            # The hub's own CPU for the request: unlike the rate, it hardly
                            # moves with the rest of a shared machine's load.
                            "hub_cpu_seconds": round(hub_cpu, 3),
                            "hub_cpu_us_per_export": round(1e6 * hub_cpu / args.exports, 1),
                            **cpu_bound(
                                hub_cpu,
                                None
                                if db_after is None or db_before is None
                                else db_after - db_before,
                                args.exports,
                            ),
                            "answer": answer.json(),
                        }
                hub_rss = rss_bytes(hub.pid)
            ceiling = None
            if args.backend == "postgresql":
                ceiling = await bulk_insert_ceiling(url, first)
    create_rate = phases["create"]["per_second"]
    return {
        "exports": args.exports,
        "sync": phases,
        "bulk_insert_ceiling": ceiling,
        "ratio_create_to_bulk_insert": ratio(
            create_rate, ceiling["per_second"] if ceiling else None
        ),
        "hub_rss_mib_after": mib(hub_rss),
        "target": {
            "exports_per_second_at_least": TARGET_PER_SECOND,
            "met": create_rate >= TARGET_PER_SECOND,
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--exports", type=int, default=10_000)
    args = parser.parse_args()
    if args.smoke:
        args.exports = 200
    result = asyncio.run(run(args))
    write_result(NAME, args, result)


if __name__ == "__main__":
    main()
