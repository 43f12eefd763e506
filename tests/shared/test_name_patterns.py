"""Every name and key of every wire model refuses a trailing newline.

Python's `re` lets `$` match *before* a final newline, so `"evil\\n"` passed every check
written as `PATTERN.match(value)` with a pattern ending in `$`: a cluster registered under
that name could never be read or deleted through its path (where the name is a 422), and a
label key `"app\\n"` reached every importer. Each case below is one field of one model, given
its otherwise valid value plus `"\\n"`; each must be a validation error naming that field.
The helpers every other package uses (`is_dns1123_label`, `is_dns1035_label`) are checked
too, since the agent and the CLI validate their flags with them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from shared.models import (
    AnnotationPatch,
    EndpointSliceExport,
    Heartbeat,
    InternalServiceExport,
    MemberCluster,
    ServiceImport,
    is_dns1035_label,
    is_dns1123_label,
)
from tests.hub.test_api_support import export_body, port


def _slice() -> dict[str, Any]:
    return {
        "metadata": {"name": "web-x7k2p", "namespace": "demo"},
        "spec": {
            "serviceName": "web",
            "clusterId": "east",
            "addressType": "IPv4",
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
            "endpoints": [{"addresses": ["10.1.0.7"], "hostname": "web-0"}],
        },
    }


def _export() -> dict[str, Any]:
    return export_body(
        "east",
        ports=[port(80, "http")],
        annotations={"note": "x"},
        exportedLabels={"app": "web"},
        exportedAnnotations={"team": "a"},
    )


BASES: dict[type[BaseModel], Callable[[], dict[str, Any]]] = {
    MemberCluster: lambda: {"metadata": {"name": "east", "labels": {"region": "eu"}}},
    InternalServiceExport: _export,
    AnnotationPatch: lambda: {"metadata": {"resourceVersion": "1", "annotations": {"a": "b"}}},
    ServiceImport: lambda: {
        "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}}
    },
    EndpointSliceExport: _slice,
    Heartbeat: lambda: {"agentVersion": "0.1.0"},
}


def _set(body: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    target: Any = body
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def _newline_value(body: dict[str, Any], path: tuple[str | int, ...]) -> None:
    target: Any = body
    for part in path:
        target = target[part]
    _set(body, path, target + "\n")


def _newline_key(body: dict[str, Any], path: tuple[str | int, ...]) -> None:
    target: Any = body
    for part in path:
        target = target[part]
    key = next(iter(target))
    target[key + "\n"] = target.pop(key)


# (model, what to change, the field the error must name)
CASES: list[tuple[type[BaseModel], Callable[[dict[str, Any]], None], str]] = [
    (MemberCluster, lambda b: _newline_value(b, ("metadata", "name")), "metadata.name"),
    (MemberCluster, lambda b: _newline_key(b, ("metadata", "labels")), "metadata.labels"),
    (
        InternalServiceExport,
        lambda b: _newline_value(b, ("spec", "serviceReference", "clusterId")),
        "spec.serviceReference.clusterId",
    ),
    (
        InternalServiceExport,
        lambda b: _newline_value(b, ("spec", "serviceReference", "namespace")),
        "spec.serviceReference.namespace",
    ),
    (
        InternalServiceExport,
        lambda b: _newline_value(b, ("spec", "serviceReference", "name")),
        "spec.serviceReference.name",
    ),
    (
        InternalServiceExport,
        lambda b: _newline_value(b, ("metadata", "namespace")),
        "metadata.namespace",
    ),
    (InternalServiceExport, lambda b: _newline_value(b, ("metadata", "name")), "metadata.name"),
    (
        InternalServiceExport,
        lambda b: _newline_value(b, ("spec", "ports", 0, "name")),
        "spec.ports.0.name",
    ),
    (
        InternalServiceExport,
        lambda b: _newline_key(b, ("metadata", "annotations")),
        "metadata.annotations",
    ),
    (
        InternalServiceExport,
        lambda b: _newline_key(b, ("spec", "exportedLabels")),
        "spec.exportedLabels",
    ),
    (
        InternalServiceExport,
        lambda b: _newline_key(b, ("spec", "exportedAnnotations")),
        "spec.exportedAnnotations",
    ),
    (
        AnnotationPatch,
        lambda b: _newline_key(b, ("metadata", "annotations")),
        "metadata.annotations",
    ),
    (ServiceImport, lambda b: _newline_value(b, ("metadata", "name")), "metadata.name"),
    (ServiceImport, lambda b: _newline_value(b, ("metadata", "namespace")), "metadata.namespace"),
    (ServiceImport, lambda b: _newline_key(b, ("metadata", "labels")), "metadata.labels"),
    (EndpointSliceExport, lambda b: _newline_value(b, ("metadata", "name")), "metadata"),
    (EndpointSliceExport, lambda b: _newline_value(b, ("metadata", "namespace")), "metadata"),
    (
        EndpointSliceExport,
        lambda b: _newline_value(b, ("spec", "serviceName")),
        "spec.serviceName",
    ),
    (EndpointSliceExport, lambda b: _newline_value(b, ("spec", "clusterId")), "spec.clusterId"),
    (
        EndpointSliceExport,
        lambda b: _newline_value(b, ("spec", "ports", 0, "name")),
        "spec.ports.0.name",
    ),
    (
        EndpointSliceExport,
        lambda b: _newline_value(b, ("spec", "endpoints", 0, "hostname")),
        "spec.endpoints.0.hostname",
    ),
    (Heartbeat, lambda b: _newline_value(b, ("agentVersion",)), "agentVersion"),
]


def _loc(error: Any) -> str:
    return ".".join(str(part) for part in error["loc"])


@pytest.mark.parametrize(
    ("model", "change", "field"),
    CASES,
    ids=[f"{model.__name__}-{field}-{i}" for i, (model, _, field) in enumerate(CASES)],
)
def test_a_trailing_newline_is_refused_naming_the_field(
    model: type[BaseModel], change: Callable[[dict[str, Any]], None], field: str
) -> None:
    base = BASES[model]()
    model.model_validate(copy.deepcopy(base))  # the untouched body is valid
    body = copy.deepcopy(base)
    change(body)
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    locs = [_loc(e) for e in caught.value.errors()]
    assert any(loc == field or loc.startswith(field + ".") for loc in locs), (field, locs)


@pytest.mark.parametrize("check", [is_dns1123_label, is_dns1035_label])
@pytest.mark.parametrize("suffix", ["\n", "\r\n", "\n\n", " "])
def test_label_helpers_refuse_trailing_whitespace(
    check: Callable[[str], bool], suffix: str
) -> None:
    assert check("east")
    assert not check("east" + suffix)
