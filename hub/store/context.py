"""What every part of the store shares: the engines, the back end, the settings, the notifier.

One explicit object passed to `ExportStore`, `ClusterStore`, … instead of module globals,
so that two `Store`s (two hub replicas in one test) never share state by accident. It is
also the one place the back end is looked at: `rows` (how batches of rows are written)
and `locks` (how the lock order is kept) are chosen from it when the context is built.

`StoreInstruments` is how the store reports the one thing only it can see — how long each
conflict resolution took and over how many exports — without knowing about Prometheus or
an exporter: the app hands it a tracer and a callback (`Store.instrument`); until then the
tracer is OpenTelemetry's no-op one and the callback does nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from opentelemetry import trace
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from hub.store.db import read_transaction, statements_on_their_own, write_transaction
from hub.store.errors import DatabaseUnavailable
from hub.store.fanout import reading_for_fanout
from hub.store.locks import KeyLocks, PostgresLocks, SQLiteLocks
from hub.store.notify import ChangeNotifier
from hub.store.primary import PrimaryWatch
from hub.store.rows import PostgresRows, RowWriter, SQLiteRows
from hub.store.usage import Quotas

RESOLUTION_SPAN = "conflict resolution"


def _ignore(seconds: float) -> None:
    return None


@dataclass
class StoreInstruments:
    """A tracer for the conflict-resolution span, sinks for its duration (seconds) and for
    the size of each group-committed batch of writes."""

    tracer: trace.Tracer = field(default_factory=trace.NoOpTracer)
    resolution_seconds: Callable[[float], None] = _ignore
    # How many single-export writes shared one transaction (`batch.WriteBatcher`).
    write_batch_size: Callable[[float], None] = _ignore

    @contextlib.contextmanager
    def resolving(self, keys: Sequence[tuple[str, str]]) -> Iterator[trace.Span]:
        """Span and time one write's conflict resolution over `keys` (docs/reference.md#conflicts).

        The caller adds what it learns inside (`mcsync.export_count`, the verdict); the
        duration is recorded whether the resolution succeeded or raised.
        """
        attributes: dict[str, str | int] = {"mcsync.key_count": len(keys)}
        if len(keys) == 1:
            namespace, name = keys[0]
            attributes["mcsync.key"] = f"{namespace}/{name}"
        started = time.perf_counter()
        try:
            with self.tracer.start_as_current_span(RESOLUTION_SPAN, attributes=attributes) as span:
                yield span
        finally:
            self.resolution_seconds(time.perf_counter() - started)


@dataclass
class StoreContext:
    engine: AsyncEngine
    reader: AsyncEngine  # the read view of `engine` (deferred snapshots on SQLite)
    backend: str  # "sqlite" or "postgresql"
    cluster_ttl: timedelta
    history_limit: int
    notifier: ChangeNotifier
    # The shared feed readers' own pool (`db.make_reader_engine`); None: they read through
    # `reader` like everyone else.
    feed_reader: AsyncEngine | None = None
    instruments: StoreInstruments = field(default_factory=StoreInstruments)
    # docs/reference.md#failover: above this fraction of Stale clusters the hub withholds no
    # endpoints.
    stale_panic_fraction: float = 0.5
    # PostgreSQL: whether there is a writable primary (`hub.store.primary`); None on SQLite.
    primary: PrimaryWatch | None = None
    # docs/reference.md#scope-and-limits: how many exports and slices one cluster may create
    # (`hub.store.usage`).
    quotas: Quotas = field(default_factory=Quotas)
    # What differs between the back ends, decided here once: how rows are written in
    # batches and how the lock order is kept. Writers use these and never ask which
    # database they are on.
    rows: RowWriter = field(init=False)
    locks: KeyLocks = field(init=False)

    def __post_init__(self) -> None:
        self.rows, self.locks = for_backend(self.backend)

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with self._primary_guard(), write_transaction(self.engine) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def statement(self) -> AsyncIterator[Any]:
        """PostgreSQL only: a connection on which each statement commits on its own
        (`db.statements_on_their_own`), for a write one statement says whole."""
        async with self._primary_guard(), statements_on_their_own(self.engine) as driver:
            yield driver

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read transaction; inside a shared feed reader's task, on the readers' own
        connections (`hub.store.fanout.reading_for_fanout`), so that a busy request pool
        never starves the reader that feeds every watch of the replica."""
        reader = self.reader
        if self.feed_reader is not None and reading_for_fanout():
            reader = self.feed_reader
        async with self._primary_guard(), read_transaction(reader) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def _primary_guard(self) -> AsyncIterator[None]:
        """Refuse while there is no writable primary (503 within a probe's wait, never a
        wait on a connect that may hang), and have the primary probed now when a
        transaction failed for a database reason (`hub.store.primary`)."""
        if self.primary is None:
            yield
            return
        await self.primary.check()
        try:
            yield
        except DatabaseUnavailable:
            self.primary.suspect()
            raise


def for_backend(backend: str) -> tuple[RowWriter, KeyLocks]:
    """The row writer and the locks of `backend` ("sqlite" or "postgresql"): the one place
    a back end's name is turned into its implementations."""
    if backend == "postgresql":
        return PostgresRows(), PostgresLocks()
    if backend == "sqlite":
        return SQLiteRows(), SQLiteLocks()
    raise ValueError(f"unknown database back end {backend!r}: expected sqlite or postgresql")
