"""Initial schema: clusters, exports, service imports, the revision counter and history.

Written out by hand rather than imported from `hub.store.tables`, so that this revision
keeps creating exactly this schema when the tables module moves on; a test compares the
migrated schema with the current metadata.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _key() -> Any:
    # Code-point order on PostgreSQL, like SQLite's BINARY and Python's sorted().
    return sa.String(63).with_variant(sa.String(63, collation="C"), "postgresql")


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("name", _key(), primary_key=True),
        sa.Column("labels", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", _ts(), nullable=False),
        sa.Column("last_heartbeat", _ts(), nullable=True),
        sa.Column("agent_version", sa.String(64), nullable=True),
        sa.Column("deleting", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "exports",
        sa.Column("cluster_id", _key(), primary_key=True),
        sa.Column("namespace", _key(), primary_key=True),
        sa.Column("name", _key(), primary_key=True),
        sa.Column("export_creation_timestamp", _ts(), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("session_affinity", sa.String(32), nullable=False),
        sa.Column("session_affinity_config", sa.Text(), nullable=False),
        sa.Column("internal_traffic_policy", sa.String(32), nullable=True),
        sa.Column("traffic_distribution", sa.String(32), nullable=True),
        sa.Column("ip_families", sa.Text(), nullable=False),
        sa.Column("exported_labels", sa.Text(), nullable=False),
        sa.Column("exported_annotations", sa.Text(), nullable=False),
        sa.Column("ports", sa.Text(), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("annotations", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("condition", sa.Text(), nullable=True),
        sa.Column("conflict", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("conflict_reasons", sa.Text(), nullable=False, server_default=""),
        sa.Column("resource_version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_index(
        "ix_exports_key_precedence",
        "exports",
        ["namespace", "name", "export_creation_timestamp", "cluster_id"],
    )
    op.create_index(
        "ix_exports_key_cluster", "exports", ["namespace", "name", "cluster_id"], unique=True
    )
    op.create_index(
        "ix_exports_conflict_key", "exports", ["conflict", "namespace", "name", "cluster_id"]
    )
    op.create_table(
        "service_imports",
        sa.Column("namespace", _key(), primary_key=True),
        sa.Column("name", _key(), primary_key=True),
        sa.Column("spec", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("status", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("conflict", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("resource_version", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("created_at", _ts(), nullable=True),
    )
    op.create_index(
        "ix_service_imports_conflict_key", "service_imports", ["conflict", "namespace", "name"]
    )
    revision_table = op.create_table(
        "revision",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.Column("pruned_through", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.create_table(
        "changes",
        sa.Column("revision", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("cluster_id", _key(), nullable=False),
        sa.Column("namespace", _key(), nullable=False),
        sa.Column("name", _key(), nullable=False),
        sa.Column("type", sa.String(8), nullable=False),
        sa.Column("object", sa.Text(), nullable=False),
    )
    op.create_index("ix_changes_cluster_revision", "changes", ["cluster_id", "revision"])
    # The counter row every write increments; revision 0 means "nothing happened yet".
    assert revision_table is not None
    op.bulk_insert(revision_table, [{"id": 1, "value": 0, "pruned_through": 0}])


def downgrade() -> None:
    op.drop_index("ix_changes_cluster_revision", table_name="changes")
    op.drop_table("changes")
    op.drop_table("revision")
    op.drop_index("ix_service_imports_conflict_key", table_name="service_imports")
    op.drop_table("service_imports")
    op.drop_index("ix_exports_conflict_key", table_name="exports")
    op.drop_index("ix_exports_key_cluster", table_name="exports")
    op.drop_index("ix_exports_key_precedence", table_name="exports")
    op.drop_table("exports")
    op.drop_table("clusters")
