"""Smoke runs of cluster selection and the console (`tests/bench/smoke.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import case_ids, cases, run_smoke


@pytest.mark.slow
@pytest.mark.parametrize(("name", "backend"), cases("fleet"), ids=case_ids("fleet"))
def test_benchmark_runs_and_writes_json(name: str, backend: str, tmp_path: Path) -> None:
    run_smoke(name, backend, tmp_path)
