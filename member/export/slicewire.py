"""One EndpointSlice → the EndpointSliceExport the hub is sent (docs/reference.md#export-path).

A pure function apart from the reconciler: what crosses the wire is decided in one place,
which the tests of the wire shape and the hub client's round trip call directly.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.constants import LABEL_SERVICE_NAME
from shared.models import EndpointSliceExport

__all__ = ["slice_export"]

_PORT_FIELDS = ("name", "protocol", "port", "appProtocol")
_ENDPOINT_FIELDS = ("addresses", "hostname", "zone")
_CONDITION_FIELDS = ("ready", "serving", "terminating")


def slice_export(
    *, cluster_id: str, obj: dict[str, Any], observed: datetime | None = None
) -> EndpointSliceExport:
    """The EndpointSliceExport of one EndpointSlice: what docs/reference.md#import-path sends,
    nothing local (`nodeName`, `targetRef`, hints). `observed`: when this agent saw the slice change
    (`spec.sourceObservedTime`, where importers' sync latency starts,
    docs/reference.md#observability). Raises `ValidationError` naming the field when the
    slice cannot be expressed on the wire."""
    metadata = obj.get("metadata") or {}
    spec: dict[str, Any] = {
        "serviceName": (metadata.get("labels") or {}).get(LABEL_SERVICE_NAME),
        "clusterId": cluster_id,
        "addressType": obj.get("addressType"),
        "ports": [_pick(port, _PORT_FIELDS) for port in obj.get("ports") or []],
        "endpoints": [_endpoint(endpoint) for endpoint in obj.get("endpoints") or []],
        "sourceResourceVersion": metadata.get("resourceVersion"),
        "sourceObservedTime": observed,
    }
    return EndpointSliceExport.model_validate(
        {
            "metadata": {"name": metadata.get("name"), "namespace": metadata.get("namespace")},
            "spec": {k: v for k, v in spec.items() if v is not None},
        }
    )


def _pick(item: Any, fields: tuple[str, ...]) -> Any:
    if not isinstance(item, dict):
        return item  # let validation name it
    return {k: item[k] for k in fields if item.get(k) is not None}


def _endpoint(endpoint: Any) -> Any:
    kept = _pick(endpoint, _ENDPOINT_FIELDS)
    if isinstance(kept, dict) and isinstance(endpoint.get("conditions"), dict):
        kept["conditions"] = _pick(endpoint["conditions"], _CONDITION_FIELDS)
    return kept
