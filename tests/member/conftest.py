"""Fixtures of the member agent's tests. Append new fixtures below; keep imports minimal."""

import pytest

from tests.kube.fixtures import (  # noqa: F401
    FIXTURE_NAMESPACES,
    kube_cluster,
    kube_cluster_factory,
)

# Agent end-to-end support: agents as real `python -m member` processes (helpers in
# tests/member/agent_support.py) against the hub these tests do not test the process of:
# what `mcsync-hub serve` runs, served from the test process (tests/support/inprocess_hub.py).
# tests/e2e and tests/reliability keep the hub process.
from tests.member.agent_support import agent_factory  # noqa: F401
from tests.member.informer_support import stop  # noqa: F401
from tests.support.inprocess_hub import inprocess_backend_hub as backend_hub  # noqa: F401
from tests.support.inprocess_hub import inprocess_hub as hub_process  # noqa: F401


@pytest.fixture
def kube_namespaces() -> tuple[str, ...]:
    """Namespaces the emulated clusters of these tests start with; `mcsync` holds the
    Lease of the leader-election tests (content namespaces are created by seeding)."""
    return (*FIXTURE_NAMESPACES, "mcsync")


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment with no `MCSYNC_*` variable but the hub token (`t0ken`), so a test of
    `member.settings` sees only the flags it passes. Used by the settings test modules."""
    import os

    for name in list(os.environ):
        if name.startswith("MCSYNC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MCSYNC_HUB_TOKEN", "t0ken")
