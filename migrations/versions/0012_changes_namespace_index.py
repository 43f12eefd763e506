"""An index of the change history by namespace (docs/reference.md#scope-and-limits,
docs/reference.md#fleet-scale).

* `ix_changes_namespace_kind_revision` on `changes` (namespace, kind, revision): a cluster's
  import watch with `spec.importNamespaces` replays the history of its scope only
  (`hub.store.importfeed.ImportFeed.imports_since(scope=…)`: `namespace IN (…)`, each
  `*` glob a range of its literal prefix, `kind IN (…)`, `revision > ?`). Without it the
  read walks every change of the fleet after the watch's revision to find its scope's,
  on both databases; with it, each re-open reads about its scope's rows.

The write cost: every change row (export, import and slice alike) now updates one more
index, beside the primary key and `ix_changes_cluster_kind_revision`, in the same
transaction as the write it records; the history is bounded (`--history-limit`), so is
the index.
Creating it on PostgreSQL takes a lock that holds writes to `changes` for the length of the
build: a read of the bounded history, done once, as the hub migrates at start.

Written out by hand, like 0001 to 0011.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_changes_namespace_kind_revision", "changes", ["namespace", "kind", "revision"]
    )


def downgrade() -> None:
    op.drop_index("ix_changes_namespace_kind_revision", table_name="changes")
