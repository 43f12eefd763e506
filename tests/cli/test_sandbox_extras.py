"""`mcsync sandbox` refusing to start: where only the CLI is installed (`pip install mcsync`,
no extras), and with a --hub-port another process holds."""

from __future__ import annotations

import socket
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


def test_a_hub_port_in_use_is_named_before_anything_starts() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "cli", "sandbox", "--hub-port", str(port)],
                              env=clean_env(), cwd=REPO, capture_output=True, text=True,
                              timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: --hub-port: 127.0.0.1:{port} is in use by another process: stop it, or "
        "choose another --hub-port (MCSYNC_HUB_PORT; 0 picks a free one)")
