"""The EndpointSliceExport wire model refuses what Kubernetes would refuse
(docs/reference.md#import-path, #scope-and-limits): each bad slice is a validation error naming the
field, so the hub answers a 422 that says what to fix instead of storing a slice no cluster could
write."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shared.models import (
    ClusterImportList,
    EndpointSliceExport,
    ServiceImport,
    WatchEvent,
    to_wire,
)


def slice_body(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "serviceName": "web",
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": [{"addresses": ["10.1.0.7"], "conditions": {"ready": True}}],
    }
    base.update(spec)
    return {"metadata": {"name": "web-x7k2p", "namespace": "demo"}, "spec": base}


def test_a_valid_slice_round_trips_on_the_wire() -> None:
    model = EndpointSliceExport.model_validate(slice_body())
    assert EndpointSliceExport.model_validate(to_wire(model)) == model
    assert to_wire(model)["kind"] == "EndpointSliceExport"


@pytest.mark.parametrize(
    ("address_type", "address"),
    [("IPv4", "10.0.0.1"), ("IPv6", "fd00::1"), ("FQDN", "db-0.example.com")],
)
def test_each_address_type_takes_its_own_addresses(address_type: str, address: str) -> None:
    body = slice_body(addressType=address_type, endpoints=[{"addresses": [address]}])
    assert EndpointSliceExport.model_validate(body).spec.endpoints[0].addresses == [address]


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"addressType": "IPv5"}, "addressType"),
        ({"endpoints": [{"addresses": ["fd00::1"]}]}, "endpoints[0].addresses[0]"),
        ({"endpoints": [{"addresses": ["10.0.0.256"]}]}, "endpoints[0].addresses[0]"),
        ({"endpoints": [{"addresses": ["010.0.0.1"]}]}, "not a valid IPv4"),
        (
            {"addressType": "IPv6", "endpoints": [{"addresses": ["FD00::1"]}]},
            "canonical",
        ),
        ({"addressType": "FQDN", "endpoints": [{"addresses": ["Not_A_Name"]}]}, "FQDN"),
        ({"endpoints": [{"addresses": []}]}, "addresses"),
        ({"endpoints": [{"addresses": ["10.0.0.1"]}] * 1001}, "endpoints"),
        ({"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}, "duplicate port"),
        ({"ports": [{"name": "Http", "port": 1}]}, "DNS-1123"),
        ({"ports": [{"name": "h", "port": 70000}]}, "ports"),
        ({"ports": [{"name": "h", "protocol": "ICMP", "port": 1}]}, "protocol"),
        ({"serviceName": "9web"}, "serviceName"),
        ({"nodeName": "node-1"}, "nodeName"),
    ],
)
def test_a_bad_slice_is_refused_naming_the_field(spec: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError) as caught:
        EndpointSliceExport.model_validate(slice_body(**spec))
    assert named in str(caught.value)


def test_a_slice_name_must_be_a_dns_subdomain() -> None:
    body = slice_body()
    body["metadata"]["name"] = "web_1"
    with pytest.raises(ValidationError, match="DNS-1123 subdomain"):
        EndpointSliceExport.model_validate(body)


def test_the_import_list_and_watch_events_tell_kinds_apart() -> None:
    slice_wire = to_wire(EndpointSliceExport.model_validate(slice_body()))
    import_wire = to_wire(ServiceImport.model_validate({"metadata": {"name": "web"}}))
    listed = ClusterImportList.model_validate({"items": [import_wire, slice_wire]})
    assert [type(item) for item in listed.items] == [ServiceImport, EndpointSliceExport]
    for wire in (import_wire, slice_wire):
        event = WatchEvent.model_validate({"type": "ADDED", "object": wire})
        assert event.object.kind == wire["kind"]
