"""Smoke run of the simulated fleet at 1,000 clusters (`tests/bench/smoke.py`): a file of
its own, so that it gets an xdist worker of its own from the start of the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import TIMEOUT_SECONDS, case_ids, cases, run_smoke


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT_SECONDS["fleet_scale"] + 60)  # the suite's 300 s is too short
@pytest.mark.parametrize(("name", "backend"), cases("fleet_scale"), ids=case_ids("fleet_scale"))
def test_benchmark_runs_and_writes_json(name: str, backend: str, tmp_path: Path) -> None:
    run_smoke(name, backend, tmp_path)
