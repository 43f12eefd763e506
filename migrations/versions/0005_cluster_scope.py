"""Trust boundaries (docs/reference.md#scope-and-limits): a member cluster's namespace scope and
quotas.

* `clusters.export_namespaces`, `clusters.import_namespaces`: the MemberCluster's
  `spec.exportNamespaces` / `spec.importNamespaces` (JSON lists of names and `*` globs),
  NULL when absent (every namespace).
* `cluster_usage`: how many exports and EndpointSliceExports each cluster holds, kept by
  every write in its own transaction, so that the quotas are checked without counting the
  cluster's rows on each write. Filled here from the rows already stored.

Written out by hand, like 0001 to 0004.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _key() -> sa.String:
    return sa.String(63).with_variant(sa.String(63, collation="C"), "postgresql")  # type: ignore[return-value]


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("export_namespaces", sa.Text(), nullable=True))
        batch.add_column(sa.Column("import_namespaces", sa.Text(), nullable=True))
    op.create_table(
        "cluster_usage",
        sa.Column("cluster_id", _key(), primary_key=True),
        sa.Column("exports", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("endpoint_slices", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.execute(
        "INSERT INTO cluster_usage (cluster_id, exports, endpoint_slices) "
        "SELECT c.name, "
        "(SELECT count(*) FROM exports e WHERE e.cluster_id = c.name), "
        "(SELECT count(*) FROM endpoint_slices s WHERE s.cluster_id = c.name) "
        "FROM clusters c"
    )


def downgrade() -> None:
    op.drop_table("cluster_usage")
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("import_namespaces")
        batch.drop_column("export_namespaces")
