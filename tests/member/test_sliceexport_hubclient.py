"""The hub client's EndpointSliceExport calls against a real hub process
(docs/reference.md#rest-api)."""

from __future__ import annotations

import pytest

from member.export.slicewire import slice_export
from member.hubclient import HubClient, HubClientConfig, HubConflict, HubRejected
from shared.models import EndpointSliceExport
from tests.member.agent_support import HubProcess
from tests.member.test_hubclient import client, export

pytestmark = pytest.mark.e2e


def endpointslice(name: str, *, service: str = "web", rv: str = "1") -> EndpointSliceExport:
    return slice_export(
        cluster_id="east",
        obj={
            "metadata": {
                "name": name,
                "namespace": "shop",
                "resourceVersion": rv,
                "labels": {"kubernetes.io/service-name": service},
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
        },
    )


def test_put_list_delete_and_409_for_a_service_not_exported(hub_process: HubProcess) -> None:
    hub = client(hub_process, "east", hub_process.register("east"), page_size=2)
    with hub:
        with pytest.raises(HubConflict) as info:
            hub.put_endpointslice(endpointslice("web-1"))
        assert info.value.code == 409 and info.value.message

        hub.put_export(export("east"))
        for index in range(3):
            stored = hub.put_endpointslice(endpointslice(f"web-{index}", rv=str(10 + index)))
            assert stored.spec.source_resource_version == str(10 + index)

        seen: list[str] = []
        items, revision = hub.list_endpointslices(lambda s: seen.append(s.metadata.name))
        assert sorted(seen) == ["web-0", "web-1", "web-2"]  # three pages of two followed
        assert len(items) == 3 and int(revision) > 0

        last = hub.delete_endpointslice("shop", "web-0")
        assert last is not None and last.metadata.name == "web-0"
        assert hub.delete_endpointslice("shop", "web-0") is None  # 404: already gone

        # Withdrawing the export withdraws its slices (the agent relies on it).
        hub.delete_export("shop", "web")
        assert hub.list_endpointslices()[0] == []


def test_a_foreign_cluster_is_refused(hub_process: HubProcess) -> None:
    hub_process.register("east")
    west = client(hub_process, "west", hub_process.register("west"))
    with west, pytest.raises(HubRejected) as info:
        west.put_endpointslice(endpointslice("web-1"))  # the body says east
    assert info.value.code == 422
    # West's token reading east's slices: 403 (a member reads only its own).
    foreign = HubClient(
        HubClientConfig(base_url=hub_process.url, cluster_id="east", token=west.config.token)
    )
    with foreign, pytest.raises(HubRejected) as info:
        foreign.list_endpointslices()
    assert info.value.code == 403
