"""Benchmark: round trips a write makes while it holds its locks (PostgreSQL).

    python -m bench.write_round_trips [--writes 20]

docs/benchmarks.md §16 (fleet scale): on a starved hub every round trip of a write
transaction waits for a turn of the event loop, and the write holds what it has locked —
its clusters' rows, its keys, last the revision counter every writer queues on — over all
of them. This benchmark counts them, per transaction, for the two write paths an agent
drives: a single export PUT and a single EndpointSlice PUT (each group-committed alone),
a create and then an update of each, `--writes` times.

It opens a store in this process on a fresh PostgreSQL database and logs every statement
asyncpg sends (`Connection.add_query_logger` on each pooled connection: SQLAlchemy's
statements, the store's own on the driver's connection, BEGIN and COMMIT alike). For each
write transaction it reports:

* `after_first_lock`: statements from the clusters' lock (step 1 of `hub.store.locks`,
  the first lock a write takes) through COMMIT, both included;
* `revision_held`: statements from the one that takes the revision counter through
  COMMIT, both included (the revision row is held over these);
* `total`: BEGIN through COMMIT.

And for a heartbeat batch (`hub.store.heartbeats`: `--beats` clusters beating at once,
their member tokens checked by the batch, gathered into one batch), `--writes` times:

* `round_trips`: every statement the batch sends, the pool's ping at checkout, BEGIN and
  COMMIT included, per batch;
* the same for the batch in a transaction of its own (`_commit_in_transaction`, what
  SQLite runs and what PostgreSQL ran before its one-statement batch), for comparison.

No timing: a count of round trips, which is the same on a loaded host. PostgreSQL only
(SQLite's statements are calls inside the hub's process, not round trips).
"""

from __future__ import annotations

import asyncio
import statistics
from collections import defaultdict
from typing import Any

from sqlalchemy import event

from bench.support import (
    base_parser,
    export_record,
    fresh_database,
    machine,
    slice_record,
    write_result,
)
from hub.store import Store, migrate
from shared.models import Heartbeat

NAME = "write_round_trips"
CLUSTER = "east"
# What this round's store does (docs/benchmarks.md §16, third round): a regression shows.
TARGET_AFTER_FIRST_LOCK = {"export": 5, "slice": 6}
TARGET_REVISION_HELD = 2
# A heartbeat batch: the checkout's ping and its one statement (docs/benchmarks.md §16,
# fourth round).
TARGET_HEARTBEAT_ROUND_TRIPS = 2


def _introspection(sql: str) -> bool:
    return "typeinfo_tree" in sql or "'jit'" in sql


class Statements:
    """Every statement each pooled connection sends, in order."""

    def __init__(self) -> None:
        self.by_connection: dict[int, list[str]] = defaultdict(list)
        self.recording = False

    def attach(self, store: Store) -> None:
        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            driver = dbapi_connection.driver_connection
            key = id(driver)

            def log(query: Any) -> None:
                # Leave out asyncpg's one-off type introspection of a connection's first
                # use of a type (and the JIT setting it wraps itself in).
                if self.recording and not _introspection(str(query.query)):
                    self.by_connection[key].append(" ".join(str(query.query).split()))

            driver.add_query_logger(log)

        def on_execute(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            # SQLAlchemy's own statements go through asyncpg's prepared statements, which
            # the query logger does not see.
            if self.recording:
                key = id(conn.connection.driver_connection)
                self.by_connection[key].append(" ".join(statement.split()))

        event.listen(store.engine.sync_engine, "connect", on_connect)
        event.listen(store.engine.sync_engine, "before_cursor_execute", on_execute)

    def transactions(self) -> list[list[str]]:
        """Each transaction's statements, BEGIN through COMMIT (SQLAlchemy's first
        statement is logged before the BEGIN it starts: it is moved after it)."""
        out: list[list[str]] = []
        for statements in self.by_connection.values():
            current: list[str] = []
            for sql in statements:
                if sql == ";":  # the pool's ping at checkout, before the transaction
                    continue
                if sql.upper().startswith("BEGIN"):
                    current.insert(0, sql)
                    continue
                current.append(sql)
                if sql.upper().rstrip(";") in ("COMMIT", "ROLLBACK"):
                    if current[0].upper().startswith("BEGIN"):
                        out.append(current)
                    current = []
        return out

    def clear(self) -> None:
        self.by_connection.clear()


def counts(transaction: list[str]) -> dict[str, int] | None:
    """The counts of one write transaction (None when it took no cluster lock)."""
    first_lock = next(
        (i for i, sql in enumerate(transaction) if "FOR KEY SHARE" in sql or "FOR SHARE" in sql),
        None,
    )
    revision = next(
        (
            i
            for i, sql in enumerate(transaction)
            if sql.startswith(("UPDATE revision", "WITH r AS (UPDATE revision"))
        ),
        None,
    )
    if first_lock is None:
        return None
    end = len(transaction)
    return {
        "total": end,
        "after_first_lock": end - first_lock,
        "revision_held": end - revision if revision is not None else 0,
    }


async def measure(store: Store, statements: Statements, writes: int) -> dict[str, Any]:
    kinds: dict[str, list[dict[str, int]]] = defaultdict(list)
    samples: dict[str, list[str]] = {}

    async def one(kind: str, write: Any) -> None:
        statements.clear()
        statements.recording = True
        await write
        statements.recording = False
        for transaction in statements.transactions():
            found = counts(transaction)
            if found is not None:
                kinds[kind].append(found)
                samples.setdefault(kind, transaction)

    for i in range(writes):
        name = f"svc-{i}"
        for step, port in (("export_create", 80), ("export_update", 81)):
            export = export_record(CLUSTER, "team", name, port=port)
            await one(step, store.exports.put(CLUSTER, export))
        for step, address in (("slice_create", "10.0.0.1"), ("slice_update", "10.0.0.2")):
            endpoints = slice_record("team", name, address)
            await one(step, store.endpointslices.put(CLUSTER, endpoints))
    summary: dict[str, Any] = {}
    for kind, found in kinds.items():
        summary[kind] = {
            key: statistics.median_low(f[key] for f in found)
            for key in ("total", "after_first_lock", "revision_held")
        }
        summary[kind]["transactions"] = len(found)
        summary[kind]["statements"] = [sql[:100] for sql in samples[kind]]
    return summary


async def measure_heartbeats(
    store: Store, statements: Statements, tokens: dict[str, str], writes: int
) -> dict[str, Any]:
    """Round trips per heartbeat batch, the one-statement path and the transaction path."""
    batcher = store.clusters._beats
    beat = Heartbeat(agent_version="0.1.0", imported_services=1, imported_endpoints=10)
    summary: dict[str, Any] = {}
    for path, one_statement in (("heartbeat_batch", True), ("heartbeat_transaction", False)):
        batcher._one_statement = one_statement
        per_batch: list[float] = []
        sample: list[str] = []
        for _ in range(writes):
            statements.clear()
            before = batcher.batches
            statements.recording = True
            outcomes = await asyncio.gather(
                *(
                    store.clusters.beat_with_token(name, beat, token=token)
                    for name, token in tokens.items()
                )
            )
            statements.recording = False
            assert all(o is not None for o in outcomes), "a beat was not recorded"
            # An executemany (the transaction path's UPDATE) is logged twice, by SQLAlchemy's
            # event and by asyncpg's logger (later: it calls its loggers soon, not at once),
            # and is one round trip (asyncpg sends its executions in one go): counted once.
            sent = []
            for found in statements.by_connection.values():
                for sql in found:
                    if not (sql.startswith("UPDATE") and sql in sent):
                        sent.append(sql)
            per_batch.append(len(sent) / (batcher.batches - before))
            sample = sample or sent
        summary[path] = {
            "beats": len(tokens),
            "round_trips": statistics.median_low(per_batch),
            "statements": [sql[:100] for sql in sample],
        }
    batcher._one_statement = True
    return summary


async def run(writes: int, beats: int) -> dict[str, Any]:
    async with fresh_database("postgresql") as url:
        await migrate.upgrade_async(url)
        store = await Store.open(url)
        statements = Statements()
        statements.attach(store)
        await store.engine.dispose()  # every connection from now on is logged
        try:
            await store.clusters.register(CLUSTER, {})
            tokens = {}
            for index in range(beats):
                name = f"member-{index}"
                _, tokens[name] = await store.clusters.register(name, {})
            summary = await measure(store, statements, writes)
            return {**summary, **await measure_heartbeats(store, statements, tokens, writes)}
        finally:
            await store.close()


def main() -> None:
    parser = base_parser(__doc__ or NAME)
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--beats", type=int, default=20, help="clusters beating at once")
    args = parser.parse_args()
    writes = 2 if args.smoke else args.writes
    summary = asyncio.run(run(writes, args.beats))
    for kind, found in summary.items():
        if kind.startswith("heartbeat"):
            print(f"{kind}: {found['round_trips']} round trips a batch of {found['beats']} beats")
            for sql in found["statements"]:
                print(f"    {sql}")
            continue
        print(
            f"{kind}: {found['total']} statements, {found['after_first_lock']} from the first "
            f"lock to COMMIT, {found['revision_held']} with the revision row held "
            f"({found['transactions']} transactions)"
        )
        for sql in found["statements"]:
            print(f"    {sql}")
    met = all(
        found["after_first_lock"] <= TARGET_AFTER_FIRST_LOCK[kind.split("_")[0]]
        and found["revision_held"] <= TARGET_REVISION_HELD
        for kind, found in summary.items()
        if not kind.startswith("heartbeat")
    ) and summary["heartbeat_batch"]["round_trips"] <= TARGET_HEARTBEAT_ROUND_TRIPS
    target = {
        "after_first_lock_at_most": TARGET_AFTER_FIRST_LOCK,
        "revision_held_at_most": TARGET_REVISION_HELD,
        "heartbeat_batch_round_trips_at_most": TARGET_HEARTBEAT_ROUND_TRIPS,
        "met": met,
    }
    write_result(
        NAME, args, {"machine": machine(), "writes": writes, "paths": summary, "target": target}
    )


if __name__ == "__main__":
    main()
