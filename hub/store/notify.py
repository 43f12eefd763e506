"""Wake-ups for watchers: "the newest revision is now N", from this process or any replica.

Each commit that takes revisions calls `committed(newest)` after the commit returns, which
wakes the waiters of this process (all SQLite needs: one hub process owns the file).
On PostgreSQL the same transaction also ran `pg_notify('mcsync_changes', newest)`, which
the server delivers at commit to every listening connection; one dedicated asyncpg
connection per Store LISTENs and feeds what it hears into the same `committed`, so a
write on hub replica A wakes a watch held open on replica B.

The listener reconnects on its own when its connection drops, paced by `shared.backoff`
(full jitter, so the replicas of a hub that lost PostgreSQL together do not all knock at
the same instant when it returns). While it
is down a notification may be missed, so `wait` then polls the counter once a second;
and after every (re)connect the listener reads the counter once, catching up with any
commit it did not hear about.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from shared.backoff import Backoff, Retries

CHANNEL = "mcsync_changes"
_POLL_WHILE_DEAF_SECONDS = 1.0
_HEALTH_CHECK_SECONDS = 5.0
# Between attempts to (re)connect the listener: the first within 0.1 s, then up to 2 s
# (a promoted standby must be heard from within seconds, docs/reference.md#ha-postgresql; while the
# listener is down, waiters poll the counter anyway).
RECONNECT = Backoff(base=0.1, cap=2.0)

log = logging.getLogger(__name__)


class ChangeNotifier:
    """The newest revision this process knows of, and the waiters for a newer one."""

    def __init__(
        self,
        *,
        read_revision: Callable[[], Awaitable[int]],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._read_revision = read_revision
        self._sleep = sleep  # between reconnects; a test records the waits instead
        self._known = 0
        self._changed = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None
        self._listening = False
        self._conn: Any = None  # the LISTEN connection while there is one
        self._closed = False

    @property
    def known(self) -> int:
        return self._known

    @property
    def needs_polling(self) -> bool:
        """True while a PostgreSQL listener exists but is not connected."""
        return self._listener is not None and not self._listening

    def committed(self, revision: int) -> None:
        """Record that `revision` is committed and wake every waiter (never goes back)."""
        if revision > self._known:
            self._known = revision
            # Swap the event so that waiters woken now do not see a stale set flag later.
            event, self._changed = self._changed, asyncio.Event()
            event.set()

    async def wait(self, *, after: int, timeout: float) -> int:  # noqa: ASYNC109
        """The newest known revision once it is above `after`, or `after` on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            if self._known > after:
                return self._known
            remaining = deadline - loop.time()
            if remaining <= 0 or self._closed:
                return after
            event = self._changed
            slice_ = min(remaining, _POLL_WHILE_DEAF_SECONDS) if self.needs_polling else remaining
            try:
                await asyncio.wait_for(event.wait(), slice_)
            except TimeoutError:
                if self.needs_polling:
                    await self._poll()

    async def _poll(self) -> None:
        try:
            self.committed(await self._read_revision())
        except Exception as exc:  # the database is down too: keep waiting, try again later
            log.debug("revision poll failed: %s", exc)

    # --- PostgreSQL LISTEN ------------------------------------------------------------

    def start_listening(self, connect: str | Callable[[], Awaitable[Any]]) -> None:
        """Start the background LISTEN connection (PostgreSQL only), made by `connect`
        (the store's `PrimaryConnector`, which follows the primary) or from a DSN."""
        if self._listener is None:
            self._listener = asyncio.create_task(
                self._listen_forever(connect), name="mcsync-listen"
            )

    def drop(self) -> None:
        """Cut the LISTEN connection now (the primary was lost): the listener reconnects
        to whichever server is primary and catches up from the revision counter."""
        conn = self._conn
        if conn is not None and not conn.is_closed():
            conn.terminate()

    async def _listen_forever(self, connect: str | Callable[[], Awaitable[Any]]) -> None:
        import asyncpg

        async def open_connection() -> Any:
            if isinstance(connect, str):
                return await asyncpg.connect(connect, timeout=10)
            return await connect()

        retries = Retries(RECONNECT)
        while not self._closed:
            conn: Any = None
            lost = asyncio.Event()
            try:
                conn = self._conn = await open_connection()
                conn.add_termination_listener(lambda _c, lost=lost: lost.set())
                await conn.add_listener(CHANNEL, self._on_notify)
                self._listening = True
                retries.reset()
                # Anything committed before LISTEN took effect was not heard: catch up.
                await self._poll()
                while not lost.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lost.wait(), _HEALTH_CHECK_SECONDS)
                    if not lost.is_set():
                        # A half-open TCP connection would never say it was closed.
                        await conn.fetchval("SELECT 1", timeout=_HEALTH_CHECK_SECONDS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("change listener connection lost, reconnecting: %s", exc)
            finally:
                self._listening = False
                self._conn = None
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.close(), 5)
            if not self._closed:
                await self._sleep(retries.next())

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            revision = int(payload)
        except ValueError:
            log.warning("ignoring a malformed change notification: %r", payload)
            return
        self.committed(revision)

    async def close(self) -> None:
        self._closed = True
        # Wake waiters so that they return promptly instead of sleeping out their timeout.
        event, self._changed = self._changed, asyncio.Event()
        event.set()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
