"""Makes the emulator fixtures available to the tests of this package."""

import pytest

from tests.kube.fixtures import (  # noqa: F401
    FIXTURE_NAMESPACES,
    kube_cluster,
    kube_cluster_factory,
)


@pytest.fixture
def kube_namespaces() -> tuple[str, ...]:
    """The namespaces the emulator's own tests write to, created as an operator would."""
    return (*FIXTURE_NAMESPACES, "team-a", "team-b", "other", "elsewhere")
