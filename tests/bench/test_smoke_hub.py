"""Smoke runs of the benchmarks of the hub alone (`tests/bench/smoke.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import BENCHMARKS, GROUPS, case_ids, cases, run_smoke


@pytest.mark.slow
@pytest.mark.parametrize(("name", "backend"), cases("hub"), ids=case_ids("hub"))
def test_benchmark_runs_and_writes_json(name: str, backend: str, tmp_path: Path) -> None:
    run_smoke(name, backend, tmp_path)


def test_every_benchmark_is_smoked_in_exactly_one_file() -> None:
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(BENCHMARKS)
