"""The hub's own mass-withdrawal hold of a member's full-state sync (docs/reference.md#failover).

* `clusters.sync_withdrawal_held`: the JSON of the `WithdrawalHold` the hub recorded when
  a full-state sync of the cluster's exports would have withdrawn more than half of at
  least 10 stored exports (the sync was refused, 409); NULL when none is held. Kept
  apart from `withdrawal_held`, which each heartbeat replaces with what the agent holds:
  a beat must not clear the hub's own hold, nor the hub's hold the agent's.

Written out by hand, like 0001 to 0006.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("sync_withdrawal_held", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("sync_withdrawal_held")
