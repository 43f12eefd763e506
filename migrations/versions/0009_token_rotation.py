"""Member-token rotation without downtime (docs/reference.md#credentials).

* `clusters.previous_token_hash`: the sha256 of the member token a rotation replaced,
  still accepted until `clusters.previous_token_expires` (the hub's
  `--token-grace-seconds` after the rotation) or until the agent first presents the new
  token, whichever comes first; NULL when there is none. Indexed: every member request
  that does not match a current token looks here.

Written out by hand, like 0001 to 0006.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("previous_token_hash", sa.String(64), nullable=True))
        batch.add_column(
            sa.Column("previous_token_expires", sa.DateTime(timezone=True), nullable=True)
        )
        batch.create_index("ix_clusters_previous_token_hash", ["previous_token_hash"])


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_index("ix_clusters_previous_token_hash")
        batch.drop_column("previous_token_expires")
        batch.drop_column("previous_token_hash")
