"""Cluster selection (docs/reference.md#cluster-selection): the column of its export.

* `exports.cluster_selection`: the canonical JSON of the export's cluster selection (the
  three ServiceExport annotations as the agent parsed them: `clusterSelectors`,
  `clusterSelection`, `importClusters`, those present); NULL when the export has none,
  which every export stored before this revision has. A decided property of the Service
  like its type, so it gets a column the fleet-wide conflict query compares with the
  winner's, as 0001 gave the others. Filled from the stored spec on upgrade (which holds
  it when a downgrade dropped the column), so a downgrade and upgrade loses nothing.

Written out by hand, like 0001 to 0006.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# The export spec's fields that make the property, as the table of properties names them.
_FIELDS = ("clusterSelectors", "clusterSelection", "importClusters")


def upgrade() -> None:
    with op.batch_alter_table("exports") as batch:
        batch.add_column(sa.Column("cluster_selection", sa.Text(), nullable=True))
    _fill_from_specs()


def _fill_from_specs() -> None:
    """Fill the column from each export's stored spec. Only a hub that was downgraded past
    this revision and upgraded again holds such specs (older hubs refuse the fields), so
    the rows are found by text first and only those are read; nothing stored is lost."""
    exports = sa.table(
        "exports",
        sa.column("cluster_id", sa.String),
        sa.column("namespace", sa.String),
        sa.column("name", sa.String),
        sa.column("spec", sa.Text),
        sa.column("cluster_selection", sa.Text),
    )
    bind = op.get_bind()
    candidates = bind.execute(
        sa.select(exports.c.cluster_id, exports.c.namespace, exports.c.name, exports.c.spec).where(
            sa.or_(*(exports.c.spec.contains(f'"{field}":') for field in _FIELDS))
        )
    ).all()
    for cluster_id, namespace, name, text in candidates:
        spec = json.loads(text)
        value = {field: spec[field] for field in _FIELDS if spec.get(field) is not None}
        if not value:
            continue
        # The store's canonical JSON (sorted keys, compact, no ASCII escaping).
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        bind.execute(
            exports.update()
            .where(
                exports.c.cluster_id == cluster_id,
                exports.c.namespace == namespace,
                exports.c.name == name,
            )
            .values(cluster_selection=canonical)
        )


def downgrade() -> None:
    with op.batch_alter_table("exports") as batch:
        batch.drop_column("cluster_selection")
