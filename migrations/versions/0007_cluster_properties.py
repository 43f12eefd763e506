"""Cluster properties (docs/reference.md#cluster-properties).

* `clusters.properties`: the cluster's ClusterProperty objects as its agent last reported
  them, canonical JSON of a name → value object; NULL until it reports. Kept beside the
  cluster (at most 64 small values), read with it; each change is also a row of the
  `changes` history (kind `ClusterProperties`), which the fleet-properties feed replays.

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


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("properties", sa.Text(), nullable=True))


def downgrade() -> None:
    # The feed's rows of properties changes go with the column they describe.
    op.execute(sa.text("DELETE FROM changes WHERE kind = 'ClusterProperties'"))
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("properties")
