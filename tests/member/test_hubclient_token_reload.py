"""The agent's hub client takes a rotated member token from its file without a restart
(docs/reference.md#credentials), against a real hub process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from member.hubclient import HubClient, HubClientConfig, HubRejected
from member.metrics import AgentMetrics
from tests.member.agent_support import HubProcess, forget_logs, wait_for

pytestmark = pytest.mark.e2e


def secret_update(directory: Path, token: str) -> None:
    """Write `token` the way the kubelet updates a mounted Secret: a new directory, then
    the `..data` symlink swapped to it atomically (the `token` path follows it)."""
    fresh = directory / f"..data-{os.urandom(4).hex()}"
    fresh.mkdir()
    (fresh / "token").write_text(token)
    link = directory / "..data.tmp"
    link.symlink_to(fresh.name)
    os.replace(link, directory / "..data")
    if not (directory / "token").is_symlink():
        (directory / "token").symlink_to("..data/token")


def client(hub: HubProcess, cluster: str, token_file: Path, **config: object) -> HubClient:
    return HubClient(
        HubClientConfig(base_url=hub.url, cluster_id=cluster,
                        token=token_file.read_text().strip(), token_file=token_file,
                        **config),  # type: ignore[arg-type]
        metrics=AgentMetrics(registry=CollectorRegistry()).hub,
    )


@pytest.fixture
def no_grace_hub(tmp_path: Path) -> Iterator[HubProcess]:
    directory = tmp_path / "hub"
    directory.mkdir()
    hub = HubProcess(directory=directory, extra_args=["--token-grace-seconds", "0"])
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()
        forget_logs()


def rotate(hub: HubProcess, cluster: str) -> str:
    answer = hub.request("POST", f"/api/v1/clusters/{cluster}/token")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["token"])


def test_a_changed_secret_is_used_without_a_restart(
    hub_process: HubProcess, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    old = hub_process.register("east")
    secret_update(secret, old)
    with client(hub_process, "east", secret / "token") as hub:
        hub.heartbeat()
        new = rotate(hub_process, "east")
        hub.heartbeat()  # the old token is still good meanwhile
        secret_update(secret, new)

        def old_retired() -> bool:
            hub.heartbeat()  # every call succeeds, whichever token it carries
            beat = hub_process.request("POST", "/api/v1/clusters/east/heartbeat", token=old,
                                       json={"agentVersion": "0.1.0"})
            return beat.status_code == 401  # retired: the client used the new token

        wait_for(old_retired, what="the client to use the new token", timeout=30)
        hub.heartbeat()


def test_a_401_reads_the_file_again_and_retries(no_grace_hub: HubProcess, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    secret_update(secret, no_grace_hub.register("west"))
    # A client that looks at its file only every hour: the 401 alone must make it re-read.
    with client(no_grace_hub, "west", secret / "token") as hub:
        hub._token._check_seconds = 3600.0
        hub._token._next_check = float("inf")
        hub.heartbeat()
        secret_update(secret, rotate(no_grace_hub, "west"))  # the old one stops at once
        hub.heartbeat()
        hub.list_exports()
        stream = hub.watch_exports(resource_version="0", timeout_seconds=1)
        stream.close()
        # A token file that does not hold a valid token: the 401 reaches the caller.
        secret_update(secret, "not-a-token")
        no_grace_hub.request("POST", "/api/v1/clusters/west/token")
        with pytest.raises(HubRejected) as refused:
            hub.heartbeat()
        assert refused.value.code == 401
