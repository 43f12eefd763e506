"""The fleet benchmark's simulator processes: each plays a share of the simulated agents
(`bench.fleetsim.Fleet`), driven by the benchmark's main process (`bench.fleet_scale`).

Why several processes: an agent holds three sockets (its two watches and its kept
heartbeat connection), so one process cannot hold 10,000 agents under a per-process limit
of 20,000 descriptors; and every answer time a process measures includes its own event
loop's lag, which for thousands of agents in one loop is the simulator's, not the hub's.

The protocol is JSON lines: the main process writes `{"id", "method", "args"}` on the
process's stdin, the process answers `{"id", "result"}` or `{"id", "error"}` on its stdout,
in any order (a call runs as a task of its own: `export_all` goes on while `status` is
asked). Progress goes to stderr. When its stdin ends (the main process exited, however it
exited), the process closes its agents and exits: no simulator outlives its benchmark.

    python -m bench.fleetshard '<config JSON>'     # started by `Simulators.start`, not by hand
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.fleetsim import Fleet, Tier, Watch, progress
from bench.support import cpu_seconds

LINE_LIMIT = 1 << 26
"""Longest reply line: a process's heartbeat samples of a long run are a few MB."""


@dataclass(frozen=True)
class ShardConfig:
    """What one simulator process plays: agents `start`..`stop` of a fleet of `clusters`."""

    number: int
    start: int
    stop: int
    clusters: int
    urls: Sequence[str]
    heartbeat_interval: float
    connections: int  # client connections per replica for writes, this process's share
    register_concurrency: int

    def to_json(self) -> str:
        return json.dumps({**self.__dict__, "urls": list(self.urls)})

    @classmethod
    def from_json(cls, text: str) -> ShardConfig:
        return cls(**json.loads(text))


def split(clusters: int, processes: int) -> list[tuple[int, int]]:
    """Contiguous shares of `clusters` over `processes`, sizes differing by at most one."""
    return [(clusters * k // processes, clusters * (k + 1) // processes) for k in range(processes)]


# -- the simulator process ---------------------------------------------------------------


class Shard:
    """One process's share of the fleet and the calls the main process makes on it."""

    def __init__(self, config: ShardConfig) -> None:
        self.config = config
        args = argparse.Namespace(
            clusters=config.clusters,
            heartbeat_interval=config.heartbeat_interval,
            connections=config.connections,
        )
        self.tier = Tier(config.urls)
        self.fleet = Fleet(args, self.tier, range(config.start, config.stop))
        self._broken: list[Watch] = []
        self._at_kill: dict[str, int] = {}

    def calls(self) -> dict[str, Callable[..., Awaitable[Any]]]:
        return {
            "register": self.register,
            "start": self.start,
            "status": self.status,
            "export_all": self.export_all,
            "watch_for": self.watch_for,
            "put_change": self.put_change,
            "arrivals": self.arrivals,
            "replica_down": self.replica_down,
            "rejoined": self.rejoined,
            "beaten": self.beaten,
            "since_kill": self.since_kill,
            "heartbeats": self.heartbeats,
        }

    async def register(self, admin: str) -> None:
        await self.fleet.start_sessions()
        await self.fleet.register(admin, concurrency=self.config.register_concurrency)

    async def start(self) -> None:
        self.fleet.start_heartbeats()
        self.fleet.start_watches()

    async def status(self) -> dict[str, Any]:
        fleet, counters = self.fleet, self.fleet.counters
        return {
            "watches_open": fleet.watches_open(),
            "converged": fleet.converged(),
            "acknowledged": fleet.acknowledged,
            "deliveries_expected": sum(fleet.expected_slices(a) for a in fleet.agents),
            "watch_errors": counters.watch_errors,
            "refused_opens": counters.refused_opens,
            "gone": counters.gone,
            "withdrawn": counters.withdrawn,
            "connections": counters.connections,
            "requests": counters.requests,
            "heartbeats": len(counters.heartbeat_seconds),
            "heartbeat_errors": counters.heartbeat_errors,
            "cpu_seconds": cpu_seconds(),
        }

    async def export_all(self) -> float:
        return await self.fleet.export_all()

    async def watch_for(self, change: int) -> int:
        return self.fleet.watch_for(change)

    async def put_change(self, change: int) -> float:
        return await self.fleet.put_change(change)

    async def arrivals(self, change: int, done: bool = False) -> list[float | None]:
        return self.fleet.arrivals(change, done=done)

    async def replica_down(self, victim: int) -> int:
        """Replica `victim` is about to be killed: connect elsewhere from now on; answers
        how many of this share's watches are on it."""
        self.tier.down.add(victim)
        counters = self.fleet.counters
        self._broken = [
            w
            for a in self.fleet.agents
            for w in (a.exports, a.imports)
            if w is not None and w.replica == victim
        ]
        self._at_kill = {
            "gone": counters.gone,
            "withdrawn": counters.withdrawn,
            "opens": len(counters.watch_opens),
        }
        return len(self._broken)

    async def rejoined(self, killed: float) -> bool:
        """Every watch the kill broke is open again, opened after it."""
        return all(w.open and w.opened_at > killed for w in self._broken)

    async def beaten(self, killed: float) -> bool:
        """Every agent of this share had a heartbeat answered since the kill."""
        return all(a.last_answer > killed for a in self.fleet.agents)

    async def since_kill(self) -> dict[str, Any]:
        counters = self.fleet.counters
        return {
            "opens": counters.watch_opens[self._at_kill["opens"] :],
            "gone": counters.gone - self._at_kill["gone"],
            "withdrawn": counters.withdrawn - self._at_kill["withdrawn"],
        }

    async def heartbeats(self) -> dict[str, Any]:
        counters = self.fleet.counters
        return {
            "seconds": [round(s, 6) for s in counters.heartbeat_seconds],
            "at": [round(t, 6) for t in counters.heartbeat_at],
        }


async def serve(config: ShardConfig) -> None:
    """Answer the main process's calls until its stdin ends (module docstring)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    shard = Shard(config)
    calls = shard.calls()
    tasks: set[asyncio.Task[None]] = set()

    def answer(message: dict[str, Any]) -> None:
        sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
        sys.stdout.buffer.flush()

    async def run(ident: int, method: str, args: dict[str, Any]) -> None:
        try:
            answer({"id": ident, "result": await calls[method](**args)})
        except Exception as exc:  # the main process raises it, named
            answer({"id": ident, "error": f"{type(exc).__name__}: {exc}"})

    progress(f"simulator {config.number}: clusters {config.start}..{config.stop - 1}")
    try:
        while line := await reader.readline():
            call = json.loads(line)
            if call["method"] not in calls:
                answer({"id": call["id"], "error": f"no call {call['method']!r}"})
                continue
            task = asyncio.create_task(run(call["id"], call["method"], call.get("args", {})))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(shard.fleet.close(), 10)
        # Out now, whatever is left on the loop: a simulator must never outlive its
        # benchmark (seen: one waiting in the loop's shutdown after its stdin ended).
        sys.stdout.flush()
        os._exit(0)


# -- the main process's side -------------------------------------------------------------


class SimulatorProcess:
    """One simulator process, seen from the main process: `call` a method of its `Shard`."""

    def __init__(self, config: ShardConfig) -> None:
        self.config = config
        self._process: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next = 0
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.fleetshard", self.config.to_json(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    async def call(self, method: str, **args: Any) -> Any:
        assert self._process is not None and self._process.stdin is not None
        self._next += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[self._next] = future
        line = json.dumps({"id": self._next, "method": method, "args": args}).encode() + b"\n"
        self._process.stdin.write(line)
        await self._process.stdin.drain()
        return await future

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        while line := await self._process.stdout.readline():
            reply = json.loads(line)
            future = self._pending.pop(reply["id"], None)
            if future is None or future.done():
                continue
            if "error" in reply:
                future.set_exception(
                    RuntimeError(f"simulator {self.config.number}: {reply['error']}")
                )
            else:
                future.set_result(reply["result"])
        code = await self._process.wait()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(
                    RuntimeError(f"simulator {self.config.number} exited with code {code}")
                )
        self._pending.clear()

    async def stop(self) -> None:
        """End its stdin (it closes its agents and exits); killed if it has not within 30 s."""
        if self._process is None:
            return
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), 30)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            await self._process.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                await self._reader


class Simulators:
    """The simulator processes of one fleet run; `call` asks all of them at once."""

    def __init__(self, processes: Sequence[SimulatorProcess]) -> None:
        self.processes = list(processes)

    @classmethod
    async def start(
        cls,
        *,
        processes: int,
        clusters: int,
        urls: Sequence[str],
        heartbeat_interval: float,
        connections: int,
    ) -> Simulators:
        """`processes` simulators sharing `clusters` agents, and `connections` client
        connections per replica for writes, between them."""
        started = cls(
            [
                SimulatorProcess(
                    ShardConfig(
                        number=k,
                        start=start,
                        stop=stop,
                        clusters=clusters,
                        urls=list(urls),
                        heartbeat_interval=heartbeat_interval,
                        connections=max(8, connections // processes),
                        register_concurrency=max(8, 32 // processes),
                    )
                )
                for k, (start, stop) in enumerate(split(clusters, processes))
            ]
        )
        for process in started.processes:
            await process.start()
        return started

    def holding(self, cluster: int) -> SimulatorProcess:
        return next(p for p in self.processes if p.config.start <= cluster < p.config.stop)

    async def call(self, method: str, **args: Any) -> list[Any]:
        return list(await asyncio.gather(*(p.call(method, **args) for p in self.processes)))

    async def total(self, key: str) -> Any:
        """`key` of every process's status, summed."""
        return sum(s[key] for s in await self.call("status"))

    async def stop(self) -> None:
        await asyncio.gather(*(p.stop() for p in self.processes))


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m bench.fleetshard '<config JSON>' (bench.fleet_scale)")
    config = ShardConfig.from_json(sys.argv[1])
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(config))  # exits the process when its stdin ends


if __name__ == "__main__":
    main()
