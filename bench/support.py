"""What every benchmark needs: fresh databases, a hub process, a load loop, and honest numbers.

* `fresh_database` creates a PostgreSQL database (the way `tests/conftest.py` does) or a
  SQLite file and removes it afterwards, so a benchmark never measures another's rows.
* `HubProcess` runs `python -m bench.hubserver`: the production app from `create_app`
  plus a bench-only no-op router, in its own process, so the hub's RSS and CPU can be read
  from `/proc` and the load generator does not share its interpreter.
* `closed_loop` is the load generator: N workers, each sending its next request as soon
  as the previous one answered, bounded in count AND in time.
* `percentiles` uses nearest rank on the raw samples (no histogram buckets to round by).
* `write_result` stamps every JSON file with the machine, the load average and the exact
  command, because a figure without them cannot be compared with anything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import math
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from hub.store import codec
from shared.models import EndpointSliceExport, InternalServiceExport

# The tests' own helpers: the same PostgreSQL (MCSYNC_TEST_POSTGRES_URL), the same
# database naming and child-process environment, one definition each.
from tests.conftest import _admin, _with_database, postgres_admin_url
from tests.member.agent_support import _env as child_env
from tests.member.agent_support import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO_ROOT / "bench" / "results"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


# -- command line and results ----------------------------------------------------------------


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def base_parser(description: str) -> argparse.ArgumentParser:
    """The flags every benchmark has: --smoke, --output, --backend.

    Also turns SIGTERM (an outer `timeout`, a CI cancel) into SystemExit, so the `finally`
    blocks run: the hub and agent processes stop and the benchmark's database is dropped
    instead of left behind on a shared server.
    """
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks it still runs")
    parser.add_argument("--output", type=Path, default=None, help="JSON file to write")
    parser.add_argument(
        "--backend", choices=("postgresql", "sqlite"), default="postgresql", help="database"
    )
    return parser


def machine() -> dict[str, Any]:
    mem_kb = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def output_path(name: str, args: argparse.Namespace) -> Path:
    if args.output is not None:
        return Path(args.output)
    suffix = "-smoke" if args.smoke else ""
    return RESULTS_DIR / f"{name}{suffix}.json"


def write_result(name: str, args: argparse.Namespace, result: dict[str, Any]) -> Path:
    """Write `result` (plus machine and command) as JSON; print a one-screen summary."""
    payload = {
        "benchmark": name,
        "command": " ".join(["python", "-m", f"bench.{name}", *sys.argv[1:]]),
        "smoke": bool(args.smoke),
        "backend": args.backend,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        **result,
    }
    path = output_path(name, args)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    print(json.dumps(payload, indent=2, sort_keys=True))
    print(f"wrote {path}")
    return path


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)


def percentiles(samples_seconds: Sequence[float]) -> dict[str, float | int]:
    """count, p50, p90, p99, max and mean in milliseconds (nearest rank)."""
    if not samples_seconds:
        return {"count": 0}
    ordered = sorted(samples_seconds)

    def rank(q: float) -> float:
        index = max(0, math.ceil(q * len(ordered)) - 1)
        return round(ordered[index] * 1000, 2)

    return {
        "count": len(ordered),
        "p50_ms": rank(0.50),
        "p90_ms": rank(0.90),
        "p99_ms": rank(0.99),
        "max_ms": round(ordered[-1] * 1000, 2),
        "mean_ms": round(sum(ordered) / len(ordered) * 1000, 2),
    }


# -- processes -------------------------------------------------------------------------------


def _proc_status(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size now."""
    return _proc_status(pid or os.getpid(), "VmRSS")


def peak_rss_bytes(pid: int | None = None) -> int:
    """Largest resident set size so far (VmHWM)."""
    return _proc_status(pid or os.getpid(), "VmHWM")


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time the process has used."""
    try:
        with open(f"/proc/{pid or os.getpid()}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def database_cpu_seconds() -> float | None:
    """CPU time used so far by this machine's PostgreSQL server, all its processes together
    (a backend that has exited counts in the postmaster's reaped-children time); None where
    no local server can be seen. The server is shared: read it on a quiet host.

    The hub's CPU alone does not say whether a target fits the machine: the database's
    work per export runs on the same cores."""
    total, seen = 0, False
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        head, _, rest = stat.rpartition(")")
        if head.partition("(")[2] != "postgres":
            continue
        fields = rest.split()
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
        seen = True
    return total / os.sysconf("SC_CLK_TCK") if seen else None


def mib(value: int) -> float:
    return round(value / 1024 / 1024, 1)


def stop_process(process: subprocess.Popen[bytes], *, timeout: float = 20.0) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


# -- databases -------------------------------------------------------------------------------


def asyncpg_url(url: str) -> str:
    """A plain postgresql:// URL for asyncpg (it refuses SQLAlchemy's driver suffix)."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def _new_postgres_database() -> tuple[str, str]:
    name = f"mcsync_bench_{uuid.uuid4().hex[:12]}"
    return name, _with_database(postgres_admin_url(), name)


@contextlib.asynccontextmanager
async def fresh_database(backend: str) -> AsyncIterator[str]:
    """A plain URL of a new, empty database of `backend`, removed afterwards."""
    if backend == "sqlite":
        with fresh_database_sync("sqlite") as url:
            yield url
        return
    name, url = _new_postgres_database()
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        yield url
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def fresh_database_sync(backend: str) -> Iterator[str]:
    """`fresh_database` for benchmarks that run no event loop of their own."""
    if backend == "sqlite":
        directory = Path(tempfile.mkdtemp(prefix="mcsync-bench-"))
        try:
            yield f"sqlite:///{directory / 'hub.db'}"
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return
    name, url = _new_postgres_database()
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield url
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def database_size_bytes(url: str) -> int:
    if url.startswith("sqlite"):
        path = Path(urlsplit(url).path)
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
    import asyncpg

    conn = await asyncpg.connect(asyncpg_url(url), timeout=10)
    try:
        return int(await conn.fetchval("SELECT pg_database_size(current_database())"))
    finally:
        await conn.close()


# -- exports as an agent sends them --------------------------------------------------------------


def export_wire(
    cluster: str,
    namespace: str,
    name: str,
    *,
    port: int = 80,
    created: datetime = T0,
    generation: int = 1,
    resource_version: str = "1",
) -> dict[str, Any]:
    """An InternalServiceExport in wire form, shaped like a typical agent's PUT body."""
    stamp = created.isoformat().replace("+00:00", "Z")
    return {
        "apiVersion": "mcsync.io/v1alpha1",
        "kind": "InternalServiceExport",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "port": port, "appProtocol": "http"},
                {"name": "metrics", "protocol": "TCP", "port": 9090},
            ],
            "type": "ClusterSetIP",
            "sessionAffinity": "None",
            "ipFamilies": ["IPv4"],
            "internalTrafficPolicy": "Cluster",
            "exportedLabels": {"app": name, "team": "payments"},
            "serviceReference": {
                "clusterId": cluster,
                "kind": "Service",
                "namespace": namespace,
                "name": name,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{cluster}/{namespace}/{name}")),
                "resourceVersion": resource_version,
                "generation": generation,
                "exportedSince": stamp,
                "exportCreationTimestamp": stamp,
            },
        },
    }


# The `exports` columns in table order, for raw writes of the same rows (the ceilings).
EXPORT_COLUMNS: tuple[str, ...] = (
    "cluster_id",
    "namespace",
    "name",
    *codec.SPEC_COLUMNS,
    "annotations",
    "condition",
    "conflict",
    "conflict_reasons",
    "resource_version",
    "created_at",
)


def raw_export_row(body: dict[str, Any] | bytes, *, now: datetime) -> tuple[Any, ...]:
    """The `exports` row (EXPORT_COLUMNS order) of an export in wire form, as the hub would
    store it before judging: what a raw database write of "the same rows" writes."""
    if isinstance(body, bytes):
        export = InternalServiceExport.model_validate_json(body)
    else:
        export = InternalServiceExport.model_validate(body)
    ref = export.spec.service_reference
    columns = codec.spec_columns(export.spec)
    spec_values = tuple(columns[c] for c in codec.SPEC_COLUMNS)
    return (ref.cluster_id, ref.namespace, ref.name, *spec_values, "{}", "{}", False, "", 1, now)


def created_at(index: int) -> datetime:
    return T0 + timedelta(seconds=index)


# -- the hub as a process ----------------------------------------------------------------------


def die_with_parent() -> None:
    """In the child, before it runs: on Linux, SIGKILL when the benchmark that started it
    dies, however it died. A hub left running by a killed benchmark loads every run after
    it on this machine's two cores and skews their figures. (The signal follows the thread
    that started the child: start hubs from the benchmark's main thread.)"""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class HubProcess:
    """`python -m bench.hubserver` on a loopback port over `database_url`."""

    database_url: str
    directory: Path
    extra_args: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    admin_token: str = field(default_factory=lambda: "admin-" + secrets.token_hex(16))
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def log_path(self) -> Path:
        return self.directory / "hub.log"

    def start(self, *, timeout: float = 90.0) -> HubProcess:
        cmd = [
            sys.executable,
            "-m",
            "bench.hubserver",
            "--port",
            str(self.port),
            "--database-url",
            self.database_url,
            *self.extra_args,
        ]
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                cmd,
                cwd=REPO_ROOT,
                env=child_env(MCSYNC_ADMIN_TOKEN=self.admin_token),
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"hub exited: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return self
            time.sleep(0.2)
        raise RuntimeError(f"hub not ready after {timeout:.0f}s: {self.log_tail()}")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    async def register(self, client: httpx.AsyncClient, cluster: str) -> str:
        """Register `cluster`; answers its member token."""
        answer = await client.post(
            f"{self.url}/api/v1/clusters",
            json={"metadata": {"name": cluster}},
            headers=self.admin_headers(),
        )
        if answer.status_code not in (200, 201):
            raise RuntimeError(f"register {cluster}: {answer.status_code} {answer.text}")
        token: str = answer.json()["token"]
        return token

    def register_all(self, clusters: Sequence[str], *, concurrency: int = 8) -> dict[str, str]:
        """Register every cluster (a few at a time); answers their tokens by name."""

        async def go() -> dict[str, str]:
            tokens: dict[str, str] = {}
            gate = asyncio.Semaphore(concurrency)
            async with httpx.AsyncClient(timeout=60) as client:

                async def one(name: str) -> None:
                    async with gate:
                        tokens[name] = await self.register(client, name)

                await asyncio.gather(*(one(name) for name in clusters))
            return tokens

        return asyncio.run(go())

    def __enter__(self) -> HubProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- load --------------------------------------------------------------------------------------


@dataclass
class LoadResult:
    latencies: list[float]
    seconds: float
    errors: int

    def summary(self) -> dict[str, Any]:
        done = len(self.latencies)
        return {
            "requests": done,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "per_second": round(done / self.seconds, 1) if self.seconds else None,
            "latency": percentiles(self.latencies),
        }


async def closed_loop(
    request: Callable[[int], Awaitable[bool]],
    *,
    concurrency: int,
    total: int,
    max_seconds: float,
) -> LoadResult:
    """`concurrency` workers send requests 0..total-1 back to back; stop at `max_seconds`.

    `request(i)` answers whether it succeeded; failures count as errors, and their
    latencies are left out (an error that answers fast must not improve the figures).
    """
    next_index = 0
    latencies: list[float] = []
    errors = 0
    started = time.perf_counter()
    deadline = started + max_seconds

    async def worker() -> None:
        nonlocal next_index, errors
        while next_index < total and time.perf_counter() < deadline:
            index = next_index
            next_index += 1
            t0 = time.perf_counter()
            try:
                ok = await request(index)
            except Exception:
                ok = False
            if ok:
                latencies.append(time.perf_counter() - t0)
            else:
                errors += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return LoadResult(latencies=latencies, seconds=time.perf_counter() - started, errors=errors)


def export_record(
    cluster: str, namespace: str, name: str, *, port: int = 80
) -> InternalServiceExport:
    """An export of `cluster`'s Service `namespace/name` with one port, as an agent sends it
    (for benchmarks that write through the store rather than over HTTP)."""
    return InternalServiceExport.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "ports": [{"name": "http", "protocol": "TCP", "port": port}],
                "type": "ClusterSetIP",
                "serviceReference": {
                    "clusterId": cluster,
                    "kind": "Service",
                    "namespace": namespace,
                    "name": name,
                    "uid": f"uid-{cluster}-{name}",
                    "resourceVersion": "1",
                    "generation": 1,
                    "exportedSince": "2026-01-01T00:00:00Z",
                    "exportCreationTimestamp": "2026-01-01T00:00:00Z",
                },
            },
        }
    )


def slice_record(namespace: str, service: str, address: str) -> EndpointSliceExport:
    """One EndpointSlice of `service` with one ready endpoint at `address`."""
    return EndpointSliceExport.model_validate(
        {
            "metadata": {"name": f"{service}-abcde", "namespace": namespace},
            "spec": {
                "serviceName": service,
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            },
        }
    )
