"""Under pytest-xdist, the longest test directories first.

`--dist loadfile` hands whole files to the workers in collection order, so files of
minutes that come last (tests/reliability sorts after tests/hub) leave one worker running
them while the other is idle. Starting with them lets the many short files fill in
around them. `scripts/test` passes `--no-loadscope-reorder`: by default xdist hands out the
files with the most tests first, whatever order they were collected in. The order within a
directory, and within a file, stays as written; without xdist nothing changes.
"""

from __future__ import annotations

import os

import pytest

# Longest first, by the sum of their tests' durations under xdist (tests/bench is one
# file of minutes, tests/reliability a few).
FIRST = ("bench", "reliability", "e2e", "member", "cli", "browser")


def _rank(item: pytest.Item) -> int:
    parts = item.nodeid.split("/")
    top = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    return FIRST.index(top) if top in FIRST else len(FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_rank)  # stable: each directory keeps its own order
