"""What each member cluster imports, as its agent's heartbeat says (docs/reference.md#import-path,
#rest-api).

* `clusters.imported_services`, `clusters.imported_endpoints`: the ServiceImports and
  endpoints the cluster's agent holds of the fleet's imports, so that `GET
  /api/v1/clusters` (and `mcsync clusters`) shows them beside the export counts. NULL for
  an agent that does not import, or has not said yet.

Written out by hand, like 0001 and 0002.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("imported_services", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("imported_endpoints", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("imported_endpoints")
        batch.drop_column("imported_services")
