"""A quiet agent's heartbeats reuse one kept-alive connection to the hub
(docs/reference.md#fleet-scale): the agent keeps an idle connection past its longest wait
between beats, and the hub keeps it longer still, so that the client closes first."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from hub.settings import HubSettings
from member.hubclient import HubClient, HubClientConfig, idle_connection_seconds
from member.settings import AgentSettings
from tests.member.agent_support import HubProcess

pytestmark = pytest.mark.e2e


def test_the_hub_keeps_an_idle_connection_longer_than_the_agent_does() -> None:
    agent_interval = AgentSettings.model_fields["heartbeat_interval"].default
    hub_idle = HubSettings.model_fields["keep_alive_timeout_seconds"].default
    # The agent's longest wait between beats is its interval plus 20 % jitter.
    assert idle_connection_seconds(agent_interval) > agent_interval * 1.2
    assert hub_idle > idle_connection_seconds(agent_interval)


def test_heartbeats_apart_longer_than_httpx_default_reuse_the_connection(
    hub_process: HubProcess,
) -> None:
    token = hub_process.register("east")
    local_ports: list[Any] = []

    def note(response: httpx.Response) -> None:
        stream = response.extensions["network_stream"]
        local_ports.append(stream.get_extra_info("client_addr"))

    config = HubClientConfig(
        base_url=hub_process.url,
        cluster_id="east",
        token=token,
        keepalive_expiry=idle_connection_seconds(5.0),
    )
    with HubClient(config) as hub:
        hub._http.event_hooks["response"].append(note)
        hub.heartbeat()
        time.sleep(6.5)  # past httpx's own 5 s keep-alive expiry
        hub.heartbeat()
    assert len(local_ports) == 2
    assert local_ports[0] == local_ports[1], "the second beat opened a new connection"
