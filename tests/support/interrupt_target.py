"""Run only by tests/support/test_interrupt.py, in a pytest of its own: the suite's hub
fixture (stopped by its finalizer) and an emulator process nobody stops (what a test that
forgot its process, or a finalizer that never ran, leaves: the backstop kills it), then a
wait to be interrupted. Not a `test_*` module: the suite itself never collects it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.kube.fixtures import start_emulator_process
from tests.member.agent_support import HubProcess, hub_process  # noqa: F401


def test_waits_to_be_interrupted(hub_process: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    start_emulator_process(tmp_path, "forgotten")
    Path(os.environ["MCSYNC_TEST_READY_FILE"]).write_text("ready\n")
    time.sleep(600)
