"""A PostgreSQL primary with a synchronous streaming standby, made from the installed server
binaries, and the moving address in front of it (docs/reference.md#ha-postgresql; no tests here).

* `PostgresPair` — `initdb`, a primary on a loopback port of its own, a standby made by
  `pg_basebackup -R -c fast`, `synchronous_standby_names` set once the standby streams;
  `kill_primary()` is `kill -9` of the primary's postmaster and every backend (a node that
  died), `promote()` is `pg_ctl promote`, and `rebuild_standby()` makes a new standby of
  the new primary on the dead one's port (`ready_for_failover()` does what is needed), so
  that one pair serves several failovers.
  The servers run as the `postgres` user (CI runs as root, and PostgreSQL refuses to);
  everything lives in one temporary directory, and `close()` stops both and removes it
  — the fixtures call it in a `finally`, whatever happened.
* `Forwarder` — a TCP forwarder on a loopback port standing for a CloudNativePG `-rw`
  Service, HAProxy or a VIP. `switch(port)` points it at the new primary and resets
  every open connection, as a moved Service does; `blackhole()` stops forwarding and
  leaves every connection open and silent, new ones too, as a node that vanished from
  the network does (no RST, no FIN): only timeouts can tell.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import asyncpg

USER = "postgres"
DATABASE = "mcsync"


def server_bin() -> Path | None:
    """The newest installed PostgreSQL server's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresPair:
    """See the module doc. `start()` then use; `close()` always."""

    def __init__(self, *, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.base = Path(tempfile.mkdtemp(prefix="mcsync-pgpair-"))
        self.ports = [free_port(), free_port()]
        self.primary = 0  # index into `ports` (and the data directories) of the primary
        self.primary_alive = False
        self.has_standby = False
        self._generation = 0
        self.dirs = [self.base / "a0", self.base / "b0"]
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            entry = pwd.getpwnam(USER)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)

    # --- running the server binaries -------------------------------------------------

    def _run(self, *args: str, timeout: float = 120) -> str:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", USER, "--", *command]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=self.base, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def _write(self, path: Path, text: str, *, append: bool = True) -> None:
        with path.open("a" if append else "w") as out:
            out.write(text)
        if self._as_postgres:
            entry = pwd.getpwnam(USER)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def url(self, index: int, database: str = DATABASE) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.ports[index]}/{database}"

    @property
    def standby(self) -> int:
        return 1 - self.primary

    def multi_host_url(self, database: str = DATABASE) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports)
        return f"postgresql://{USER}@{hosts}/{database}?target_session_attrs=read-write"

    def _start(self, index: int) -> None:
        log = self.dirs[index].parent / f"{self.dirs[index].name}.log"
        self._run("pg_ctl", "-D", str(self.dirs[index]), "-l", str(log), "-w", "-t", "60", "start")

    # --- the pair ------------------------------------------------------------------------

    def start(self) -> None:
        data = self.dirs[self.primary]
        self._run("initdb", "-D", str(data), "-U", USER, "--auth=trust", "-N", "-E", "UTF8")
        self._write(
            data / "postgresql.conf",
            f"\nport = {self.ports[self.primary]}\n"
            "listen_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.base}'\n"
            "wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\n"
            "max_connections = 120\nshared_buffers = 32MB\n"
            # Durability against kill -9 is the OS's page cache; fsync only slows CI.
            "fsync = off\nfull_page_writes = off\n"
            "wal_keep_size = 256MB\n",
        )
        self._start(self.primary)
        self.primary_alive = True
        asyncio.run(self._sql(self.primary, f"CREATE DATABASE {DATABASE}", database="postgres"))
        self.rebuild_standby()

    def rebuild_standby(self) -> None:
        """A fresh standby of the current primary on the other port, streaming, synchronous."""
        index = self.standby
        old = self.dirs[index]
        self._stop(index, mode="immediate")
        shutil.rmtree(old, ignore_errors=True)
        self._generation += 1
        self.dirs[index] = self.base / f"{'ab'[index]}{self._generation}"
        self._run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.ports[self.primary]),
            "-U", USER, "-D", str(self.dirs[index]), "-R", "-c", "fast", "-X", "stream",
        )  # fmt: skip
        self._write(self.dirs[index] / "postgresql.conf", f"\nport = {self.ports[index]}\n")
        self._start(index)
        asyncio.run(self._make_synchronous())
        self.has_standby = True

    def ready_for_failover(self) -> None:
        """A live primary and a synchronous standby again, whatever the last failover left
        (a primary killed and never promoted: the standby is promoted first)."""
        if not self.primary_alive:
            self.promote()
        if not self.has_standby:
            self.rebuild_standby()

    async def _make_synchronous(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            state = await self._sql(
                self.primary, "SELECT state FROM pg_stat_replication", database="postgres"
            )
            if state == "streaming":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby does not stream (state {state!r})")
            await asyncio.sleep(0.1)
        await self._sql(
            self.primary, "ALTER SYSTEM SET synchronous_standby_names = '*'", database="postgres"
        )
        await self._sql(self.primary, "SELECT pg_reload_conf()", database="postgres")
        while (
            await self._sql(
                self.primary, "SELECT sync_state FROM pg_stat_replication", database="postgres"
            )
            != "sync"
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the standby did not become synchronous")
            await asyncio.sleep(0.1)

    async def _sql(self, index: int, sql: str, *, database: str = DATABASE) -> Any:
        conn = await asyncpg.connect(self.url(index, database), timeout=10)
        try:
            return await conn.fetchval(sql)
        finally:
            await conn.close()

    async def create_database(self, name: str) -> None:
        await self._sql(self.primary, f"CREATE DATABASE {name}", database="postgres")

    def _pids(self, index: int) -> list[int]:
        """The postmaster of `index` and its children."""
        pid_file = self.dirs[index] / "postmaster.pid"
        try:
            postmaster = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        pids = [postmaster]
        for stat in glob.glob("/proc/[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == postmaster:
                    pids.append(int(Path(stat).parent.name))
        return pids

    def kill_primary(self) -> None:
        """kill -9 the primary's postmaster and every backend of it: the node died."""
        self.primary_alive = False
        for pid in self._pids(self.primary):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def promote(self) -> None:
        """`pg_ctl promote` the standby (waiting for it); it is the primary from now on."""
        self._run("pg_ctl", "-D", str(self.dirs[self.standby]), "-w", "-t", "60", "promote")
        self.primary = self.standby
        self.primary_alive, self.has_standby = True, False

    async def accepts_writes(self, *, database: str = DATABASE) -> bool:
        try:
            conn = await asyncpg.connect(self.url(self.primary, database), timeout=2)
        except (OSError, asyncpg.PostgresError):
            return False
        try:
            await conn.execute("CREATE TEMP TABLE probe (x int); INSERT INTO probe VALUES (1)")
            return True
        except asyncpg.PostgresError:
            return False
        finally:
            await conn.close()

    def _stop(self, index: int, *, mode: str) -> None:
        if (self.dirs[index] / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                self._run("pg_ctl", "-D", str(self.dirs[index]), "-m", mode, "-w", "stop")
            for pid in self._pids(index):  # a killed postmaster leaves its pid file
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        for index in (0, 1):
            self._stop(index, mode="immediate")
        shutil.rmtree(self.base, ignore_errors=True)


class Forwarder:
    """The moving address (see the module doc), on its own event loop in a thread so that
    the hub processes and a synchronous test can share it."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = free_port()
        self.blackholed = False
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: asyncio.Server | None = None
        self._call(self._start())

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.blackholed:
            self._conns.add((writer, None))  # accepted, never answered, never closed
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.transport.abort()  # the backend refuses: so does the address
            return
        pair = (writer, up_writer)
        self._conns.add(pair)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    if self.blackholed:  # packets dropped: hold them, say nothing, ever
                        await asyncio.Event().wait()
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if not self.blackholed:
                    dst.transport.abort()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._conns.discard(pair)

    async def _reset_all(self) -> None:
        for client, upstream in list(self._conns):
            client.transport.abort()
            if upstream is not None:
                upstream.transport.abort()
        self._conns.clear()

    def switch(self, port: int) -> None:
        """New connections go to `port`; the open ones are reset (a moved Service)."""

        async def switch() -> None:
            self.target = port
            if not self.blackholed:
                await self._reset_all()

        self._call(switch())

    def blackhole(self) -> None:
        """Stop forwarding without closing anything, old connections or new."""

        async def blackhole() -> None:
            self.blackholed = True

        self._call(blackhole())

    def heal(self) -> None:
        """Forward again (to the current target); the silent connections stay silent."""

        async def heal() -> None:
            self.blackholed = False

        self._call(heal())

    def close(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            self.blackholed = False
            await self._reset_all()
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self._call(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
