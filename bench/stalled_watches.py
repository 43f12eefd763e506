"""What one stalled watch costs the hub: memory per watch under big events.

    python -m bench.stalled_watches [--watches 100] [--puts 14] [--backend sqlite]

The red team's load: 100 export-feed watches of one member (the default per-token cap)
over raw sockets that never read a byte, then PUTs of exports carrying the largest
annotations the hub accepts (Kubernetes' 256 KiB for keys and values together,
docs/reference.md#scope-and-limits; the red team's 14 x 65,000 characters are now a 422), so that
every event is pushed at every stalled watch.

How it is measured: the hub runs twice on fresh databases, once with no watch and once
with `--watches` stalled ones, and takes the same PUTs. Each run reports the hub's growth
(VmHWM after the PUTs against VmRSS once the watches were open, and VmRSS after);
per watch = (growth with watches - growth without) / watches, so the PUT path's own
memory is not charged to the watches. The target is at most 256 KiB per stalled watch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.support import (
    HubProcess,
    base_parser,
    export_wire,
    fresh_database_sync,
    write_result,
)

# 4 annotations of 65,000 characters: 260,000 bytes and their keys, under 262,144.
ANNOTATIONS = 4
ANNOTATION_CHARS = 65_000
CLIENT_RCVBUF = 4096
TARGET_KIB_PER_WATCH = 256


def big_annotations(seed: int) -> dict[str, str]:
    return {
        f"example.com/blob-{i}": (f"{seed:04d}-{i:02d}-" * ANNOTATION_CHARS)[:ANNOTATION_CHARS]
        for i in range(ANNOTATIONS)
    }


def export_body(name: str, seed: int) -> dict[str, Any]:
    body = export_wire("alpha", "big", name)
    body["metadata"]["annotations"] = big_annotations(seed)
    return body


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


@contextlib.contextmanager
def stalled_watches(
    port: int, token: str, count: int, *, rcvbuf: int = CLIENT_RCVBUF
) -> Iterator[list[socket.socket]]:
    """`count` watches of cluster `alpha` whose client never reads (each with a small
    receive buffer, so the hub feels the backpressure at once); every socket closed on the
    way out. Also the hostile-watch test's (tests/reliability/test_watch_hostile.py)."""
    request = (
        "GET /api/v1/clusters/alpha/serviceexports?watch=true&timeoutSeconds=600 HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sockets.append(sock)
            sock.connect(("127.0.0.1", port))
            sock.sendall(request)
        yield sockets
    finally:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00" * 2)
            sock.close()


async def active_watches(client: httpx.AsyncClient, hub: HubProcess) -> float:
    text = (await client.get(f"{hub.url}/metrics")).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("mcsync_hub_active_watches")
        and line[len("mcsync_hub_active_watches")] in " {"
    )


async def one_run(hub: HubProcess, *, watches: int, puts: int) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=120) as client:
        token = await hub.register(client, "alpha")
        headers = {"Authorization": f"Bearer {token}"}

        async def put(name: str, seed: int) -> None:
            answer = await client.put(
                f"{hub.url}/api/v1/clusters/alpha/serviceexports/big/{name}",
                json=export_body(name, seed),
                headers=headers,
            )
            if answer.status_code not in (200, 201):
                raise RuntimeError(f"PUT {name}: {answer.status_code} {answer.text[:300]}")

        for n in range(5):  # warm the PUT path before the baseline is taken
            await put(f"warm{n}", n)
        with stalled_watches(hub.port, token, watches):
            for _ in range(600):
                if await active_watches(client, hub) >= watches:
                    break
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError("the stalled watches did not all open")
            rss_open = memory_kib(hub.pid, "VmRSS")
            for n in range(puts):
                await put(f"load{n}", 100 + n)
            await asyncio.sleep(1.0)
            peak = memory_kib(hub.pid, "VmHWM")
            after = memory_kib(hub.pid, "VmRSS")
    return {
        "rss_watches_open_mib": round(rss_open / 1024, 1),
        "peak_growth_mib": round((peak - rss_open) / 1024, 1),
        "rss_growth_mib": round((after - rss_open) / 1024, 1),
    }


def measure(backend: str, *, watches: int, puts: int) -> dict[str, float]:
    with fresh_database_sync(backend) as url, tempfile.TemporaryDirectory() as tmp:
        with HubProcess(database_url=url, directory=Path(tmp)) as hub:
            return asyncio.run(one_run(hub, watches=watches, puts=puts))


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0] if __doc__ else "stalled watches")
    parser.add_argument("--watches", type=int, default=100)
    parser.add_argument("--puts", type=int, default=14)
    args: argparse.Namespace = parser.parse_args(argv)
    if args.smoke:
        args.watches, args.puts = 5, 2
    baseline = measure(args.backend, watches=0, puts=args.puts)
    stalled = measure(args.backend, watches=args.watches, puts=args.puts)

    def per_watch(key: str) -> float:
        return round((stalled[key] - baseline[key]) * 1024 / args.watches, 1)

    write_result(
        "stalled_watches",
        args,
        {
            "watches": args.watches,
            "puts": args.puts,
            "event_annotation_bytes": ANNOTATIONS * ANNOTATION_CHARS,
            "without_watches": baseline,
            "with_stalled_watches": stalled,
            "peak_kib_per_stalled_watch": per_watch("peak_growth_mib"),
            "rss_kib_per_stalled_watch": per_watch("rss_growth_mib"),
            "target": {
                "kib_per_stalled_watch_at_most": TARGET_KIB_PER_WATCH,
                "met": per_watch("peak_growth_mib") <= TARGET_KIB_PER_WATCH,
            },
        },
    )


if __name__ == "__main__":
    main()
