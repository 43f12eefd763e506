"""Fixtures of the reliability scenarios: the emulated cluster, hub and agent processes of
the agent's own end-to-end tests (tests/member/agent_support.py), reused, not copied."""

from tests.e2e.test_hub_process import hubs  # noqa: F401
from tests.kube.fixtures import kube_cluster, kube_cluster_factory  # noqa: F401
from tests.member.agent_support import agent_factory, hub_process  # noqa: F401
