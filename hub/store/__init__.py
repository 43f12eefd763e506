"""The hub's storage: every transaction over the SQL database (docs/reference.md#conflicts,
#change-feeds, #scope-and-limits, #failover).

`Store.open(url)` gives one object per hub process with these faces:

* `exports`  — InternalServiceExport records; each write judges its key in SQL, in its
  own transaction (`writer`), and takes revisions for what changed (`feed`);
* `imports`  — the ServiceImport derived per key by those writes;
* `conflicts` — fleet-wide, which exports differ from their key's decided values, in one
  window-function query (`conflictquery`);
* `clusters` — registrations, member-token hashes, heartbeats and derived state;
* `endpointslices` — each source cluster's EndpointSliceExports (docs/reference.md#import-path);
* `import_feed` — what every cluster must import: the ServiceImport and slice changes
  in the history (`imports_since`) and the paged list (`list_imports`);
* `withdrawals` — failover (docs/reference.md#failover): the staleness sweep, and what the import
  feed withholds of Stale clusters;
* `feed`     — the change history, the wake-ups, and the one shared reader that feeds
  every watch of this replica (`fanout`).

The routes of `hub.api` call these and translate the exceptions of `hub.store.errors`
into HTTP answers; nothing here knows about HTTP. Migrations are separate
(`hub.store.migrate`): `open` neither creates nor upgrades the schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from opentelemetry import trace
from sqlalchemy import false, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from hub.dburl import backend_of
from hub.store import migrate
from hub.store.clusternamespaces import ClusterNamespacesStore
from hub.store.clusterproperties import ClusterPropertiesStore
from hub.store.clusters import ClusterStore
from hub.store.conflictquery import ConflictQuery
from hub.store.context import StoreContext
from hub.store.db import (
    connection,
    make_connector,
    make_engine,
    make_reader_engine,
    read_engine,
    translate_errors,
)
from hub.store.endpointslices import EndpointSliceStore
from hub.store.errors import (
    AlreadyExists,
    Conflict,
    DatabaseUnavailable,
    Gone,
    NotFound,
    StoreError,
)
from hub.store.exports import ExportStore
from hub.store.feed import Feed
from hub.store.importfeed import ImportFeed
from hub.store.imports import ImportStore
from hub.store.invalidexports import InvalidExportStore
from hub.store.notify import ChangeNotifier
from hub.store.primary import DEFAULT_TIMEOUT_SECONDS, PrimaryWatch
from hub.store.results import Page, PutResult
from hub.store.revisions import read_current_revision
from hub.store.tables import REVISION_ROW_ID
from hub.store.tables import revision as revision_table
from hub.store.usage import Quotas
from hub.store.withdrawals import Withdrawals, check_panic_fraction

__all__ = [
    "AlreadyExists",
    "ClusterStore",
    "Conflict",
    "DatabaseUnavailable",
    "EndpointSliceStore",
    "ExportStore",
    "Feed",
    "Gone",
    "ImportFeed",
    "ImportStore",
    "NotFound",
    "Page",
    "PoolUsage",
    "PutResult",
    "Store",
    "StoreError",
]


@dataclass(frozen=True)
class PoolUsage:
    """Connections of the pool: checked out, idle in the pool, and the most it may open."""

    in_use: int
    idle: int
    limit: int


class Store:
    """One hub replica's handle on the database. Create with `await Store.open(url)`."""

    exports: ExportStore
    imports: ImportStore
    conflicts: ConflictQuery
    clusters: ClusterStore
    endpointslices: EndpointSliceStore
    import_feed: ImportFeed
    feed: Feed
    withdrawals: Withdrawals
    invalid_exports: InvalidExportStore
    cluster_properties: ClusterPropertiesStore
    cluster_namespaces: ClusterNamespacesStore

    def __init__(self, *, url: str, ctx: StoreContext) -> None:
        self.url = url
        self._ctx = ctx
        self.exports = ExportStore(ctx)
        self.imports = ImportStore(ctx)
        self.conflicts = ConflictQuery(ctx)
        self.clusters = ClusterStore(ctx)
        self.endpointslices = EndpointSliceStore(ctx)
        self.import_feed = ImportFeed(ctx)
        self.feed = Feed(ctx)
        self.withdrawals = Withdrawals(ctx)
        self.invalid_exports = InvalidExportStore(ctx)
        self.cluster_properties = ClusterPropertiesStore(ctx)
        self.cluster_namespaces = ClusterNamespacesStore(ctx)

    @property
    def engine(self) -> AsyncEngine:
        return self._ctx.engine

    @property
    def feed_engine(self) -> AsyncEngine:
        """What the shared feed readers read through: their own small pool
        (`hub.store.db.make_reader_engine`)."""
        return self._ctx.feed_reader or self._ctx.reader

    @property
    def backend(self) -> str:
        """`sqlite` or `postgresql`."""
        return self._ctx.backend

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        cluster_ttl: timedelta = timedelta(seconds=90),
        history_limit: int = 100_000,
        pool_size: int = 10,
        stale_panic_fraction: float = 0.5,
        database_timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> Store:
        """Connect to the database at `url` (plain or async-driver URL).

        ValueError for an unsupported URL or setting; DatabaseUnavailable when the
        database does not answer. The schema must be migrated already
        (`hub.store.migrate.upgrade`); `schema_at_head()` tells. On PostgreSQL,
        `database_timeout` bounds connects, pings and the primary probe
        (`hub.store.primary`).
        """
        if history_limit < 1:
            raise ValueError(f"history_limit must be at least 1, got {history_limit}")
        if cluster_ttl <= timedelta(0):
            raise ValueError(f"cluster_ttl must be positive, got {cluster_ttl}")
        check_panic_fraction(stale_panic_fraction)
        if database_timeout <= 0:
            raise ValueError(f"database_timeout must be positive, got {database_timeout}")
        backend = backend_of(url)
        connector = None
        if backend == "postgresql":
            connector = make_connector(url, timeout=database_timeout)
        engine = make_engine(url, pool_size=pool_size, connector=connector)
        feed_reader = make_reader_engine(url, connector=connector)
        ctx: StoreContext

        async def read_revision() -> int:
            async with ctx.read() as conn:
                return await read_current_revision(conn)

        ctx = StoreContext(
            engine=engine,
            reader=read_engine(engine),
            feed_reader=feed_reader,
            backend=backend,
            cluster_ttl=cluster_ttl,
            history_limit=history_limit,
            notifier=ChangeNotifier(read_revision=read_revision),
            stale_panic_fraction=stale_panic_fraction,
            primary=PrimaryWatch(connector) if connector is not None else None,
        )
        store = cls(url=url, ctx=ctx)
        try:
            await store.ping()
        except BaseException:
            await engine.dispose()
            await feed_reader.dispose()
            raise
        try:
            ctx.notifier.committed(await read_revision())
        except StoreError:
            raise
        except Exception:  # schema not migrated yet: the first commit sets it
            pass
        if connector is not None and ctx.primary is not None:
            ctx.notifier.start_listening(lambda: connector.connect(pooled=False, purpose="listen"))
            ctx.primary.on_lost(ctx.notifier.drop)
            ctx.primary.start()
        return store

    async def close(self) -> None:
        """Finish queued writes, stop the feed reader and the listener, close the pool."""
        await self.exports.close()
        await self.endpointslices.close()
        await self.clusters.close()
        await self.feed.close()
        await self.import_feed.close()
        await self.cluster_properties.close()
        await self._ctx.notifier.close()
        if self._ctx.primary is not None:
            await self._ctx.primary.close()
        await self._ctx.engine.dispose()
        if self._ctx.feed_reader is not None:
            await self._ctx.feed_reader.dispose()

    def instrument(
        self,
        *,
        tracer: trace.Tracer,
        resolution_seconds: Callable[[float], None],
        write_batch_size: Callable[[float], None] | None = None,
    ) -> None:
        """Trace each conflict resolution with `tracer`, report its duration (seconds) and
        the number of writes each group-committed transaction carried."""
        self._ctx.instruments.tracer = tracer
        self._ctx.instruments.resolution_seconds = resolution_seconds
        if write_batch_size is not None:
            self._ctx.instruments.write_batch_size = write_batch_size

    def limit(self, quotas: Quotas) -> None:
        """Apply the hub's per-cluster quotas (docs/reference.md#scope-and-limits) to every write
        from now on."""
        self._ctx.quotas = quotas

    def pool_usage(self) -> PoolUsage:
        """The connection pool right now (no I/O: the pool's own counters)."""
        pool = self._ctx.engine.sync_engine.pool
        size = int(getattr(pool, "size", lambda: 0)())
        overflow_limit = int(getattr(pool, "_max_overflow", 0))
        in_use = int(getattr(pool, "checkedout", lambda: 0)())
        idle = int(getattr(pool, "checkedin", lambda: 0)())
        return PoolUsage(in_use=in_use, idle=idle, limit=size + max(overflow_limit, 0))

    @property
    def primary(self) -> PrimaryWatch | None:
        """Whether a writable primary answers (PostgreSQL; None on SQLite)."""
        return self._ctx.primary

    @property
    def primary_writable(self) -> bool:
        """False while this replica has no writable PostgreSQL primary
        (docs/reference.md#ha-postgresql)."""
        return self._ctx.primary is None or self._ctx.primary.writable

    async def ping(self) -> None:
        """Raise DatabaseUnavailable unless the database answers and takes writes."""
        if self._ctx.primary is not None:
            await self._ctx.primary.check()
        with translate_errors():
            async with connection(self._ctx.reader) as conn:
                await conn.execute(text("SELECT 1"))

    async def probe_write(self) -> None:
        """Raise DatabaseUnavailable unless the database takes a write now.

        A write that changes nothing (the revision counter set to itself, on no row) in a
        transaction that is rolled back: it needs what every write needs — a writer's
        lock on SQLite (refused for a file opened read-only), write permission on the
        tables and a transaction that may write on PostgreSQL — and it neither waits on
        the counter's row lock nor leaves anything behind. A server that answers reads
        but refuses this is not ready, whatever its error is called."""
        statement = (
            update(revision_table)
            .where(revision_table.c.id == REVISION_ROW_ID, false())
            .values(value=revision_table.c.value)
        )
        try:
            with translate_errors():
                async with connection(self._ctx.engine) as conn:
                    transaction = await conn.begin()
                    try:
                        await conn.execute(statement)
                    finally:
                        await transaction.rollback()
        except DatabaseUnavailable:
            raise
        except DBAPIError as exc:
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
            raise DatabaseUnavailable(f"the database refuses writes: {reason}") from exc

    async def schema_at_head(self) -> bool:
        """True when the database's schema is at the newest migration."""
        with translate_errors():
            async with connection(self._ctx.reader) as conn:
                current = await conn.run_sync(migrate.current_of_connection)
        return current == migrate.head()
