"""Each of some modules imports first, with no other module of the project loaded.

A cycle among a package's modules that the order of imports hides fails only when the
wrong module happens to be imported first, with a partly initialised module. The check:
one fresh interpreter that, for each module in turn, forgets every module of the project
(the top-level packages named: `hub` by default; `shared` is below the hub and takes no part
in its cycles) and imports that one. Third-party
libraries stay loaded between modules: they take no part in the project's cycles, and
loading them once instead of once per module is what keeps the check to seconds (an
interpreter per module paid SQLAlchemy's, FastAPI's and pydantic's imports each time).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_IMPORT_EACH_FIRST = """
import importlib, sys, traceback
packages = tuple(sys.argv[1].split(","))
failed = 0
for name in sys.argv[2:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] in packages]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed += 1
        print(f"{name}: " + traceback.format_exc().strip().splitlines()[-1], file=sys.stderr)
sys.exit(1 if failed else 0)
"""


def failures_importing_each_first(
    names: Sequence[str], *, project_packages: Sequence[str] = ("hub",)
) -> str:
    """Each module of `names` imported first in one fresh interpreter (module doc); the
    modules that failed, one line each, or "" when none did."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH_FIRST, ",".join(project_packages), *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    return "" if done.returncode == 0 else done.stderr[-3000:] or f"exit {done.returncode}"
