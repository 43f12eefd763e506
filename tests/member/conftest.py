"""Fixtures of the member agent's tests. Append new fixtures below; keep imports minimal."""

from tests.kube.fixtures import kube_cluster, kube_cluster_factory  # noqa: F401

# Agent end-to-end support: a real hub process (`python -m hub serve`, SQLite in tmp_path)
# and agents as real `python -m member` processes; helpers in tests/member/agent_support.py.
from tests.member.agent_support import agent_factory, hub_process  # noqa: F401
from tests.member.informer_support import stop  # noqa: F401
