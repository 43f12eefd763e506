"""Benchmark 3: write latency and conflict-resolution time as the exports table grows.

    python -m bench.growth [--sizes 1000,1000000] [--writes 2000] [--concurrency 1] [--smoke]

docs/reference.md#conflicts promises that a write costs in proportion to the exports of its key,
never to the table's size. For each size N this benchmark fills a fresh PostgreSQL database with N
realistic exports (N/3 service keys, each exported by three clusters, with their
verdicts and ServiceImports), brings it to a steady state (VACUUM ANALYZE, CHECKPOINT),
then times `Store.exports.put` of existing exports whose
port flips between 80 and 8080 — every write changes a spec, re-judges a three-export
key and flips its Conflict verdict, the most work one PUT can cause.

The bulk load is one `INSERT … SELECT generate_series` per table, from template rows the
real store wrote for one key (so the JSON, verdicts and import status are exactly what
the hub writes), with names substituted in SQL; then `ANALYZE`. Writes run in-process
against the Store (no HTTP: HTTP overhead is size-independent and would only dilute the
ratio), one writer at a time by default, so the figure is the cost of a write rather
than the queue in front of it. Conflict-resolution time is the time each write spends in
the read of the keys' exports and the judge (`hub.store.writer._read_keys` and
`hub.store.verdicts.judge_key`), measured by wrapping those two functions in this process
only.

Headline: p99(N large) / p99(N small) for both. Target (issue): at most 1.5.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.support import (
    EXPORT_COLUMNS,
    asyncpg_url,
    base_parser,
    closed_loop,
    export_wire,
    fresh_database,
    percentiles,
    ratio,
    write_result,
)
from hub.store import Store, migrate, verdicts, writer
from shared.models import InternalServiceExport

NAME = "growth"
TARGET_RATIO = 1.5
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SAMPLE_CLUSTER = "clusteraaa"  # + position 0..2
SAMPLE_NS = "nsbbb"
SAMPLE_NAME = "svcccc"
TEXT_COLUMNS = ("spec", "condition", "exported_labels", "exported_annotations", "ports")

_resolution: ContextVar[list[float] | None] = ContextVar("resolution", default=None)


def _timed(fn: Callable[..., Any], *, awaitable: bool) -> Callable[..., Any]:
    """`fn`, adding its duration to the current write's conflict-resolution time."""

    if awaitable:

        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                bucket = _resolution.get()
                if bucket is not None:
                    bucket[0] += time.perf_counter() - t0

        return timed_async

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            bucket = _resolution.get()
            if bucket is not None:
                bucket[0] += time.perf_counter() - t0

    return timed


def instrument_writer() -> None:
    writer._read_keys = _timed(writer._read_keys, awaitable=True)  # type: ignore[assignment]
    verdicts.judge_key = _timed(verdicts.judge_key, awaitable=False)


def cluster_sql(position: int, clusters: int) -> str:
    """SQL for the cluster id of key `k` at `position` (0..2): three distinct clusters."""
    return f"('c-' || ((3 * k + {position}) % {clusters}))"


def substituted(column: str, clusters: int) -> str:
    """SQL that turns the template text of `column` into key k's text."""
    expr = column
    for position in range(3):
        expr = f"replace({expr}, '{SAMPLE_CLUSTER}{position}', {cluster_sql(position, clusters)})"
    expr = f"replace({expr}, '{SAMPLE_NS}', 'ns-' || (k % 1000))"
    return f"replace({expr}, '{SAMPLE_NAME}', 'svc-' || k)"


def sample_export(cluster: str, namespace: str, name: str, position: int, port: int) -> Any:
    body = export_wire(
        cluster, namespace, name, port=port, created=T0 + timedelta(seconds=position)
    )
    return InternalServiceExport.model_validate(body)


async def bulk_load(url: str, store: Store, *, size: int) -> dict[str, Any]:
    """Fill the real tables with `size` exports; answers what was loaded and how fast."""
    import asyncpg

    keys = max(1, size // 3)
    clusters = max(3, min(1000, size // 1000))
    for position in range(3):
        await store.clusters.register(f"{SAMPLE_CLUSTER}{position}", {})
        await store.exports.put(
            f"{SAMPLE_CLUSTER}{position}",
            sample_export(f"{SAMPLE_CLUSTER}{position}", SAMPLE_NS, SAMPLE_NAME, position, 80),
        )
    started = time.perf_counter()
    conn = await asyncpg.connect(asyncpg_url(url))
    try:
        templates = [
            await conn.fetchrow(
                "SELECT * FROM exports WHERE cluster_id = $1", f"{SAMPLE_CLUSTER}{position}"
            )
            for position in range(3)
        ]
        imp = await conn.fetchrow("SELECT * FROM service_imports")
        assert imp is not None and all(t is not None for t in templates)
        await conn.execute("DELETE FROM exports; DELETE FROM service_imports; DELETE FROM changes")
        await conn.execute(
            "INSERT INTO clusters (name, labels, token_hash, created_at, last_heartbeat) "
            "SELECT 'c-' || i, '{}', md5('c' || i) || md5('t' || i), now(), now() "
            f"FROM generate_series(0, {clusters - 1}) AS i"
        )
        for position, template in enumerate(templates):
            assert template is not None
            args: list[Any] = []
            sql_values = []
            for column in EXPORT_COLUMNS:
                if column == "cluster_id":
                    expr = cluster_sql(position, clusters)
                elif column == "namespace":
                    expr = "'ns-' || (k % 1000)"
                elif column == "name":
                    expr = "'svc-' || k"
                elif column == "resource_version":
                    expr = f"3 * k + {position} + 1"
                else:
                    args.append(template[column])
                    placeholder = f"${len(args)}"
                    expr = (
                        substituted(f"{placeholder}::text", clusters)
                        if column in TEXT_COLUMNS
                        else placeholder
                    )
                sql_values.append(expr)
            await conn.execute(
                f"INSERT INTO exports ({', '.join(EXPORT_COLUMNS)}) "
                f"SELECT {', '.join(sql_values)} FROM generate_series(0, {keys - 1}) AS k",
                *args,
            )
        await conn.execute(
            "INSERT INTO service_imports (namespace, name, spec, status, conflict, "
            "resource_version, created_at) "
            f"SELECT 'ns-' || (k % 1000), 'svc-' || k, {substituted('$1::text', clusters)}, "
            f"{substituted('$2::text', clusters)}, false, 3 * k + 3, now() "
            f"FROM generate_series(0, {keys - 1}) AS k",
            imp["spec"],
            imp["status"],
        )
        await conn.execute("UPDATE revision SET value = $1", 3 * keys + 10)
        count = await conn.fetchval("SELECT count(*) FROM exports")
        seconds = time.perf_counter() - started
        # Steady state, as a long-lived table is: hint bits set, visibility map and
        # statistics current, the load's dirty pages flushed. Without this the first
        # writes after a large load pay for the load (hint-bit writes, a checkpoint).
        await conn.execute("VACUUM ANALYZE")
        await conn.execute("CHECKPOINT")
        table_bytes = await conn.fetchval("SELECT pg_total_relation_size('exports')")
    finally:
        await conn.close()
    return {
        "exports": count,
        "keys": keys,
        "clusters": clusters,
        "load_seconds": round(seconds, 1),
        "exports_table_mib": round(table_bytes / 2**20, 1),
    }


async def measure(
    store: Store, *, keys: int, clusters: int, writes: int, concurrency: int, seconds: float
) -> dict[str, Any]:
    rng = random.Random(7)
    targets = [(rng.randrange(keys), rng.randrange(3)) for _ in range(writes)]
    flips: dict[tuple[int, int], int] = {}
    resolution: list[float] = []

    async def one(i: int) -> bool:
        k, position = targets[i]
        flips[k, position] = flips.get((k, position), 0) + 1
        port = 8080 if flips[k, position] % 2 else 80
        cluster = f"c-{(3 * k + position) % clusters}"
        export = sample_export(cluster, f"ns-{k % 1000}", f"svc-{k}", position, port)
        bucket = [0.0]
        token = _resolution.set(bucket)
        try:
            await store.exports.put(cluster, export)
        finally:
            _resolution.reset(token)
        resolution.append(bucket[0])
        return True

    run: Callable[[int], Awaitable[bool]] = one
    result = await closed_loop(run, concurrency=concurrency, total=writes, max_seconds=seconds)
    return {"writes": result.summary(), "conflict_resolution": percentiles(resolution)}


async def one_size(args: Any, size: int) -> dict[str, Any]:
    async with fresh_database("postgresql") as url:
        await migrate.upgrade_async(url)
        store = await Store.open(url, pool_size=args.concurrency + 2)
        try:
            loaded = await bulk_load(url, store, size=size)
            # Warm the statement caches and the key's pages the same way at every size.
            await measure(
                store,
                keys=loaded["keys"],
                clusters=loaded["clusters"],
                writes=min(100, args.writes),
                concurrency=args.concurrency,
                seconds=args.seconds,
            )
            measured = await measure(
                store,
                keys=loaded["keys"],
                clusters=loaded["clusters"],
                writes=args.writes,
                concurrency=args.concurrency,
                seconds=args.seconds,
            )
        finally:
            await store.close()
    return {"size": size, "loaded": loaded, **measured}


async def run(args: Any) -> dict[str, Any]:
    instrument_writer()
    results = [await one_size(args, size) for size in args.sizes]
    small, large = results[0], results[-1]
    write_growth = ratio(large["writes"]["latency"]["p99_ms"], small["writes"]["latency"]["p99_ms"])
    judge_growth = ratio(
        large["conflict_resolution"]["p99_ms"], small["conflict_resolution"]["p99_ms"]
    )
    return {
        "sizes": args.sizes,
        "concurrency": args.concurrency,
        "results": results,
        "p99_write_latency_growth": write_growth,
        "p99_conflict_resolution_growth": judge_growth,
        "target": {
            "growth_at_most": TARGET_RATIO,
            "met": write_growth is not None
            and judge_growth is not None
            and write_growth <= TARGET_RATIO
            and judge_growth <= TARGET_RATIO,
        },
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,1000000", help="comma-separated table sizes")
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument(
        "--concurrency", type=int, default=1, help="writers at once (1: cost, not queueing)"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="time bound per size")
    args = parser.parse_args()
    if args.backend != "postgresql":
        parser.error("growth runs on PostgreSQL only (its bulk load is PostgreSQL SQL)")
    args.sizes = [int(s) for s in str(args.sizes).split(",")]
    if args.smoke:
        args.sizes, args.writes = [300, 3000], 40
    write_result(NAME, args, asyncio.run(run(args)))


if __name__ == "__main__":
    main()
