"""The namespaces each cluster holds within its import scope (docs/reference.md#scope-and-limits).

* `cluster_namespaces`: (cluster, namespace) for each namespace the cluster's agent last
  reported it holds (exists, not being deleted, watched, not denied); indexed by
  namespace, so the importers view of one Service reads the clusters that hold its
  namespace, not every cluster's list.
* `namespace_reports`: when each cluster's agent last reported; a cluster with no row has
  not, and the hub then cannot say whether a namespace is there (`yes*`).

Written out by hand, like 0001 to 0010.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _key() -> sa.String:
    return sa.String(63).with_variant(sa.String(63, collation="C"), "postgresql")  # type: ignore[return-value]


def upgrade() -> None:
    op.create_table(
        "cluster_namespaces",
        sa.Column("cluster_id", _key(), primary_key=True),
        sa.Column("namespace", _key(), primary_key=True),
    )
    op.create_index(
        "ix_cluster_namespaces_namespace", "cluster_namespaces", ["namespace", "cluster_id"]
    )
    op.create_table(
        "namespace_reports",
        sa.Column("cluster_id", _key(), primary_key=True),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("namespace_reports")
    op.drop_index("ix_cluster_namespaces_namespace", table_name="cluster_namespaces")
    op.drop_table("cluster_namespaces")
