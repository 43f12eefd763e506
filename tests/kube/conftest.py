"""Makes the emulator fixtures available to the tests of this package."""

from tests.kube.fixtures import kube_cluster, kube_cluster_factory  # noqa: F401
