"""The hub's tables, as SQLAlchemy Core metadata (the migrations create the same schema).

Why the columns look the way they do:

* Key columns (`cluster_id`, `namespace`, `name`) use `COLLATE "C"` on PostgreSQL, so SQL
  orders them by code point exactly like Python's `sorted` and SQLite's BINARY collation.
  The precedence order of docs/reference.md#conflicts (`exportCreationTimestamp`, then `clusterId`)
  is then the same whichever database answers, and multi-key lock orders agree with Python's.
* Timestamps go through `UTCDateTime`: always stored as UTC, so SQLite's fixed-width text
  form sorts chronologically and PostgreSQL's `timestamptz` compares the same way.
* JSON lives in `Text` columns holding canonical (sorted keys, compact) JSON. The decided
  properties of docs/reference.md#conflicts get a column each so that SQL can compare them with the
  winner's (`first_value(...) OVER (PARTITION BY namespace, name ORDER BY ...)`) for fleet-wide
  questions without loading rows into Python.
* `service_imports` holds each key's derived ServiceImport. Writers lock a key, not its row
  (`hub.store.locks`); hubs before the advisory locks left empty lock rows (`created_at`
  NULL), which every reader treats as absent.
* `revision` is a one-row counter; `changes` the retained history that the watch feeds
  replay (docs/reference.md#change-feeds). Its `kind` says which feed a row belongs to:
  InternalServiceExport rows make the per-cluster export feed, ServiceImport and EndpointSliceExport
  rows the fleet-wide import feed (`hub.store.importfeed`).
* `endpoint_slices` holds each source cluster's EndpointSliceExports
  (docs/reference.md#import-path), keyed like an EndpointSlice (cluster, namespace, slice name),
  with the Service they belong to indexed beside the namespace, so that a key's slices are found by
  index when its export goes or its per-port cluster lists change.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    false,
)

from shared import properties

NAME_LENGTH = 63
# An EndpointSlice's name is a DNS-1123 subdomain, not a label.
SUBDOMAIN_LENGTH = 253


def key_string(length: int = NAME_LENGTH) -> String:
    """A name column ordered by code point on both databases."""
    return String(length).with_variant(String(length, collation="C"), "postgresql")  # type: ignore[return-value]


class UTCDateTime(TypeDecorator[datetime]):
    """An aware datetime stored as UTC; naive values are refused, results are aware UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise ValueError(f"timestamp must be an aware datetime, got {value!r}")
        utc = value.astimezone(UTC)
        # SQLite stores text; a naive UTC value gives one fixed-width, sortable form.
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]
        return value.astimezone(UTC)  # type: ignore[no-any-return]


def _property_column(prop: properties.ImportProperty) -> Column[Any]:
    """The `exports` column of a property, as its row declares it is stored."""
    kind = String(32) if prop.storage is properties.Storage.WORD else Text()
    return Column(prop.column, kind, nullable=prop.nullable)


metadata = MetaData()

clusters = Table(
    "clusters",
    metadata,
    Column("name", key_string(), primary_key=True),
    Column("labels", Text, nullable=False, server_default="{}"),
    # sha256 hex of the member token; the token itself is never stored
    # (docs/reference.md#credentials).
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_heartbeat", UTCDateTime, nullable=True),
    Column("agent_version", String(64), nullable=True),
    # What the agent's cluster imports, as its last heartbeat said (migration 0003).
    Column("imported_services", BigInteger, nullable=True),
    Column("imported_endpoints", BigInteger, nullable=True),
    # Set by the first step of a cluster delete: new writes are refused while its exports
    # are withdrawn batch by batch, and a crashed delete can be resumed.
    Column("deleting", Boolean, nullable=False, server_default=false()),
    # docs/reference.md#failover (migration 0004): the state transition the hub last recorded (set
    # by the staleness sweep, cleared by the next heartbeat; `hub.store.withdrawals`), the mass
    # withdrawal the agent holds (JSON of a WithdrawalHold, NULL: none) and an admin's
    # one-shot allowance for it.
    Column("stale", Boolean, nullable=False, server_default=false()),
    Column("withdrawal_held", Text, nullable=True),
    Column("withdrawal_allowed", Boolean, nullable=False, server_default=false()),
    # Migration 0010: the hub's own hold of a full-state sync that would withdraw most of
    # the cluster's exports (JSON of a WithdrawalHold, NULL: none; `hub.store.exports`).
    # The one allowance above lets either hold through.
    Column("sync_withdrawal_held", Text, nullable=True),
    # docs/reference.md#scope-and-limits (migration 0005): the MemberCluster's spec.exportNamespaces
    # and spec.importNamespaces, JSON lists of names and `*` globs; NULL: absent (all).
    Column("export_namespaces", Text, nullable=True),
    Column("import_namespaces", Text, nullable=True),
    # docs/reference.md#flags (migration 0006): the cluster's Valid=False ServiceExports as its
    # agent last reported them (JSON of an InvalidExports); NULL until it reports.
    Column("invalid_exports", Text, nullable=True),
    # docs/reference.md#cluster-properties (migration 0007): the cluster's ClusterProperty
    # objects as its agent last reported them (canonical JSON object); NULL until it reports.
    Column("properties", Text, nullable=True),
    # Migration 0009 (docs/reference.md#credentials): the member token a rotation replaced,
    # as a hash, accepted until it expires or the agent first uses the new one.
    Column("previous_token_hash", String(64), nullable=True, index=True),
    Column("previous_token_expires", UTCDateTime, nullable=True),
)

exports = Table(
    "exports",
    metadata,
    Column("cluster_id", key_string(), primary_key=True),
    Column("namespace", key_string(), primary_key=True),
    Column("name", key_string(), primary_key=True),
    Column("export_creation_timestamp", UTCDateTime, nullable=False),
    # Each property of the one table (`shared.properties`), canonical JSON or plain text,
    # comparable in SQL: the decided ones with the winner's, in the fleet-wide query.
    *(_property_column(p) for p in properties.PROPERTIES),
    # The whole spec as the member sent it (canonical JSON of the wire form).
    Column("spec", Text, nullable=False),
    Column("annotations", Text, nullable=False, server_default="{}"),
    # The Conflict condition (wire JSON), written with the row itself (the writer judges
    # before it inserts). Nullable only as the schema was first made: no row holds NULL.
    Column("condition", Text, nullable=True),
    Column("conflict", Boolean, nullable=False, server_default=false()),
    Column("conflict_reasons", Text, nullable=False, server_default=""),
    Column("resource_version", BigInteger, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    # The per-key precedence query of docs/reference.md#conflicts: WHERE namespace, name ORDER BY
    # ect, cluster.
    Index(
        "ix_exports_key_precedence",
        "namespace",
        "name",
        "export_creation_timestamp",
        "cluster_id",
    ),
    # Paged listing of all exports in key order (and its keyset continue condition).
    Index("ix_exports_key_cluster", "namespace", "name", "cluster_id", unique=True),
    Index("ix_exports_conflict_key", "conflict", "namespace", "name", "cluster_id"),
)

service_imports = Table(
    "service_imports",
    metadata,
    Column("namespace", key_string(), primary_key=True),
    Column("name", key_string(), primary_key=True),
    Column("spec", Text, nullable=False, server_default="{}"),
    Column("status", Text, nullable=False, server_default="{}"),
    Column("conflict", Boolean, nullable=False, server_default=false()),
    Column("resource_version", BigInteger, nullable=False, server_default="0"),
    Column("created_at", UTCDateTime, nullable=True),
    Index("ix_service_imports_conflict_key", "conflict", "namespace", "name"),
)

# One row (id = 1): the newest revision handed out, and the newest revision pruned
# from `changes` (a watch from below it is Gone).
revision = Table(
    "revision",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("value", BigInteger, nullable=False),
    Column("pruned_through", BigInteger, nullable=False, server_default="0"),
)

changes = Table(
    "changes",
    metadata,
    Column("revision", BigInteger, primary_key=True, autoincrement=False),
    Column("cluster_id", key_string(), nullable=False),
    Column("namespace", key_string(), nullable=False),
    # A record's name: an export's Service name, or an EndpointSlice's (a subdomain).
    Column("name", key_string(SUBDOMAIN_LENGTH), nullable=False),
    Column("type", String(8), nullable=False),
    Column("object", Text, nullable=False),
    Column("kind", String(32), nullable=False, server_default="InternalServiceExport"),
    # One cluster's export feed: WHERE cluster_id = ? AND kind = ? AND revision > ?.
    # ServiceImport rows carry cluster_id '' (they belong to no one cluster).
    Index("ix_changes_cluster_kind_revision", "cluster_id", "kind", "revision"),
    # A scoped import watch's replay (migration 0012): WHERE namespace IN (…) AND kind IN
    # (…) AND revision > ?, so that it reads its scope's rows, not the fleet's.
    Index("ix_changes_namespace_kind_revision", "namespace", "kind", "revision"),
)

endpoint_slices = Table(
    "endpoint_slices",
    metadata,
    Column("cluster_id", key_string(), primary_key=True),
    Column("namespace", key_string(), primary_key=True),
    Column("name", key_string(SUBDOMAIN_LENGTH), primary_key=True),
    # The Service the slice belongs to (its `kubernetes.io/service-name`).
    Column("service_name", key_string(), nullable=False),
    # The whole spec as stored (canonical JSON of the wire form, clusterId filled in).
    Column("spec", Text, nullable=False),
    Column("resource_version", BigInteger, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    # A key's slices (all, or one cluster's), and the fleet-wide listing in key order.
    Index(
        "ix_endpoint_slices_service",
        "namespace",
        "service_name",
        "cluster_id",
        "name",
        unique=True,
    ),
)

# docs/reference.md#failover (migration 0004): the exports whose EndpointSliceExports the import
# feed withholds while their cluster is Stale (`hub.store.withdrawals`). A row is written and
# removed only under its key's lock, in the transaction that records the feed's events.
endpoint_withdrawals = Table(
    "endpoint_withdrawals",
    metadata,
    Column("cluster_id", key_string(), primary_key=True),
    Column("namespace", key_string(), primary_key=True),
    Column("service_name", key_string(), primary_key=True),
)

# docs/reference.md#scope-and-limits quotas (migration 0005): each cluster's exports and
# EndpointSliceExports, kept by every write that creates or deletes one, in its transaction
# (`hub.store.usage`), so that a quota is checked without counting the cluster's rows. Updated only
# while the writer holds the revision counter, which orders every writer's updates of these rows.
cluster_usage = Table(
    "cluster_usage",
    metadata,
    Column("cluster_id", key_string(), primary_key=True),
    Column("exports", BigInteger, nullable=False, server_default="0"),
    Column("endpoint_slices", BigInteger, nullable=False, server_default="0"),
)

# docs/reference.md#cluster-selection (migration 0007): the keys whose winner names its
# importing clusters (`mcsync.io/import-clusters`, JSON of the selector), and each
# (cluster, key) such a selector leaves out (`hub.store.importselection`). Written under
# the selection lock (`importselection.lock_selection`) and the key's lock.
import_selectors = Table(
    "import_selectors",
    metadata,
    Column("namespace", key_string(), primary_key=True),
    Column("name", key_string(), primary_key=True),
    Column("selector", Text, nullable=False),
)

import_exclusions = Table(
    "import_exclusions",
    metadata,
    Column("cluster_id", key_string(), primary_key=True),
    Column("namespace", key_string(), primary_key=True),
    Column("name", key_string(), primary_key=True),
    Index("ix_import_exclusions_key", "namespace", "name", "cluster_id"),
)

# docs/reference.md#scope-and-limits (migration 0011): the namespaces each cluster's agent
# last reported it holds within its import scope (`hub.store.clusternamespaces`), one row
# a name, found by namespace for the importers view; and when it last reported (a cluster
# with no row here has not: the hub cannot say whether a namespace is there).
cluster_namespaces = Table(
    "cluster_namespaces",
    metadata,
    Column("cluster_id", key_string(), primary_key=True),
    Column("namespace", key_string(), primary_key=True),
    Index("ix_cluster_namespaces_namespace", "namespace", "cluster_id"),
)

namespace_reports = Table(
    "namespace_reports",
    metadata,
    Column("cluster_id", key_string(), primary_key=True),
    Column("reported_at", UTCDateTime, nullable=False),
)

REVISION_ROW_ID = 1
