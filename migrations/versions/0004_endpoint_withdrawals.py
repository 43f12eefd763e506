"""Failover and blast radius (docs/reference.md#failover): staleness is written down, and what it
withdraws.

* `clusters.stale`: the cluster's last state transition as the hub recorded it (set by the
  staleness sweep, cleared by the cluster's next heartbeat), so that each transition is
  acted on once whichever replica sees it first.
* `clusters.withdrawal_held`: the mass withdrawal the agent holds (JSON of a
  `WithdrawalHold`), NULL when none; `clusters.withdrawal_allowed`: an admin's one-shot
  allowance, handed to the agent with its next heartbeat that reports a hold.
* `endpoint_withdrawals`: the exports (cluster, namespace, Service) whose
  EndpointSliceExports the import feed withholds while their cluster is Stale.

Written out by hand, like 0001 to 0003.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _key() -> sa.String:
    return sa.String(63).with_variant(sa.String(63, collation="C"), "postgresql")  # type: ignore[return-value]


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(
            sa.Column("stale", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("withdrawal_held", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column(
                "withdrawal_allowed", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )
    op.create_table(
        "endpoint_withdrawals",
        sa.Column("cluster_id", _key(), primary_key=True),
        sa.Column("namespace", _key(), primary_key=True),
        sa.Column("service_name", _key(), primary_key=True),
    )


def downgrade() -> None:
    op.drop_table("endpoint_withdrawals")
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("withdrawal_allowed")
        batch.drop_column("withdrawal_held")
        batch.drop_column("stale")
