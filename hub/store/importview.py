"""What an importing cluster sees of a ServiceImport and of an EndpointSliceExport (see
`docs/reference.md#import-path`): the one rule both halves of the import feed apply.

A slice is imported cut to the ports its source cluster serves in the import (the
ServiceImport's `status.ports[].clusters` lists; a slice port matches an import port by
name, since a slice carries the Service port's name with the *target* port number). A slice
with ports of which its source serves none is not imported, nor is a slice of a withheld
export (`importer_sees`). `slice_text` and `import_text` are the canonical JSON of what an
importer receives, which the history rows store and the list answers alike.

Why a module of its own: the write half (`hub.store.importchanges`, what a write records)
and the read half (`hub.store.importfeed`, what a watch or a list reads) must agree on this
rule byte for byte; kept here, neither half imports the other and the rule is in one place.
It touches no database.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter

from hub.store import codec
from hub.store.importselection import ANNOTATION_AUDIENCE
from shared import constants
from shared.timefmt import format_millis

Key = tuple[str, str]  # (namespace, Service name)
Triple = tuple[str, str, str]  # (cluster_id, namespace, Service name): one export's slices

_TIMESTAMP: TypeAdapter[datetime] = TypeAdapter(datetime)


# --- cutting a slice to what its source serves -----------------------------------------------


def served_ports(status_text: str | None) -> dict[str, frozenset[str]]:
    """cluster → the names of the import ports it serves, from a stored import status."""
    if not status_text:
        return {}
    served: dict[str, set[str]] = {}
    for port in json.loads(status_text).get("ports", ()):
        for cluster in port.get("clusters", ()):
            served.setdefault(cluster, set()).add(port.get("name", ""))
    return {cluster: frozenset(names) for cluster, names in served.items()}


def importer_view(
    spec: Mapping[str, Any], served: frozenset[str] | None
) -> tuple[bool, dict[str, Any]]:
    """(imported?, the spec as importers see it): the slice's ports cut to `served`.

    A slice without ports (a Service without ports) has nothing to cut and is imported as
    it is. A slice with ports of which its source serves none is not imported.
    """
    ports = spec.get("ports") or []
    if not ports:
        return True, dict(spec)
    names = served or frozenset()
    kept = [p for p in ports if p.get("name", "") in names]
    return bool(kept), {**spec, "ports": kept}


def importer_sees(
    spec: Mapping[str, Any], served: frozenset[str] | None, *, withheld: bool = False
) -> tuple[bool, dict[str, Any]]:
    """(imported?, the spec as importers see it) of a stored slice: THE rule of what an
    importing cluster sees of a slice, which the write half records and the list reads.

    Cut to the ports its source serves (`importer_view`); not imported at all while its
    export is withheld (`hub.store.withdrawals`: its source cluster Stale). A withdrawn
    export's slices are gone from the store with it (`importchanges.follow_exports`), so
    they are never read here.
    """
    imported, view = importer_view(spec, served)
    return imported and not withheld, view


# --- the texts of the history rows ----------------------------------------------------------


def _annotations(changed_at: datetime | None, audience: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if changed_at is not None:
        out[constants.ANNOTATION_CHANGED_AT] = format_millis(changed_at)
    if audience is not None:
        out[ANNOTATION_AUDIENCE] = audience
    return out


def _timestamp(value: datetime | None) -> Any:
    return None if value is None else _TIMESTAMP.dump_python(value, mode="json")


def slice_text(
    *,
    namespace: str,
    name: str,
    resource_version: int | str,
    created_at: datetime,
    spec: Mapping[str, Any],
    changed_at: datetime | None = None,
    audience: str | None = None,
) -> str:
    """The canonical JSON of an EndpointSliceExport (as `to_wire` gives it); a change of
    the feed carries its commit time in `mcsync.io/changed-at` (`changed_at`), a row for
    one cluster's feed alone its name in `mcsync.io/audience` (`importselection`)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "resourceVersion": str(resource_version),
        "creationTimestamp": _timestamp(created_at),
    }
    annotations = _annotations(changed_at, audience)
    if annotations:
        metadata["annotations"] = annotations
    return codec.canonical_json(
        {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND_ENDPOINT_SLICE,
            "metadata": metadata,
            "spec": spec,
        }
    )


def import_text(
    *,
    namespace: str,
    name: str,
    resource_version: int | str,
    created_at: datetime | None,
    spec_text: str,
    status_text: str,
    changed_at: datetime | None = None,
    audience: str | None = None,
) -> str:
    """The canonical JSON of a ServiceImport from its stored texts, without building it;
    a change of the feed carries its commit time in `mcsync.io/changed-at`.

    The cluster states of `status.clusters` are read-time facts and are not in it.
    """
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "resourceVersion": str(resource_version),
        "annotations": _annotations(changed_at, audience),
    }
    if created_at is not None:
        metadata["creationTimestamp"] = _timestamp(created_at)
    document = {
        "apiVersion": constants.API_VERSION,
        "kind": constants.KIND_IMPORT,
        "metadata": metadata,
    }
    try:
        return orjson.dumps(
            {
                **document,
                "spec": orjson.Fragment(spec_text),
                "status": orjson.Fragment(status_text),
            },
            option=orjson.OPT_SORT_KEYS,
        ).decode()
    except TypeError:  # what orjson refuses, the stdlib writes (see codec.canonical_json)
        return codec.canonical_json(
            {**document, "spec": json.loads(spec_text), "status": json.loads(status_text)}
        )
