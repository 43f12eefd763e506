"""What a hub or agent process costs before it does anything: refusing a bad flag, printing
`--help`, and a real start to the ready line.

    python -m bench.startup [--smoke] [--backend sqlite] [--repeat N]

Most of the suite's hub and agent processes are started only to see a bad flag or setting
refused (docs/reference.md#flags), so their import cost is the suite's cost. Each command
runs `--repeat` times; the figures are the medians of wall time and of the child's CPU
time (user + system: `getrusage` of the children; at the ready line, `/proc/<pid>/stat`).
`import_hub_settings` is `python -c "import hub.settings"`: what every process that only
validates settings pays.

Target: refusing a bad flag costs at most a third of the CPU of a real start to the ready
line (it validates and exits; it has no server, app or database to import).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.support import REPO_ROOT, base_parser, write_result
from tests.member.agent_support import _env as child_env
from tests.member.agent_support import free_port

READY = "mcsync hub listening on"


def _run(argv: list[str], *, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of `argv` to its exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        argv, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _ready(argv: list[str], *, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one start of `argv` to its ready line; then SIGTERM."""
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    wall = None
    for line in process.stdout:
        if READY in line:
            wall = time.perf_counter() - started
            break
    with open(f"/proc/{process.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    process.terminate()
    process.communicate(timeout=30)
    if wall is None:
        raise RuntimeError(f"{argv} exited {process.returncode} without its ready line")
    return wall, cpu


def _median(samples: list[tuple[float, float]]) -> dict[str, Any]:
    return {
        "wall_s": round(statistics.median(s[0] for s in samples), 3),
        "cpu_s": round(statistics.median(s[1] for s in samples), 3),
        "runs": len(samples),
    }


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.set_defaults(backend="sqlite")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each command")
    args = parser.parse_args()
    repeat = 1 if args.smoke else args.repeat
    python = sys.executable
    env = child_env()
    refusals = {
        "import_hub_settings": [python, "-c", "import hub.settings"],
        "hub_help": [python, "-m", "hub", "--help"],
        "hub_bad_port": [python, "-m", "hub", "serve", "--port", "bad"],
        "hub_bad_database_url": [python, "-m", "hub", "--database-url", "mysql://h/db"],
        "agent_bad_flag": [python, "-m", "member", "--hub-url", "not a url"],
    }
    result: dict[str, Any] = {}
    for name, argv in refusals.items():
        result[name] = _median([_run(argv, env=env) for _ in range(repeat)])
    directory = Path(tempfile.mkdtemp(prefix="mcsync-bench-startup-"))
    try:
        samples = []
        for index in range(repeat):
            argv = [
                python, "-m", "hub", "serve", "--port", str(free_port()),
                "--database-url", f"sqlite:///{directory}/hub{index}.db",
            ]  # fmt: skip
            samples.append(_ready(argv, env={**env, "MCSYNC_ADMIN_TOKEN": "x" * 32}))
        result["hub_ready_line"] = _median(samples)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    ratio = result["hub_bad_port"]["cpu_s"] / max(result["hub_ready_line"]["cpu_s"], 1e-9)
    result["target"] = {
        "refusal_cpu_over_ready_cpu_at_most": 0.33,
        "value": round(ratio, 3),
        "met": ratio <= 0.33,
    }
    write_result("startup", args, result)


if __name__ == "__main__":
    main()
