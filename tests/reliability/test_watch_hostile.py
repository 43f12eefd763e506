"""Stalled watches must not hold the hub (docs/reference.md#change-feeds, #failover).

A member opens `WATCHES` watches of its cluster (`…/serviceexports?watch=true&
timeoutSeconds=600`) over raw sockets that never read a byte (each with a small receive
buffer, so the kernel absorbs little and the hub feels the backpressure at once), then
PUTs `PUTS` exports, each carrying `ANNOTATIONS` annotations of `ANNOTATION_CHARS`
characters, so every event is pushed at every stalled watch. The numbers are the original report's:
900 watches, 60 PUTs, 65,000-character annotations — four of them (about 0.26 MB of JSON
per event), not that report's fourteen: Kubernetes' 256 KiB bound on a record's
annotations (docs/reference.md#scope-and-limits) now refuses 0.9 MB of them with a 422.

What must hold, measured on the real `python -m hub serve` process:

* while the events are pushed at the stalled watches, its RSS grows by less than
  `RSS_GROWTH_LIMIT_MIB` (VmHWM after the PUTs against VmRSS once every watch was open, as
  the issue measured; the issue's target is 100 MiB, which quiet runs meet — 43 MiB on
  PostgreSQL, 82-95 MiB on SQLite, whose per-connection caches and thread pools take
  most of it, docs/reliability.md — and the bound has headroom for a loaded CI machine
  while staying an order of magnitude below the 1.7 GB it was): each event is encoded
  once and shared, a stalled watcher's buffer is bounded in bytes and it is ended
  (ERROR/410) when it overflows, and what the server holds for a socket that stopped
  draining is small (`hub.serve.HubServer`). What an open watch costs before any
  event (`rss_watches_open_mib` minus `rss_before_mib`, about 50 KB each) is reported
  too; the per-token limit bounds it;
* the PUT p99 under the stalled watches is below `PUT_SLOWDOWN_LIMIT` times its idle value
  (the issue's target is twice, which quiet runs meet: 127 vs 107 ms on SQLite, 213 vs
  101 ms on PostgreSQL; on a machine loaded by other work one run in four went past
  twice, so the test allows three times — still a fail for the 60-fold slowdown the bug
  caused). The idle value comes from as many PUTs of the same size before any watch
  was opened: a p99 of 60 is the slowest of them, and the slowest of 60 must not be
  compared with the slowest of fewer. The idle value
  counts as at least `PUT_FLOOR_MS`: on a shared 2-core machine one scheduling hiccup or
  full garbage collection costs 100-200 ms, whatever the hub does (before the fix the
  loaded p99 was 6.5 s against 56 ms idle);
* within `CPU_IDLE_WITHIN` s of the sockets closing, the hub is idle again (CPU time from
  /proc/<pid>/stat below `CPU_IDLE_SHARE` of one core over `CPU_WINDOW` s): nothing keeps
  draining buffers for clients that are gone (when it first went idle is reported, as
  `cpu_idle_after_leave_s`: closing 900 connections itself takes a moment);
* every stalled watch was ended as too slow (`mcsync_hub_watches_too_slow_total`);
* SIGTERM with `WATCHES` stalled watches open (and more huge events pushed at them) exits
  0 within the graceful-shutdown time (`GRACE_SECONDS`);
* one watch over the per-token limit (raised here to `WATCHES` so that every stalled watch
  is admitted and the byte bound does the work) is a 429 Status naming the limit.

Runs on SQLite and PostgreSQL. Deadlines are generous; the figures are printed.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.stalled_watches import stalled_watches as bench_stalled_watches
from tests.e2e.test_hub_process import HubProcess
from tests.hub.test_api_support import export_body
from tests.reliability.support import Figures, RecordProperty, hub_running

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.reliability]

ADMIN_TOKEN = "stalled-watch-admin-token-0123456789abcdef"
WATCHES = 900
PUTS = 60
IDLE_PUTS = PUTS  # the same number: each p99 is then the slowest of as many
ANNOTATIONS = 4  # 260,000 bytes and their keys: under Kubernetes' 262,144
ANNOTATION_CHARS = 65_000
GRACE_SECONDS = 10
RSS_GROWTH_LIMIT_MIB = 150
PUT_SLOWDOWN_LIMIT = 3
PUT_FLOOR_MS = 150
CPU_IDLE_WITHIN = 1.0
CPU_WINDOW = 1.0
CPU_IDLE_SHARE = 0.1
CLIENT_RCVBUF = 4096
DEADLINE = 300.0
PUT_TIMEOUT = 60.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


def annotations(seed: int) -> dict[str, str]:
    return {
        f"example.com/blob-{i}": (f"{seed:04d}-{i:02d}-" * ANNOTATION_CHARS)[:ANNOTATION_CHARS]
        for i in range(ANNOTATIONS)
    }


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (fields 14 and 15 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_kib(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    assert match is not None, status
    return int(match.group(1))


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def metric(text: str, name: str) -> float | None:
    """The sum of the samples of series `name` (None when the hub does not export it)."""
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{")
    ]
    return sum(values) if values else None


def stalled_watches(hub: HubProcess, token: str, count: int) -> AbstractContextManager[Any]:
    """`count` watches whose client never reads (`bench.stalled_watches`, one recipe)."""
    return bench_stalled_watches(hub.port, token, count, rcvbuf=CLIENT_RCVBUF)


async def timed_puts(
    client: httpx.AsyncClient, hub: HubProcess, token: str, names: list[str], seed: int
) -> list[float]:
    durations: list[float] = []
    for number, name in enumerate(names):
        body = export_body(
            "alpha", namespace="big", name=name, annotations=annotations(seed + number)
        )
        started = time.monotonic()
        answer = await client.put(
            f"{hub.url}/api/v1/clusters/alpha/serviceexports/big/{name}",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=PUT_TIMEOUT,
        )
        durations.append(time.monotonic() - started)
        assert answer.status_code in (200, 201), answer.text[:500]
    return durations


async def metrics_text(client: httpx.AsyncClient, hub: HubProcess) -> str:
    answer = await client.get(f"{hub.url}/metrics", timeout=PUT_TIMEOUT)
    assert answer.status_code == 200
    return answer.text


async def _scenario(hub: HubProcess, figures: Figures) -> None:
    deadline = time.monotonic() + DEADLINE
    pid = hub.process.pid
    async with httpx.AsyncClient(timeout=PUT_TIMEOUT) as client:
        registered = await client.post(
            f"{hub.url}/api/v1/clusters",
            json={"metadata": {"name": "alpha"}},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert registered.status_code == 201, registered.text
        token = registered.json()["token"]

        idle = await timed_puts(client, hub, token, [f"i{n}" for n in range(IDLE_PUTS)], 0)
        figures["put_p99_idle_ms"] = round(p99(idle) * 1000)
        rss_before = memory_kib(pid, "VmRSS")
        figures["rss_before_mib"] = round(rss_before / 1024)

        with stalled_watches(hub, token, WATCHES):

            async def all_open() -> bool:
                text = await metrics_text(client, hub)
                return (metric(text, "mcsync_hub_active_watches") or 0) >= WATCHES

            while not await all_open():
                assert time.monotonic() < deadline, "the stalled watches did not all open"
                await asyncio.sleep(0.2)

            rss_open = memory_kib(pid, "VmRSS")
            figures["rss_watches_open_mib"] = round(rss_open / 1024)
            # One more is over the per-token limit: 429 naming it.
            over = await client.get(
                f"{hub.url}/api/v1/clusters/alpha/serviceexports?watch=true&timeoutSeconds=1",
                headers={"Authorization": f"Bearer {token}"},
            )
            figures["watch_over_limit"] = over.status_code
            limit_named = over.status_code == 429 and str(WATCHES) in over.json()["message"]

            loaded = await timed_puts(client, hub, token, [f"l{n}" for n in range(PUTS)], 100)
            figures["put_p99_loaded_ms"] = round(p99(loaded) * 1000)
            figures["put_slowest_ms"] = [round(d * 1000) for d in sorted(loaded)[-5:]]
            figures["put_slowest_at"] = sorted(range(PUTS), key=lambda i: loaded[i])[-5:]
            figures["put_first15_mean_ms"] = round(sum(loaded[:15]) / 15 * 1000)
            peak = memory_kib(pid, "VmHWM")
            figures["rss_growth_mib"] = round((peak - rss_open) / 1024)
            text = await metrics_text(client, hub)
            ended = metric(text, "mcsync_hub_watches_too_slow_total")
            figures["watches_ended_too_slow"] = "absent" if ended is None else ended
        # Every socket is closed: the hub must go idle. First, how soon it does (the first
        # quarter second below CPU_IDLE_SHARE), then one window from CPU_IDLE_WITHIN on.
        closed_at = time.monotonic()
        idle_after: float | None = None
        last_cpu, last = cpu_seconds(pid), closed_at
        while idle_after is None and time.monotonic() < closed_at + 120:
            await asyncio.sleep(0.25)
            now_cpu, now = cpu_seconds(pid), time.monotonic()
            if (now_cpu - last_cpu) / (now - last) < CPU_IDLE_SHARE:
                idle_after = round(last - closed_at, 2)
            last_cpu, last = now_cpu, now
        figures["cpu_idle_after_leave_s"] = idle_after if idle_after is not None else ">120"
        await asyncio.sleep(max(0.0, closed_at + CPU_IDLE_WITHIN - time.monotonic()))
        before = cpu_seconds(pid)
        await asyncio.sleep(CPU_WINDOW)
        share = (cpu_seconds(pid) - before) / CPU_WINDOW
        figures["cpu_share_1s_after_leave"] = round(share, 3)
        text = await metrics_text(client, hub)
        figures["active_watches_after_leave"] = metric(text, "mcsync_hub_active_watches")

        # SIGTERM with the stalled watches open and huge events pushed at them.
        with stalled_watches(hub, token, WATCHES):
            while (
                metric(await metrics_text(client, hub), "mcsync_hub_active_watches") or 0
            ) < WATCHES:
                assert time.monotonic() < deadline, "the stalled watches did not all reopen"
                await asyncio.sleep(0.2)
            await timed_puts(client, hub, token, [f"s{n}" for n in range(5)], 500)
            sent = time.monotonic()
            hub.process.send_signal(signal.SIGTERM)
            try:
                code = await asyncio.to_thread(hub.process.wait, 120)
            except Exception:
                code = None
            figures["sigterm_exit_s"] = round(time.monotonic() - sent, 1)
            figures["sigterm_exit_code"] = code if code is not None else "none"

    failures = [] if limit_named else ["a watch over the limit is not a 429 naming it"]
    if figures["rss_growth_mib"] >= RSS_GROWTH_LIMIT_MIB:  # type: ignore[operator]
        failures.append("RSS growth")
    if p99(loaded) * 1000 >= PUT_SLOWDOWN_LIMIT * max(p99(idle) * 1000, PUT_FLOOR_MS):
        failures.append("PUT p99 under stalled watches")
    if share >= CPU_IDLE_SHARE:
        failures.append("CPU after the clients left")
    if ended != WATCHES:
        failures.append("every stalled watch ended as too slow")
    if code != 0 or figures["sigterm_exit_s"] > GRACE_SECONDS:  # type: ignore[operator]
        failures.append("SIGTERM exit")
    assert not failures, f"{failures}: {figures.line()}"


def test_stalled_watches_do_not_hold_memory_cpu_or_shutdown(
    database_url: str, tmp_path: Path, record_property: RecordProperty
) -> None:
    backend = database_url.split(":")[0]
    figures = Figures(f"stalled watches ({backend})", record_property)
    env = {
        "MCSYNC_ADMIN_TOKEN": ADMIN_TOKEN,
        "MCSYNC_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
        "MCSYNC_WATCH_LIMIT_PER_TOKEN": str(WATCHES),
        "MCSYNC_LOG_LEVEL": "warning",
    }
    with hub_running(database_url, tmp_path, env) as hub:
        try:
            asyncio.run(_scenario(hub, figures))
        finally:
            figures.report()
