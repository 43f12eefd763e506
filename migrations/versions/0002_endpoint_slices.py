"""EndpointSliceExports and the import feed's history (docs/reference.md#import-path,
#change-feeds).

* `endpoint_slices`: each source cluster's EndpointSliceExports, keyed like an
  EndpointSlice, with the Service they belong to indexed beside the namespace.
* `changes.kind`: which feed a history row belongs to. Every row written before this
  revision is an InternalServiceExport change, hence the server default.
* `changes.name` widens to 253 characters: an EndpointSlice's name is a DNS-1123
  subdomain.
* The per-cluster history index gains `kind`, so one cluster's export feed skips its
  slice changes by index rather than by filter.

Written out by hand, like 0001, so that it keeps doing exactly this when the tables
module moves on.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EXPORT_KIND = "InternalServiceExport"


def _key(length: int = 63) -> Any:
    # Code-point order on PostgreSQL, like SQLite's BINARY and Python's sorted().
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "endpoint_slices",
        sa.Column("cluster_id", _key(), primary_key=True),
        sa.Column("namespace", _key(), primary_key=True),
        sa.Column("name", _key(253), primary_key=True),
        sa.Column("service_name", _key(), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("resource_version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_endpoint_slices_service",
        "endpoint_slices",
        ["namespace", "service_name", "cluster_id", "name"],
        unique=True,
    )
    # SQLite: batch mode (env.py) rebuilds the table; PostgreSQL alters it in place (a
    # wider varchar and a column with a constant default rewrite nothing).
    with op.batch_alter_table("changes") as batch:
        batch.drop_index("ix_changes_cluster_revision")
        batch.add_column(
            sa.Column("kind", sa.String(32), nullable=False, server_default=EXPORT_KIND)
        )
        batch.alter_column("name", existing_type=_key(), type_=_key(253), existing_nullable=False)
        batch.create_index("ix_changes_cluster_kind_revision", ["cluster_id", "kind", "revision"])


def downgrade() -> None:
    # The import feed's rows have no place in the old schema: an export feed from before
    # this revision knows only export changes.
    op.execute(sa.text("DELETE FROM changes WHERE kind <> :kind").bindparams(kind=EXPORT_KIND))
    with op.batch_alter_table("changes") as batch:
        batch.drop_index("ix_changes_cluster_kind_revision")
        batch.alter_column("name", existing_type=_key(253), type_=_key(), existing_nullable=False)
        batch.drop_column("kind")
        batch.create_index("ix_changes_cluster_revision", ["cluster_id", "revision"])
    op.drop_index("ix_endpoint_slices_service", table_name="endpoint_slices")
    op.drop_table("endpoint_slices")
