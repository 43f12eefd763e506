"""Cluster properties (docs/reference.md#cluster-properties).

* `clusters.properties`: the cluster's ClusterProperty objects as its agent last reported
  them, canonical JSON of a name → value object; NULL until it reports. Kept beside the
  cluster (at most 64 small values), read with it; each change is also a row of the
  `changes` history (kind `ClusterProperties`), which the fleet-properties feed replays.
* `import_selectors`: the keys whose ServiceImport names its importers
  (`mcsync.io/import-clusters`, the winner's), with that selector, so that a cluster's
  properties change is judged against those keys alone, not every key.
* `import_exclusions`: (cluster, key) for each cluster such a key leaves out: the import
  list and watch of that cluster skip the key (`hub.store.importselection`).

Written out by hand, like 0001 to 0006.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _key(length: int = 63) -> sa.String:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")  # type: ignore[return-value]


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("properties", sa.Text(), nullable=True))
    op.create_table(
        "import_selectors",
        sa.Column("namespace", _key(), primary_key=True),
        sa.Column("name", _key(), primary_key=True),
        sa.Column("selector", sa.Text(), nullable=False),
    )
    op.create_table(
        "import_exclusions",
        sa.Column("cluster_id", _key(), primary_key=True),
        sa.Column("namespace", _key(), primary_key=True),
        sa.Column("name", _key(), primary_key=True),
    )
    op.create_index(
        "ix_import_exclusions_key", "import_exclusions", ["namespace", "name", "cluster_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_import_exclusions_key", table_name="import_exclusions")
    op.drop_table("import_exclusions")
    op.drop_table("import_selectors")
    # The feed's rows of properties changes go with the column they describe.
    op.execute(sa.text("DELETE FROM changes WHERE kind = 'ClusterProperties'"))
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("properties")
