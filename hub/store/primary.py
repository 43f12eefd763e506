"""Whether this hub replica has a writable PostgreSQL primary, known all the time
(docs/reference.md#ha-postgresql).

When the primary of an HA pair dies and a standby is promoted, a hub replica must answer
503 with Retry-After while it has no primary, and take writes again by itself within
seconds of the promotion. Waiting for each request's own statement to fail does not do
that: a killed node sends no FIN, so a statement on a connection to it waits out
asyncpg's command timeout (a minute), a new connection to an address that drops packets
waits out the connect timeout, and every request queues behind them in the pool until the
client gives up ("requests hung until the client's 10 s timeout"). So:

* `PrimaryConnector` makes every connection the hub opens to PostgreSQL — the pool's,
  the LISTEN connection's and the probe's — from the same connect arguments (so the
  libpq host list and `target_session_attrs` apply to all three), with a connect timeout
  and TCP keepalives plus `TCP_USER_TIMEOUT` on the socket, so that the kernel itself
  ends a connection whose peer went silent, idle or not. It remembers the pool's live
  connections, so that they can all be cut at once.
* `PrimaryWatch` probes, once a second, on a connection of its own, whether the server
  answers and takes writes (`pg_is_in_recovery()`, `transaction_read_only`), each probe
  bounded by the database timeout. When a probe fails or lands on a read-only server
  (a standby, or a primary fenced read-only), the replica has no primary: `writable`
  goes false, every pooled connection is terminated (those checked out too, so that a
  request stuck on the dead primary fails at once instead of waiting out its timeout,
  and none of them is reused), and the `on_lost` callbacks run (the LISTEN connection
  reconnects). While it has none, `check()` has the probe run now and waits at most
  `interval` for its answer, then refuses the store transaction with
  DatabaseUnavailable (a 503, never a wait for a connect that may hang); the probe runs
  every `interval / 2` until a server answers as a writable primary again: then
  `writable` is true and requests go through on fresh connections.
* A request that fails for a database reason calls `suspect()`, which runs the next
  probe now instead of at the next tick: a clean close is found in one round trip.

Why a probe and not only errors: the probe is what decides *when writes may resume*. A
request that failed cannot tell whether the next connect will find the promoted standby,
and a gate without a probe could only re-open by letting requests through to hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hub.store.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

# True when the server cannot take writes: a standby in recovery, or a primary whose
# sessions are read-only (fenced, `default_transaction_read_only`).
PROBE_SQL = "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool"
DEFAULT_TIMEOUT_SECONDS = 5.0
APPLICATION_NAME = "mcsync-hub"
DEFAULT_INTERVAL_SECONDS = 1.0
# asyncpg's default for a statement without a timeout of its own: long enough for any
# legitimate statement; a silent peer is found by the probe and keepalives long before.
COMMAND_TIMEOUT_SECONDS = 60.0


def is_read_only(settings: Any) -> bool:
    """True when a connection's server said (ParameterStatus, no round trip) that it takes
    no writes: `in_hot_standby` (PostgreSQL 14 and later report it at connect and at
    promotion) or `default_transaction_read_only`."""
    return (
        getattr(settings, "in_hot_standby", "off") == "on"
        or getattr(settings, "default_transaction_read_only", "off") == "on"
    )


def keep_alive(conn: Any, *, timeout: float) -> None:
    """TCP keepalives and `TCP_USER_TIMEOUT` on `conn`'s socket: an idle connection to a
    node that vanished is found within about `timeout` seconds, and one with unanswered
    data in flight after `timeout` seconds. Where the platform lacks an option, the probe
    still finds the dead primary."""
    transport = getattr(conn, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    idle = max(1, math.ceil(timeout / 2))
    options = [
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPIDLE", None), idle),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPINTVL", None), 1),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPCNT", None), max(1, idle)),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_USER_TIMEOUT", None), int(timeout * 1000)),
    ]
    for level, option, value in options:
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(level, option, value)


def host_candidates(connect_kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """One set of connect arguments per host of a libpq host list (`host` and `port` are
    lists then), in the list's order; the arguments as given for one host."""
    hosts, ports = connect_kwargs.get("host"), connect_kwargs.get("port")
    if not isinstance(hosts, list | tuple):
        return [dict(connect_kwargs)]
    if not isinstance(ports, list | tuple):
        ports = [ports] * len(hosts)
    return [
        {**connect_kwargs, "host": host, "port": port}
        for host, port in zip(hosts, ports, strict=True)
    ]


class PrimaryConnector:
    """Opens the hub's PostgreSQL connections (see the module doc) and remembers the
    pool's, so that `terminate_all` can cut them when the primary is lost.

    A libpq host list is tried here, one host at a time, each with the whole connect
    timeout (as libpq's `connect_timeout` is per host): asyncpg's own `timeout` bounds its
    walk over ALL the hosts, so a first host that drops packets (a dead node's address)
    would use it up and the promoted second host would never be tried. The host that
    answered last is tried first, so after a failover connects do not wait on the dead one
    each time. A host is skipped when it cannot be reached, is not accepting connections
    yet, or does not match `target_session_attrs` (a standby); any other refusal (a wrong
    password) is the answer.
    """

    def __init__(self, connect_kwargs: dict[str, Any], *, timeout: float) -> None:
        self._candidates = host_candidates(connect_kwargs)
        self._first = 0  # index of the candidate that answered last
        self.timeout = timeout
        self._pooled: weakref.WeakSet[Any] = weakref.WeakSet()

    async def connect(self, *, pooled: bool = True, purpose: str = "") -> Any:
        """A connection to the first host that takes it; `pooled` ones are remembered for
        `terminate_all`. Its `application_name` says which of the hub's connections it is
        (`mcsync-hub`, `mcsync-hub listen`, `mcsync-hub probe`) in `pg_stat_activity`,
        unless the URL names one."""
        import asyncpg

        skip = (
            OSError,
            TimeoutError,
            asyncpg.TargetServerAttributeNotMatched,
            asyncpg.CannotConnectNowError,
            asyncpg.PostgresConnectionError,
        )
        count = len(self._candidates)
        order = [(self._first + i) % count for i in range(count)]
        problem: BaseException | None = None
        for index in order:
            try:
                candidate = self._candidates[index]
                settings = {
                    "application_name": f"{APPLICATION_NAME} {purpose}".strip(),
                    **candidate.get("server_settings", {}),
                }
                conn = await asyncpg.connect(
                    **{**candidate, "server_settings": settings},
                    timeout=self.timeout,
                    command_timeout=COMMAND_TIMEOUT_SECONDS,
                )
            except skip as exc:
                problem = exc
                continue
            self._first = index
            break
        else:
            assert problem is not None
            raise problem
        keep_alive(conn, timeout=self.timeout)
        if pooled:
            self._pooled.add(conn)
        return conn

    async def pool_connect(self) -> Any:
        """The pool's `async_creator`."""
        return await self.connect(pooled=True)

    def terminate_all(self) -> int:
        """Close every pooled connection now, checked out or idle (their statements fail,
        the pool discards them at their next use or checkout); how many were open."""
        count = 0
        for conn in list(self._pooled):
            if not conn.is_closed():
                conn.terminate()
                count += 1
        self._pooled = weakref.WeakSet()
        return count


@dataclass
class PrimaryState:
    writable: bool
    reason: str  # why not, while not writable (the 503's and /readyz's message)


class PrimaryWatch:
    """This replica's view of the primary (see the module doc). Start with `start()`."""

    def __init__(
        self,
        connector: PrimaryConnector,
        *,
        interval: float = DEFAULT_INTERVAL_SECONDS,
    ) -> None:
        self._connector = connector
        self.interval = interval
        self.state = PrimaryState(writable=True, reason="")
        self.losses = 0  # times the primary was lost (tests, diagnostics)
        self._on_lost: list[Callable[[], object]] = []
        self._probe_now = asyncio.Event()
        self._writable = asyncio.Event()  # set while writable: what `check` waits for
        self._writable.set()
        self._task: asyncio.Task[None] | None = None
        self._conn: Any = None
        self._closed = False

    @property
    def writable(self) -> bool:
        return self.state.writable

    def on_lost(self, callback: Callable[[], object]) -> None:
        """Call `callback()` each time the primary is lost (after the pool is cut)."""
        self._on_lost.append(callback)

    async def check(self) -> None:
        """Return when there is a writable primary; DatabaseUnavailable when, after a probe
        made now (at most `interval` of waiting), there still is none."""
        if self.state.writable:
            return
        self.suspect()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._writable.wait(), self.interval)
        if not self.state.writable:
            raise DatabaseUnavailable(
                f"database unavailable: no writable primary: {self.state.reason}"
            )

    def suspect(self) -> None:
        """A request failed for a database reason: probe now, not at the next tick."""
        self._probe_now.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="mcsync-primary-watch")

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self._drop_connection()

    async def probe(self) -> str | None:
        """One probe: None when a writable primary answered, else why not."""
        timeout = self._connector.timeout
        try:
            if self._conn is None or self._conn.is_closed():
                # Bounded per host by the connector (`timeout` each).
                self._conn = await self._connector.connect(pooled=False, purpose="probe")
            read_only = await self._conn.fetchval(PROBE_SQL, timeout=timeout)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            await self._drop_connection()
            return f"the database did not answer within {timeout:g} s"
        except Exception as exc:
            await self._drop_connection()
            text = str(exc).strip().splitlines()
            return text[0] if text else type(exc).__name__
        if read_only:
            await self._drop_connection()
            return "the server is read-only (a standby, or fenced)"
        return None

    async def _run(self) -> None:
        while not self._closed:
            problem = await self.probe()
            try:
                self._set(problem)
            except Exception:  # never let the watch die: the gate would stay as it is
                log.exception("primary watch: acting on a probe failed")
            wait = self.interval if problem is None else self.interval / 2
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._probe_now.wait(), wait)
            self._probe_now.clear()

    def _set(self, problem: str | None) -> None:
        writable = problem is None
        if writable == self.state.writable:
            if problem is not None:
                self.state.reason = problem
            return
        self.state = PrimaryState(writable=writable, reason=problem or "")
        if writable:
            self._writable.set()
            log.warning("a writable database primary answers again; taking writes")
        else:
            self._writable.clear()
            self.losses += 1
            cut = self._connector.terminate_all()
            log.warning(
                "no writable database primary (%s); answering 503, %d pooled connections cut",
                problem,
                cut,
            )
            for callback in self._on_lost:
                callback()

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()
