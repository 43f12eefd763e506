"""`shared.validation` accepts what Kubernetes accepts and refuses what it refuses
(docs/reference.md#scope-and-limits).

The cases are Kubernetes' own: apimachinery's `TestIsQualifiedName`, `TestIsValidLabelValue`
and `TestIsFullyQualifiedDomainName` (pkg/util/validation), `ValidateAnnotations`' size
limit (pkg/api/validation), `TestValidateEndpointIP` (pkg/apis/core/validation) and the
EndpointSlice address cases (pkg/apis/discovery/validation), plus the red team's addresses.
Each row is one value and whether Kubernetes takes it; the models then refuse
the same values in place, with the field and the value in the message.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from shared.models import EndpointSliceExport, InternalServiceExport
from shared.validation import (
    ANNOTATIONS_TOTAL_MAX,
    check_annotations,
    endpoint_address_error,
    export_timestamp_error,
    label_value_error,
    qualified_name_error,
)
from tests.hub.test_api_support import export_body

QUALIFIED_NAMES = [
    ("simple", True),
    ("now-with-dashes", True),
    ("1-starts-with-num", True),
    ("1234", True),
    ("simple/simple", True),
    ("now-with-dashes/simple", True),
    ("now-with-dashes/now-with-dashes", True),
    ("now.with.dots/simple", True),
    ("now-with.dashes-and.dots/simple", True),
    ("1-num.2-num/3-num", True),
    ("1234/5678", True),
    ("1.2.3.4/5678", True),
    ("Uppercase_Is_OK_123", True),
    ("example.com/Uppercase_Is_OK_123", True),
    ("requests.storage-foo", True),
    ("a" * 63, True),
    ("a" * 253 + "/" + "b" * 63, True),
    ("nospecialchars%^=@", False),
    ("cantendwithadash-", False),
    ("-cantstartwithadash-", False),
    ("only/one/slash", False),
    ("Example.com/abc", False),
    ("example_com/abc", False),
    ("example.com/", False),
    ("/simple", False),
    ("a" * 64, False),
    ("a" * 254 + "/abc", False),
    ("with space", False),
    ("", False),
]

LABEL_VALUES = [
    ("simple", True),
    ("now-with-dashes", True),
    ("1-starts-with-num", True),
    ("end-with-num-1", True),
    ("1234", True),
    ("a" * 63, True),
    ("", True),
    ("nospecialchars%^=@", False),
    ("Tama-nui-te-rā.is.Māori.sun", False),
    ("\\backslashes\\are\\bad", False),
    ("-starts-with-dash", False),
    ("ends-with-dash-", False),
    (".starts.with.dot", False),
    ("ends.with.dot.", False),
    ("a" * 64, False),
    ("has a space", False),
]

# (address type, address, accepted)
ENDPOINT_ADDRESSES = [
    ("IPv4", "10.10.1.1", True),
    ("IPv4", "192.0.2.7", True),
    ("IPv6", "2001:db8::ff00:42:8329", True),
    ("IPv6", "fd00::1", True),
    ("FQDN", "foo.example.com", True),
    ("FQDN", "foo.example.com.", True),
    # ValidateEndpointIP: unspecified, loopback, link-local, link-local multicast.
    ("IPv4", "0.0.0.0", False),
    ("IPv6", "::", False),
    ("IPv4", "127.0.0.1", False),
    ("IPv4", "127.255.255.254", False),
    ("IPv6", "::1", False),
    ("IPv4", "169.254.169.254", False),
    ("IPv4", "169.254.0.1", False),
    ("IPv6", "fe80::1", False),
    ("IPv4", "224.0.0.1", False),
    ("IPv4", "224.0.0.251", False),
    ("IPv6", "ff02::1", False),
    # The slice's address type, in canonical form, without a zone.
    ("IPv6", "fe80::1%eth0", False),
    ("IPv6", "2001:db8::1%eth0", False),
    ("IPv4", "2001:db8::1", False),
    ("IPv6", "10.0.0.1", False),
    ("IPv6", "::ffff:10.0.0.1", False),
    ("IPv6", "2001:DB8::1", False),
    ("IPv6", "2001:db8:0:0:0:0:0:1", False),
    ("IPv4", "010.0.0.1", False),
    ("IPv4", "10.0.0.1/24", False),
    ("IPv4", "not-an-ip", False),
    # IsFullyQualifiedDomainName: a subdomain of at least two labels.
    ("FQDN", "foo", False),
    ("FQDN", "Foo.example.com", False),
    ("FQDN", "foo_bar.example.com", False),
]


@pytest.mark.parametrize(("key", "ok"), QUALIFIED_NAMES)
def test_qualified_names_are_kubernetes(key: str, ok: bool) -> None:
    assert (qualified_name_error(key) is None) is ok


@pytest.mark.parametrize(("value", "ok"), LABEL_VALUES)
def test_label_values_are_kubernetes(value: str, ok: bool) -> None:
    assert (label_value_error(value) is None) is ok


@pytest.mark.parametrize(("address_type", "address", "ok"), ENDPOINT_ADDRESSES)
def test_endpoint_addresses_are_kubernetes(address_type: str, address: str, ok: bool) -> None:
    assert (endpoint_address_error(address_type, address) is None) is ok


def test_annotation_keys_are_checked_lower_cased_and_sizes_in_total() -> None:
    check_annotations({"Example.com/Key": "v"}, "annotations")  # as Kubernetes: lower-cased
    check_annotations({f"k{i}": "x" * 60_000 for i in range(4)}, "annotations")  # 240,008 B
    with pytest.raises(ValueError, match="more than Kubernetes' 262144"):
        check_annotations({f"k{i}": "x" * 60_000 for i in range(5)}, "annotations")
    assert ANNOTATIONS_TOTAL_MAX == 262144
    with pytest.raises(ValueError, match="'a b'"):
        check_annotations({"a b": ""}, "annotations")


def test_export_timestamps_are_bounded() -> None:
    now = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    assert export_timestamp_error(datetime(2014, 1, 1, tzinfo=UTC), now=now) is None
    assert export_timestamp_error(now + timedelta(seconds=59), now=now) is None
    assert "before 2014" in str(export_timestamp_error(datetime(1970, 1, 1, tzinfo=UTC)))
    assert "ahead of the hub's clock" in str(
        export_timestamp_error(now + timedelta(seconds=61), now=now)
    )


def _slice(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "web-x7k2p", "namespace": "demo"},
        "spec": {
            "serviceName": "web",
            "addressType": "IPv4",
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
            "endpoints": [{"addresses": ["10.1.0.5"], "conditions": {"ready": True}}],
        },
    }
    body["spec"].update(overrides)
    return body


def _refused(model: Any, body: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return str(caught.value)


# (what is wrong, model, body, words the refusal must carry: the field and the value)
STRICT_CASES = [
    (
        "port true",
        EndpointSliceExport,
        _slice(ports=[{"name": "http", "port": True}]),
        ["ports.0.port", "True"],
    ),
    (
        "port as string",
        EndpointSliceExport,
        _slice(ports=[{"name": "http", "port": "80"}]),
        ["ports.0.port", "'80'"],
    ),
    (
        "port as float",
        EndpointSliceExport,
        _slice(ports=[{"name": "http", "port": 80.0}]),
        ["ports.0.port", "80.0"],
    ),
    (
        "ready as string",
        EndpointSliceExport,
        _slice(endpoints=[{"addresses": ["10.1.0.5"], "conditions": {"ready": "yes"}}]),
        ["conditions.ready", "'yes'"],
    ),
    (
        "ready as number",
        EndpointSliceExport,
        _slice(endpoints=[{"addresses": ["10.1.0.5"], "conditions": {"serving": 1}}]),
        ["conditions.serving", "1"],
    ),
    (
        "loopback address",
        EndpointSliceExport,
        _slice(endpoints=[{"addresses": ["127.0.0.1"]}]),
        ["endpoints[0].addresses[0]", "'127.0.0.1'", "loopback"],
    ),
    (
        "zone id",
        EndpointSliceExport,
        _slice(addressType="IPv6", endpoints=[{"addresses": ["fe80::1%eth0"]}]),
        ["'fe80::1%eth0'", "zone"],
    ),
]


@pytest.mark.parametrize(
    ("model", "body", "words"),
    [case[1:] for case in STRICT_CASES],
    ids=[case[0] for case in STRICT_CASES],
)
def test_models_refuse_naming_field_and_value(
    model: Any, body: dict[str, Any], words: list[str]
) -> None:
    message = _refused(model, body)
    for word in words:
        assert word in message, message


def _export(mutate: Any) -> dict[str, Any]:
    body = copy.deepcopy(export_body("east"))
    mutate(body)
    return body


EXPORT_CASES = [
    (
        "service port true",
        lambda b: b["spec"]["ports"][0].update(port=True),
        ["ports.0.port", "True"],
    ),
    (
        "service port string",
        lambda b: b["spec"]["ports"][0].update(port="80"),
        ["ports.0.port", "'80'"],
    ),
    (
        "exported label value too long",
        lambda b: b["spec"].update(exportedLabels={"team": "x" * 64}),
        ["exportedLabels", "longer than 63"],
    ),
    (
        "exported label value with a space",
        lambda b: b["spec"].update(exportedLabels={"team": "a b"}),
        ["exportedLabels", "'a b'"],
    ),
    (
        "exported annotation key invalid",
        lambda b: b["spec"].update(exportedAnnotations={"-bad": "v"}),
        ["exportedAnnotations", "'-bad'"],
    ),
    (
        "appProtocol not a qualified name",
        lambda b: b["spec"]["ports"][0].update(appProtocol="not valid"),
        ["appProtocol", "'not valid'"],
    ),
    (
        "timestamp before 2014",
        lambda b: b["spec"]["serviceReference"].update(
            exportCreationTimestamp="1970-01-01T00:00:00Z"
        ),
        ["exportCreationTimestamp", "before 2014"],
    ),
]


@pytest.mark.parametrize(
    ("mutate", "words"),
    [case[1:] for case in EXPORT_CASES],
    ids=[case[0] for case in EXPORT_CASES],
)
def test_exports_refuse_naming_field_and_value(mutate: Any, words: list[str]) -> None:
    message = _refused(InternalServiceExport, _export(mutate))
    for word in words:
        assert word in message, message


def test_json_mode_is_as_strict_as_python_mode() -> None:
    """The hub's fast path parses bytes straight into the model: the same refusals."""
    import json

    body = _export(lambda b: b["spec"]["ports"][0].update(port="80"))
    with pytest.raises(ValidationError):
        InternalServiceExport.model_validate_json(json.dumps(body))
    # …and what is valid stays valid in both modes.
    good = _export(lambda b: None)
    assert InternalServiceExport.model_validate_json(json.dumps(good)).spec.ports[0].port == 80


def test_the_agent_refuses_what_the_hub_refuses() -> None:
    """The agent builds what it sends with the same models: a source slice the hub would
    refuse (a loopback address, a non-canonical one) is not sent (`slice_export` raises)."""
    from member.export.slicewire import slice_export

    source = {
        "metadata": {
            "name": "web-x7k2p",
            "namespace": "demo",
            "resourceVersion": "7",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": [{"addresses": ["10.1.0.5"], "conditions": {"ready": True}}],
    }
    assert slice_export(cluster_id="east", obj=source).spec.endpoints[0].addresses == ["10.1.0.5"]
    for address in ("127.0.0.1", "169.254.169.254", "0.0.0.0", "224.0.0.251"):
        bad = copy.deepcopy(source)
        bad["endpoints"][0]["addresses"] = [address]
        with pytest.raises(ValidationError, match=address.replace(".", r"\.")):
            slice_export(cluster_id="east", obj=bad)
