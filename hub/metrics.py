"""The hub's Prometheus metrics (docs/reference.md#observability), one `HubMetrics` (and registry)
per app.

Each app owns its own `CollectorRegistry` instead of using prometheus_client's global
one, so that two apps in one process (tests, or two replicas in a benchmark) never share
or double-register series; in a hub process there is one app, hence one registry. Labels
are deliberately coarse: the route *template* (never the path with names in it), the
method, the status code, a verdict, an event type. No label ever carries a token, a cluster
name or a service name, so the series count stays bounded however large the fleet grows.

Two kinds of numbers:

* counted as things happen — requests, watch events, database errors, export writes, the
  duration of each conflict resolution (reported by the store, `Store.instrument`);
* read when Prometheus scrapes (`refresh`, awaited by the `/metrics` route) — exports by
  verdict (one grouped count in the database, so every replica reports the same
  fleet-wide truth and no counter can drift from the rows), the pool's connections, and
  how far this replica's open watches are behind the newest committed revision.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from hub.store import DatabaseUnavailable, Store
from shared.metrics import REQUEST_DURATION_BUCKETS_SECONDS

# No `*_created` series: a timestamp per counter and histogram, doubling what every scrape
# carries and stores, for a fact (the process start) `process_start_time_seconds` has.
disable_created_metrics()

REQUEST_DURATION_METRIC = "mcsync_hub_request_duration_seconds"
ACTIVE_WATCHES_METRIC = "mcsync_hub_active_watches"
WATCH_EVENTS_METRIC = "mcsync_hub_watch_events"
WATCHES_TOO_SLOW_METRIC = "mcsync_hub_watches_too_slow"
DATABASE_ERRORS_METRIC = "mcsync_hub_database_errors"
EXPORT_WRITES_METRIC = "mcsync_hub_export_writes"
EXPORTS_METRIC = "mcsync_hub_exports"
ENDPOINT_SLICES_METRIC = "mcsync_hub_endpointslice_exports"
FEED_WATCHERS_METRIC = "mcsync_hub_feed_watchers"
FEED_ENCODED_METRIC = "mcsync_hub_feed_events_encoded"
FEED_FANNED_OUT_METRIC = "mcsync_hub_feed_events_fanned_out"
CONFLICT_RESOLUTION_METRIC = "mcsync_hub_conflict_resolution_duration_seconds"
FEED_LAG_METRIC = "mcsync_hub_feed_lag_revisions"
POOL_CONNECTIONS_METRIC = "mcsync_hub_db_pool_connections"
POOL_LIMIT_METRIC = "mcsync_hub_db_pool_max_connections"
# 1 while this replica has a writable database primary, 0 while it has none
# (docs/reference.md#ha-postgresql).
PRIMARY_WRITABLE_METRIC = "mcsync_hub_database_primary_writable"
WRITE_BATCH_METRIC = "mcsync_hub_write_batch_size"
# docs/reference.md#failover (`hub.store.withdrawals`), read from the database at scrape time.
STALE_PANIC_METRIC = "mcsync_hub_stale_panic"
STALE_CLUSTERS_METRIC = "mcsync_hub_stale_clusters"
WITHDRAWN_CLUSTERS_METRIC = "mcsync_hub_endpoints_withdrawn_clusters"
WITHDRAWN_SLICES_METRIC = "mcsync_hub_endpointslices_withdrawn"
# Single-export writes per group-committed transaction (hub/store/batch.py, at most 256).
WRITE_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)

VERDICT_CONFLICT = "conflict"
VERDICT_NO_CONFLICT = "no_conflict"

# One key's resolution is an indexed read and a pure judge: well under a millisecond up to
# a few, unless the key has thousands of exports or the read waits for I/O. The request
# buckets up to 2.5 s, with one finer bucket below them.
RESOLUTION_BUCKETS_SECONDS = (0.0005, *(b for b in REQUEST_DURATION_BUCKETS_SECONDS if b <= 2.5))


FEEDS = ("exports", "imports")
"""`feed` of the fan-out series: each cluster's export feed, and the fleet's import feed."""


class _FeedCollector(Collector):
    """The shared feed readers' work (`hub.store.fanout`), as read at the last refresh:
    how many watches each feed holds, how many changes it encoded (once each) and how many
    lines it handed to watches. Both feeds are always reported, 0 until used."""

    def __init__(self) -> None:
        self.values = {feed: (0, 0, 0) for feed in FEEDS}

    def collect(self) -> Iterator[Metric]:
        watchers = GaugeMetricFamily(
            FEED_WATCHERS_METRIC,
            "Watches subscribed to the feed's shared reader on this replica.",
            labels=["feed"],
        )
        encoded = CounterMetricFamily(
            FEED_ENCODED_METRIC,
            "Changes the feed's shared reader encoded for its watches: once each, however "
            "many watch it.",
            labels=["feed"],
        )
        fanned = CounterMetricFamily(
            FEED_FANNED_OUT_METRIC,
            "Encoded changes handed to a watch's buffer (events fanned out).",
            labels=["feed"],
        )
        for feed, (subscribed, encodings, deliveries) in self.values.items():
            watchers.add_metric([feed], subscribed)
            encoded.add_metric([feed], encodings)
            fanned.add_metric([feed], deliveries)
        yield from (watchers, encoded, fanned)


class HubMetrics:
    """The collectors the API updates, and the registry `/metrics` renders."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, memory, fds
        self.request_duration = Histogram(
            REQUEST_DURATION_METRIC,
            "Time to answer an API request, by route template, method and status code "
            "(a watch counts until its stream ends, under its route with a ?watch suffix).",
            ["method", "route", "code"],
            buckets=REQUEST_DURATION_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.active_watches = Gauge(
            ACTIVE_WATCHES_METRIC,
            "Watch streams currently open on this hub replica.",
            registry=self.registry,
        )
        self.watch_events = Counter(
            WATCH_EVENTS_METRIC,
            "Events sent on watch streams, by event type.",
            ["type"],
            registry=self.registry,
        )
        self.watches_too_slow = Counter(
            WATCHES_TOO_SLOW_METRIC,
            "Watch streams ended (ERROR event, 410) because their client fell further behind "
            "than the per-watch buffer holds (MCSYNC_WATCH_BUFFER_EVENTS / _BYTES).",
            registry=self.registry,
        )
        self.database_errors = Counter(
            DATABASE_ERRORS_METRIC,
            "Requests (and scrapes) that found the database unreachable (answered 503).",
            registry=self.registry,
        )
        self.export_writes = Counter(
            EXPORT_WRITES_METRIC,
            "Export writes accepted, by outcome (created, replaced, unchanged, withdrawn, "
            "annotated).",
            ["outcome"],
            registry=self.registry,
        )
        self.conflict_resolution = Histogram(
            CONFLICT_RESOLUTION_METRIC,
            "Time to resolve conflicts in one write transaction: read the written keys' "
            "exports in precedence order and judge them (docs/reference.md#conflicts).",
            buckets=RESOLUTION_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.write_batch_size = Histogram(
            WRITE_BATCH_METRIC,
            "Single-export writes (PUT, DELETE) committed together in one write transaction "
            "(group commit): 1 when writers come one at a time.",
            buckets=WRITE_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.exports = Gauge(
            EXPORTS_METRIC,
            "Exports in the fleet by Conflict verdict (conflict, no_conflict), counted in the "
            "database at scrape time: every replica reports the same fleet-wide numbers.",
            ["verdict"],
            registry=self.registry,
        )
        self.endpoint_slices = Gauge(
            ENDPOINT_SLICES_METRIC,
            "EndpointSliceExports stored for the fleet (docs/reference.md#import-path), counted in "
            "the database "
            "at scrape time like the exports; 0 until the first one.",
            registry=self.registry,
        )
        self.feed_lag = Gauge(
            FEED_LAG_METRIC,
            "Revisions between the newest commit this replica knows of and the position of "
            "its furthest-behind open watch (0 when every watch has caught up or none is "
            "open).",
            registry=self.registry,
        )
        self.pool_connections = Gauge(
            POOL_CONNECTIONS_METRIC,
            "Database connections of this replica's pool, by state (in_use, idle).",
            ["state"],
            registry=self.registry,
        )
        self.pool_limit = Gauge(
            POOL_LIMIT_METRIC,
            "The most connections this replica's pool opens (pool size plus overflow).",
            registry=self.registry,
        )
        self.primary_writable = Gauge(
            PRIMARY_WRITABLE_METRIC,
            "1 while this replica has a writable database primary (SQLite: the file is "
            "open), 0 while it has none: a failover in progress (docs/reference.md#ha-postgresql).",
            registry=self.registry,
        )
        self.stale_panic = Gauge(
            STALE_PANIC_METRIC,
            "1 while more than --stale-panic-fraction of the clusters that ever sent a "
            "heartbeat are Stale: the hub then withholds no endpoints "
            "(docs/reference.md#failover), else 0.",
            registry=self.registry,
        )
        self.stale_clusters = Gauge(
            STALE_CLUSTERS_METRIC,
            "Clusters recorded Stale (heartbeats stopped for longer than --cluster-ttl).",
            registry=self.registry,
        )
        self.withdrawn_clusters = Gauge(
            WITHDRAWN_CLUSTERS_METRIC,
            "Stale clusters whose endpoints the import feed withholds now "
            "(docs/reference.md#failover).",
            registry=self.registry,
        )
        self.withdrawn_slices = Gauge(
            WITHDRAWN_SLICES_METRIC,
            "EndpointSliceExports the import feed withholds now, their clusters being Stale.",
            registry=self.registry,
        )
        self.feeds = _FeedCollector()
        self.registry.register(self.feeds)

    async def refresh(self, store: Store | None, *, watch_positions: Iterable[int]) -> None:
        """Read the scrape-time numbers; call just before `render`.

        A database that does not answer counts as a database error and removes the verdict
        series for this scrape (a stale count would look current).
        """
        if store is None:
            self.exports.clear()
            self.primary_writable.set(0)
            return
        self.primary_writable.set(1 if store.primary_writable else 0)
        usage = store.pool_usage()
        self.pool_connections.labels("in_use").set(usage.in_use)
        self.pool_connections.labels("idle").set(usage.idle)
        self.pool_limit.set(usage.limit)
        # A watch may have read past what this replica was notified of yet (another
        # replica's commit, NOTIFY still in flight): that is no lag, not a negative one.
        newest = store.feed.known_revision()
        for feed, fanout in (("exports", store.feed.fanout), ("imports", store.import_feed.fanout)):
            self.feeds.values[feed] = (
                fanout.subscriber_count,
                fanout.encodings,
                fanout.deliveries,
            )
        self.feed_lag.set(max((max(0, newest - p) for p in watch_positions), default=0))
        try:
            counts = await store.exports.count_by_verdict()
            slices = await store.endpointslices.count()
            withdrawals = await store.withdrawals.summary()
        except DatabaseUnavailable:
            # (The slice count has no labels to remove: it keeps its last value.)
            self.database_errors.inc()
            self.exports.clear()
            return
        self.exports.labels(VERDICT_CONFLICT).set(counts[True])
        self.exports.labels(VERDICT_NO_CONFLICT).set(counts[False])
        self.endpoint_slices.set(slices)
        self.stale_panic.set(1 if withdrawals.panic else 0)
        self.stale_clusters.set(withdrawals.stale_clusters)
        self.withdrawn_clusters.set(withdrawals.clusters_withdrawn)
        self.withdrawn_slices.set(withdrawals.endpointslices_withdrawn)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
