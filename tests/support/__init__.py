"""The test suite's shared infrastructure, loaded as pytest plugins by `tests/conftest.py`.

* `tests.support.databases` — the `backend` / `database_url` fixtures: SQLite and
  PostgreSQL, a migrated database per test made cheaply (a template file copied; one
  PostgreSQL database per worker process, reset between tests).
* `tests.support.processes` — every process a test starts runs in its own process group
  and is killed when its fixture ends, when pytest exits, and when pytest is interrupted
  (Ctrl-C, SIGTERM).

Test modules take fixtures by name; they import only plain helper functions from here.
"""
