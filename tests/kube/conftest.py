"""Makes the emulator fixtures available to the tests of this package."""

from collections.abc import Iterator

import pytest

from tests.kube.fixtures import (  # noqa: F401
    FIXTURE_NAMESPACES,
    kube_cluster,
    kube_cluster_factory,
)
from tests.kube.support import BackgroundWatch


@pytest.fixture
def kube_namespaces() -> tuple[str, ...]:
    """The namespaces the emulator's own tests write to, created as an operator would."""
    return (*FIXTURE_NAMESPACES, "team-a", "team-b", "other", "elsewhere")


@pytest.fixture
def watches() -> Iterator[list[BackgroundWatch]]:
    """Background watches a test starts; all stopped after it."""
    started: list[BackgroundWatch] = []
    yield started
    for w in started:
        w.stop()
