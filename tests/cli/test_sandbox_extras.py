"""`mcsync sandbox` where only the CLI is installed (`pip install mcsync`, no extras)."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.conftest import REPO, clean_env


def test_sandbox_without_the_extras_says_what_to_install() -> None:
    """The CLI alone (`pip install mcsync`): one line naming the extras, exit 1."""
    script = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('kubernetes', 'uvicorn'):\n"
        "            raise ImportError(name + ' is not installed')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from cli.__main__ import main\n"
        "raise SystemExit(main(['sandbox']))\n")
    done = subprocess.run([sys.executable, "-c", script], env=clean_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: mcsync sandbox runs the hub and the agent, which need their extras: "
        "pip install 'mcsync[hub,agent]' (missing: uvicorn, kubernetes)"]
