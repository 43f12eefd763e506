"""Each benchmark still runs: `python -m bench.<name> --smoke`, and writes well-formed JSON.

Benchmarks are not tests: figures on a shared CI machine say nothing, so nothing here
checks a number against a target. What rots silently is the benchmark itself (an API it
calls changes, a key it reads disappears); a tiny run of each, as a real process the way
an operator runs it, catches that. PostgreSQL variants skip (or fail under CI=true)
without PostgreSQL, like the rest of the suite.

The cases live in four test files by what a benchmark drives (`test_smoke_hub.py`: the
hub alone; `test_smoke_agents.py`: agents too; `test_smoke_fleet.py`: selection and the
console; `test_smoke_fleet_scale.py`: the simulated fleet at 1,000 clusters, the longest),
so that pytest-xdist's `--dist loadfile` runs them on different workers: they mostly wait
on the processes they start, minutes in all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.browser.support import chromium_path
from tests.conftest import require_postgres

REPO_ROOT = Path(__file__).resolve().parents[2]

# benchmark → (back ends it runs on, keys its JSON must have)
BENCHMARKS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "put_throughput": (
        ("postgresql", "sqlite"),
        (
            "framework_ceiling",
            "hub_put",
            "database_ceiling",
            "ratio_to_framework_ceiling",
            "database_cpu_ms_per_put",
        ),
    ),
    "sync_throughput": (
        ("postgresql", "sqlite"),
        ("sync", "bulk_insert_ceiling", "ratio_create_to_bulk_insert"),
    ),
    "growth": (
        ("postgresql",),
        ("results", "p99_write_latency_growth", "p99_conflict_resolution_growth"),
    ),
    "e2e_agents": (
        ("postgresql",),
        ("outside_stopwatch", "agent_histogram", "restart_convergence_seconds"),
    ),
    "scale": (
        ("postgresql", "sqlite"),
        ("convergence_seconds", "hub_peak_rss_mib", "database_mib", "watches_not_converged"),
    ),
    "agent_scale": (
        ("postgresql",),
        ("cold_start", "restart_repair", "idle", "agent_peak_rss_mib"),
    ),
    "endpoint_churn": (
        ("postgresql",),
        ("answer_to_event", "put_latency", "hub_cpu_ms_per_change", "events_missing"),
    ),
    "slice_growth": (
        ("postgresql",),
        ("results", "p99_latency_growth", "hub_cpu_per_put_growth"),
    ),
    "import_fanout": (
        ("postgresql",),
        ("answer_to_last_watcher", "hub_rss_mib_watches_open", "hub_cpu_ms_per_event"),
    ),
    "import_latency": (
        ("postgresql",),
        ("source_change_to_last_cluster", "endpointslice_writes_per_cluster_per_change",
         "agents_import_writes_during_changes", "changes_not_landed_everywhere"),
    ),
    "import_scale": (
        ("postgresql",),
        ("cold_start", "restart_repair", "idle", "agent_peak_rss_mib"),
    ),
    "write_round_trips": (
        ("postgresql",),
        ("paths", "writes"),
    ),
    "import_replay": (
        ("postgresql", "sqlite"),
        ("from_before_fleet_changes", "from_after_fleet_changes",
         "burst_from_before_fleet_changes", "cpu_ratio_before_to_after"),
    ),
    "stalled_watches": (
        ("sqlite",),
        ("without_watches", "with_stalled_watches", "rss_kib_per_stalled_watch"),
    ),
    "failover": (
        ("sqlite",),
        ("loss_and_return", "sweep", "ttl_seconds"),
    ),
    "selection": (
        ("sqlite",),
        ("cold_cpu_ms", "warm_cpu_ms", "warm_cpu_ms_per_10000_imports"),
    ),
    "selection_fleet": (
        ("postgresql",),
        ("failover_seconds", "failback_seconds", "property_change_seconds",
         "writes_per_switch_per_importer", "what_was_real"),
    ),
    "fleet_scale": (
        ("postgresql",),
        ("units", "fleet"),
    ),
    "console": (
        ("sqlite",),
        ("overview_on_screen_ms", "search_ms", "live_change", "watches"),
    ),
    "startup": (
        ("sqlite",),
        ("import_hub_settings", "hub_help", "hub_bad_port", "agent_bad_flag", "hub_ready_line"),
    ),
}
GROUPS: dict[str, tuple[str, ...]] = {
    "hub": (
        "put_throughput", "sync_throughput", "growth", "scale", "endpoint_churn",
        "slice_growth", "import_fanout", "stalled_watches", "write_round_trips", "startup",
        "import_replay",
    ),
    "agents": ("e2e_agents", "agent_scale", "import_latency", "import_scale", "failover"),
    "fleet": ("selection", "selection_fleet", "console"),
    "fleet_scale": ("fleet_scale",),
}  # fmt: skip
# Longer than the default 300 s: the fleet's smoke is the fleet at 1,000 clusters, which
# shares CI's two cores with the rest of the suite.
TIMEOUT_SECONDS = {"fleet_scale": 900}
COMMON_KEYS = ("benchmark", "command", "machine", "smoke", "backend", "target")




def cases(group: str) -> list[tuple[str, str]]:
    """(benchmark, back end) of every case of `group`."""
    return [(name, backend) for name in GROUPS[group] for backend in BENCHMARKS[name][0]]


def case_ids(group: str) -> list[str]:
    return [f"{name}-{backend}" for name, backend in cases(group)]


def run_smoke(name: str, backend: str, tmp_path: Path) -> None:
    """`python -m bench.<name> --smoke` as an operator runs it; its JSON has every key."""
    if backend == "postgresql":
        require_postgres()
    if name == "console":
        chromium_path()  # skips without Debian's chromium, fails under CI
    output = tmp_path / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", "--smoke", "--backend", backend,
         "--output", str(output)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=TIMEOUT_SECONDS.get(name, 300),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(output.read_text())
    for key in (*COMMON_KEYS, *BENCHMARKS[name][1]):
        assert key in result, f"{name}: no {key!r} in {sorted(result)}"
    assert result["benchmark"] == name
    assert result["smoke"] is True
    assert result["backend"] == backend
    assert isinstance(result["target"]["met"], bool)
