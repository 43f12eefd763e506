"""Invalid ServiceExports as their agents report them (docs/reference.md#cli, `mcsync exports
--invalid`).

* `clusters.invalid_exports`: the JSON of the cluster's last reported `InvalidExports`
  (its `Valid=False` ServiceExports, at most 1,000 listed, and their total); NULL until
  its agent reports. Kept beside the cluster, not as exports: they never take part in
  conflicts or imports, and go with the cluster's record.

Written out by hand, like 0001 to 0005.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("invalid_exports", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("invalid_exports")
