"""Benchmark: failover (docs/reference.md#failover) — a lost cluster's endpoints leaving every
importing cluster, and coming back.

    python -m bench.failover [--clusters 50] [--services 20] [--endpoints 10] [--ttl 3]
                             [--rounds 3] [--sweep-clusters 1000] [--backend postgresql]

**Loss and return.** A real hub process (`bench.hubserver`, `--cluster-ttl TTL`) with
`--clusters` clusters, each exporting `--services` Services with one slice of
`--endpoints` endpoints (`bench.slices.Fleet`: each Service is exported by about five
clusters, so withholding one never leaves a Service without endpoints). Every cluster
heartbeats every TTL/4, as an agent does (at least three times per TTL), and every
cluster but the victim holds its import-feed watch open (`bench.slices.ImportWatcher`:
what an importing agent reads). Then, `--rounds` times:

* the victim's heartbeats stop; for each importing cluster, the time from the victim's
  TTL running out (its last heartbeat *sent* + TTL: the hub recorded it no earlier, so
  this never flatters) until its watch has a DELETED event for every one of the victim's
  slices — the moment its agent deletes the mirrored slices (`loss_seconds`);
* the victim sends one heartbeat; for each importing cluster, the time from that
  heartbeat being sent until its watch has the ADDED event of every slice back
  (`return_seconds`).

The importing agents' Kubernetes writes are one per event they receive for the victim's
slices (a DELETED deletes the mirrored slice, an ADDED creates it; `member/imports/importer.py`
writes nothing else for them): the benchmark counts every event each watch received in
each phase (`events_per_importer_*`), which is the writes' upper bound, and the
victim's slice events among them.

**Sweep CPU.** In this process, a `Store` on a fresh database with `--sweep-clusters`
clusters that heartbeated, the first of them exporting `--services` Services (each also
exported, with endpoints, by another cluster): the CPU (this process: the hub's side) and
wall time per sweep with nothing to change (the common case), and while one cluster is
Stale and withheld (steady: it decides again and finds nothing to write).

Targets: loss p99 < 2 s, return p99 < 1 s, one write per affected slice per
importing cluster and nothing else, a sweep at 1,000 clusters < 10 ms of CPU.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import update

from bench.slices import (
    Fleet,
    ImportWatcher,
    close_watchers,
    cluster_name,
    open_watchers,
    progress,
    watch_session,
)
from bench.support import (
    HubProcess,
    base_parser,
    cpu_seconds,
    export_record,
    fresh_database,
    percentiles,
    slice_record,
    write_result,
)
from hub.store import Store, migrate
from hub.store.tables import clusters as clusters_table
from shared.timefmt import utcnow

NAME = "failover"
HEARTBEAT = {"agentVersion": "0.1.0"}


class FailoverWatcher(ImportWatcher):
    """An import-feed watch that also stamps each event about the victim's slices."""

    def __init__(self, cluster: str, token: str, *, victim: str) -> None:
        super().__init__(cluster, token)
        self._marker = f'"clusterId":"{victim}"'.encode()
        self._lines = b""
        self.victim_events: list[tuple[str, float]] = []  # (type, arrival)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        super().data_received(data)
        lines = (self._lines + data).split(b"\n")
        self._lines = lines.pop()
        for line in lines:
            if self._marker in line.replace(b" ", b""):
                kind = b"DELETED" if b'"DELETED"' in line else b"ADDED"
                if b'"MODIFIED"' in line:
                    kind = b"MODIFIED"
                self.victim_events.append((kind.decode(), now))

    def done_at(self, kind: str, count: int, *, after: int) -> float | None:
        """When the `count`-th `kind` event about the victim arrived, among those after
        index `after`; None if not yet."""
        seen = [t for k, t in self.victim_events[after:] if k == kind]
        return seen[count - 1] if len(seen) >= count else None


async def heartbeats(
    session: aiohttp.ClientSession,
    hub: HubProcess,
    fleet: Fleet,
    *,
    interval: float,
    paused: set[str],
    last_sent: dict[str, float],
    durations: list[float],
) -> None:
    """Every cluster not in `paused` heartbeats every `interval` seconds, each on its own
    schedule spread over the interval as agents' beats are (their jitter), not all at
    once (each beat's answer time goes to `durations`)."""
    names = fleet.names

    async def beat(index: int) -> None:
        name = names[index]
        sent = last_sent[name] = time.perf_counter()
        async with session.post(
            f"{hub.url}/api/v1/clusters/{name}/heartbeat",
            json=HEARTBEAT,
            headers=fleet.headers(index),
        ) as answer:
            await answer.read()
        durations.append(time.perf_counter() - sent)

    async def agent(index: int) -> None:
        await asyncio.sleep(interval * index / len(names))
        while True:
            started = time.perf_counter()
            if names[index] not in paused:
                await beat(index)
            await asyncio.sleep(max(0.0, interval - (time.perf_counter() - started)))

    await asyncio.gather(*(agent(i) for i in range(len(names))))


async def loss_and_return(args: Any, database_url: str, directory: Path) -> dict[str, Any]:
    fleet = Fleet(clusters=args.clusters, services=args.services, endpoints=args.endpoints)
    victim = cluster_name(0)
    hub = HubProcess(
        database_url=database_url,
        directory=directory,
        extra_args=["--cluster-ttl", str(args.ttl), "--log-level", "warning"],
    ).start()
    try:
        async with watch_session() as session:
            filled = await fleet.fill(hub, session)
            progress(NAME, f"filled: {filled}")
            paused: set[str] = set()
            last_sent: dict[str, float] = {}
            beat_durations: list[float] = []
            beating = asyncio.create_task(
                heartbeats(
                    session,
                    hub,
                    fleet,
                    interval=args.ttl / 4,
                    paused=paused,
                    last_sent=last_sent,
                    durations=beat_durations,
                )
            )
            watchers = [
                FailoverWatcher(name, fleet.tokens[name], victim=victim)
                for name in fleet.names
                if name != victim
            ]
            tasks = await open_watchers(watchers, hub.url, seconds=120)
            # The hub's sweeper waits one TTL after its start; the fill took longer.
            await asyncio.sleep(args.ttl)
            losses: list[float] = []
            returns: list[float] = []
            loss_events: list[int] = []
            return_events: list[int] = []
            victim_loss_events: list[int] = []
            victim_return_events: list[int] = []
            slices = args.services
            beat_durations.clear()
            hub_cpu, wall = cpu_seconds(hub.pid), time.perf_counter()
            try:
                for round_ in range(args.rounds):
                    marks = [len(w.victim_events) for w in watchers]
                    totals = [w.events for w in watchers]
                    paused.add(victim)
                    await asyncio.sleep(args.ttl / 4 + 0.2)  # any beat in flight lands
                    expiry = last_sent[victim] + args.ttl
                    deadline = expiry + 30
                    while time.perf_counter() < deadline:
                        done = [
                            w.done_at("DELETED", slices, after=m)
                            for w, m in zip(watchers, marks, strict=True)
                        ]
                        if all(d is not None for d in done):
                            break
                        await asyncio.sleep(0.05)
                    else:
                        raise RuntimeError(f"round {round_}: not every importer lost the victim")
                    losses += [max(0.0, d - expiry) for d in done if d is not None]
                    await asyncio.sleep(1.0)  # nothing else should arrive
                    loss_events += [w.events - t for w, t in zip(watchers, totals, strict=True)]
                    victim_loss_events += [
                        len(w.victim_events) - m for w, m in zip(watchers, marks, strict=True)
                    ]

                    marks = [len(w.victim_events) for w in watchers]
                    totals = [w.events for w in watchers]
                    sent = last_sent[victim] = time.perf_counter()
                    paused.discard(victim)
                    async with session.post(
                        f"{hub.url}/api/v1/clusters/{victim}/heartbeat",
                        json=HEARTBEAT,
                        headers=fleet.headers(0),
                    ) as answer:
                        await answer.read()
                    deadline = sent + 30
                    while time.perf_counter() < deadline:
                        done = [
                            w.done_at("ADDED", slices, after=m)
                            for w, m in zip(watchers, marks, strict=True)
                        ]
                        if all(d is not None for d in done):
                            break
                        await asyncio.sleep(0.02)
                    else:
                        raise RuntimeError(f"round {round_}: not every importer got it back")
                    returns += [max(0.0, d - sent) for d in done if d is not None]
                    await asyncio.sleep(1.0)
                    return_events += [w.events - t for w, t in zip(watchers, totals, strict=True)]
                    victim_return_events += [
                        len(w.victim_events) - m for w, m in zip(watchers, marks, strict=True)
                    ]
                    progress(
                        NAME,
                        f"round {round_}: loss p99 {percentiles(losses)['p99_ms']} ms, "
                        f"return p99 {percentiles(returns)['p99_ms']} ms",
                    )
                hub_cpu, wall = cpu_seconds(hub.pid) - hub_cpu, time.perf_counter() - wall
            finally:
                beating.cancel()
                await asyncio.gather(beating, return_exceptions=True)
                await close_watchers(tasks)
    finally:
        hub.stop()
    return {
        "fill": filled,
        "importing_clusters": len(watchers),
        "victim_slices": slices,
        # The hub's load meanwhile: heartbeats of every cluster every TTL/4, the sweeps.
        "heartbeat_answer_seconds": percentiles(beat_durations),
        "hub_cpu_fraction_of_a_core": round(hub_cpu / wall, 2),
        "loss_seconds_after_ttl": percentiles(losses),
        "return_seconds_after_heartbeat": percentiles(returns),
        "events_per_importer_loss": sorted(set(loss_events)),
        "events_per_importer_return": sorted(set(return_events)),
        "victim_events_per_importer_loss": sorted(set(victim_loss_events)),
        "victim_events_per_importer_return": sorted(set(victim_return_events)),
    }


async def sweep_cpu(args: Any, database_url: str) -> dict[str, Any]:
    """CPU and wall time of one sweep at `--sweep-clusters` clusters (module docstring)."""
    await migrate.upgrade_async(database_url)
    store = await Store.open(database_url, cluster_ttl=timedelta(seconds=90))
    try:
        names = [f"sweep-{i:05d}" for i in range(args.sweep_clusters)]
        for name in names:
            await store.clusters.register(name, {})
        async with store.engine.begin() as conn:
            await conn.execute(update(clusters_table).values(last_heartbeat=utcnow()))
        victim, other = names[0], names[1]
        for index in range(args.services):
            service = f"svc-{index}"
            for cluster, octet in ((victim, 1), (other, 2)):
                await store.exports.put(cluster, export_record(cluster, "demo", service))
                address = f"10.{octet}.0.{index}"
                await store.endpointslices.put(cluster, slice_record("demo", service, address))

        async def measure(label: str) -> dict[str, float]:
            cpu, wall = [], []
            for _ in range(args.sweeps):
                c0, w0 = time.process_time(), time.perf_counter()
                result = await store.withdrawals.sweep()
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
                assert not result.wrote, f"{label}: a steady sweep wrote"
            return {
                "cpu_ms_median": round(statistics.median(cpu) * 1000, 2),
                "cpu_ms_p99": percentiles(cpu)["p99_ms"],
                "wall_ms_median": round(statistics.median(wall) * 1000, 2),
            }

        quiet = await measure("quiet")
        async with store.engine.begin() as conn:
            await conn.execute(
                update(clusters_table)
                .where(clusters_table.c.name == victim)
                .values(last_heartbeat=utcnow() - timedelta(seconds=600))
            )
        c0, w0 = time.process_time(), time.perf_counter()
        transition = await store.withdrawals.sweep()
        transition_cost = {
            "cpu_ms": round((time.process_time() - c0) * 1000, 2),
            "wall_ms": round((time.perf_counter() - w0) * 1000, 2),
            "exports_withheld": transition.applied.withheld,
            "events": transition.applied.events,
        }
        steady = await measure("one stale")
    finally:
        await store.close()
    return {
        "clusters": args.sweep_clusters,
        "sweep_nothing_stale": quiet,
        "sweep_transition": transition_cost,
        "sweep_one_stale_steady": steady,
    }


async def main_async(args: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"ttl_seconds": args.ttl, "rounds": args.rounds}
    with tempfile.TemporaryDirectory(prefix="mcsync-failover-") as tmp:
        if args.clusters:
            async with fresh_database(args.backend) as url:
                result["loss_and_return"] = await loss_and_return(args, url, Path(tmp))
        if args.sweep_clusters:
            async with fresh_database(args.backend) as url:
                result["sweep"] = await sweep_cpu(args, url)
    return result


def target(result: dict[str, Any]) -> dict[str, Any]:
    """The targets above, and whether this run met every one it measured."""
    met: list[bool] = []
    run = result.get("loss_and_return")
    if run:
        met += [
            run["loss_seconds_after_ttl"]["p99_ms"] < 2000,
            run["return_seconds_after_heartbeat"]["p99_ms"] < 1000,
            run["events_per_importer_loss"] == [run["victim_slices"]],
            run["events_per_importer_return"] == [run["victim_slices"]],
        ]
    sweep = result.get("sweep")
    if sweep:
        met += [
            sweep["sweep_nothing_stale"]["cpu_ms_median"] < 10,
            sweep["sweep_one_stale_steady"]["cpu_ms_median"] < 10,
        ]
    return {
        "loss_p99_ms_below": 2000,
        "return_p99_ms_below": 1000,
        "events_per_importing_cluster": "one per affected slice, each way",
        "sweep_cpu_ms_below": 10,
        "met": all(met),
    }


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--services", type=int, default=20)
    parser.add_argument("--endpoints", type=int, default=10)
    parser.add_argument("--ttl", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sweep-clusters", type=int, default=1000)
    parser.add_argument("--sweeps", type=int, default=200)
    args = parser.parse_args()
    if args.smoke:
        args.clusters, args.services, args.endpoints = 6, 3, 2
        args.rounds, args.sweep_clusters, args.sweeps = 1, 20, 10
    result = asyncio.run(main_async(args))
    result["target"] = target(result)
    write_result(
        NAME,
        args,
        {
            "clusters": args.clusters,
            "services": args.services,
            "endpoints": args.endpoints,
            **result,
        },
    )


if __name__ == "__main__":
    main()
