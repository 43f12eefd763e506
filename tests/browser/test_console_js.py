"""The console's modules on their own, in Node.js's built-in test runner
(`tests/browser/js/*.test.mjs`, no npm package): the feed client's NDJSON reading and
resumption, the rows and search, the scope reading. Node.js is the machine's (scripts/test
installs npm, which brings it, when missing); without it this skips, under CI it fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

JS_TESTS = Path(__file__).with_name("js")


def test_console_modules_pass_their_node_tests() -> None:
    node = shutil.which("node")
    if node is None:
        message = "node is not installed (Debian package nodejs; scripts/test installs npm)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    files = sorted(str(path) for path in JS_TESTS.glob("*.test.mjs"))
    assert files, f"no tests in {JS_TESTS}"
    done = subprocess.run(
        [node, "--test", *files], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
