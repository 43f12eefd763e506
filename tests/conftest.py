"""The root of the test suite: loads the shared infrastructure of `tests/support/` as plugins.

* `tests.support.databases`: `backend` and `database_url` (every database test runs on
  SQLite and PostgreSQL; see that module for how a migrated database per test stays cheap),
  `empty_database_url` and the `empty_database` marker for the migration tests.
* `tests.support.processes`: no process a test starts outlives the run (own process groups,
  killed at exit and when pytest is interrupted).
* `tests.support.ordering`: under pytest-xdist, the longest directories start first.

The plain helpers are re-exported here because test modules and bench/support.py import
them from `tests.conftest` (`make_database_url`, `postgres_admin_url`, `_admin`, ...).
"""

from __future__ import annotations

import pytest

# Before the import below, so that the plugins' asserts are rewritten like a conftest's.
pytest.register_assert_rewrite("tests.support")

from tests.support.databases import (  # noqa: E402
    BACKENDS,
    DEFAULT_POSTGRES_URL,
    _admin,
    _with_database,
    create_postgres_database,
    dispose_database_url,
    drop_postgres_database,
    make_database_url,
    postgres_admin_url,
    require_postgres,
)

pytest_plugins = [
    "tests.support.databases",
    "tests.support.ordering",
    "tests.support.processes",
]

__all__ = [
    "BACKENDS",
    "DEFAULT_POSTGRES_URL",
    "_admin",
    "_with_database",
    "create_postgres_database",
    "dispose_database_url",
    "drop_postgres_database",
    "make_database_url",
    "postgres_admin_url",
    "require_postgres",
]
