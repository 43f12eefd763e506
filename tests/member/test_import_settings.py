"""Settings the import side brought: `--no-import`, and a Lease identity per process.

Two agents on one host (hostNetwork pods, two started by hand) used to share the host name
as their Lease identity, so each saw itself as the holder and both wrote. The default is
now the host name plus a random suffix per process, as client-go recommends.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from member.kube.leader import LeaderElector
from member.settings import parse_args
from tests.kube.fixtures import KubeCluster
from tests.kube.support import wait_for

BASE = ["--hub-url", "https://hub.example.com/", "--cluster-id", "east"]
pytestmark = pytest.mark.usefixtures("settings_env")


def test_default_identity_is_the_host_name_and_a_suffix_per_process() -> None:
    first, second = parse_args(BASE).identity, parse_args(BASE).identity
    assert first != second
    for identity in (first, second):
        host, _, suffix = identity.rpartition("_")
        assert host == socket.gethostname() and len(suffix) == 8


def test_an_explicit_identity_is_kept() -> None:
    assert parse_args([*BASE, "--identity", "replica-a"]).identity == "replica-a"


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [([], {}, False), (["--no-import"], {}, True), ([], {"MCSYNC_NO_IMPORT": "true"}, True)],
    ids=["importing by default", "--no-import", "MCSYNC_NO_IMPORT"],
)
def test_no_import(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str], expected: bool
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert parse_args([*BASE, *argv]).no_import is expected


def test_two_agents_on_one_host_never_both_lead(kube_cluster: KubeCluster) -> None:
    electors: list[LeaderElector] = []
    stop = threading.Event()
    threads = []
    for _ in range(2):
        elector = LeaderElector(
            api=kube_cluster.api_client(),
            namespace="default",
            name="mcsync-agent",
            identity=parse_args(BASE).identity,  # the default, on this one host
            lease_duration=2.0,
            renew_deadline=1.5,
            retry_period=0.2,
            on_started_leading=lambda: None,
            on_stopped_leading=lambda: None,
        )
        electors.append(elector)
        thread = threading.Thread(target=elector.run, args=(stop,), daemon=True)
        thread.start()
        threads.append(thread)
    try:
        wait_for(lambda: any(e.is_leader for e in electors), timeout=30)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            assert sum(e.is_leader for e in electors) <= 1
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
