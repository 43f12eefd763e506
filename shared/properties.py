"""The one table of a ServiceImport's properties: each declared once, everything else derived.

A ServiceImport's properties come from its key's exports in one of two ways
(docs/reference.md#conflicts): most are **decided** by the winner (the oldest export), and
an export whose value differs is in conflict; ports and IP families are **merged** over all
exports. Each property used to be restated in seven hand-kept lists (the judge's decided
fields, the store's columns and codec, the SQL window query, the agent's held import, the
CLI's and the console's words), so adding one touched a dozen files and a forgotten list
failed quietly. Here each is one `ImportProperty` row, as Kubernetes declares a field's
behaviour once beside its type, and the rest is read off the table:

* the judge (`hub.conflicts`) compares `compared_value()` of every DECIDED row and gives
  its `reason`; it copies the winner's `fields` into the ServiceImport;
* the store (`hub.store.tables`, `hub.store.codec`) keeps each row in its `column`,
  stored as `storage` says; the fleet-wide SQL query (`hub.store.conflictquery`)
  compares those columns (or the `compare_path` inside them) with the winner's;
* the agent (`member.imports.importspec.HeldImport`) holds each row as `held` says;
* people read `label`, `words` (why an export conflicts on it) and `setter` (what to
  change): the CLI's conflict page, and the console, which asks the hub for them
  (`words_document()`) instead of restating them in JavaScript.

A row's `fields` pair an export's wire field with the import's (`exportedLabels` becomes
the import's `labels`). A row may span several wire fields that are one property of the
Service: cluster selection is three (docs/reference.md#cluster-selection), decided and
compared together; its value is then the object of those present (absent when none is).

Values are compared in their wire form (`to_wire`, nulls left out), which is also the
canonical JSON the store keeps: the judge in Python and the query in SQL compare the same
thing, so they cannot disagree on what differs.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from shared import conditions
from shared.clusterselection import (
    ANNOTATION_CLUSTER_SELECTION,
    ANNOTATION_CLUSTER_SELECTORS,
    ANNOTATION_IMPORT_CLUSTERS,
)
from shared.models import InternalServiceExportSpec, ServiceImportSpec, to_wire

__all__ = [
    "DECIDED",
    "PROPERTIES",
    "Held",
    "ImportProperty",
    "Rule",
    "Storage",
    "by_name",
    "by_reason",
    "plain",
    "words_document",
]


class Rule(enum.Enum):
    """How the import's value comes from its exports."""

    DECIDED = "decided"  # the winner's; a differing export is in conflict
    MERGED = "merged"  # combined over every export (the judge's own rules)


class Storage(enum.Enum):
    """How the store keeps a property in its `exports` column."""

    WORD = "word"  # plain text (a short enumeration), NULL when absent
    JSON = "json"  # canonical JSON, never NULL: absent is stored as the row's `absent`
    JSON_OR_NULL = "json-or-null"  # canonical JSON, NULL when absent


class Held(enum.Enum):
    """How the importing agent holds a property (`member.imports.importspec.HeldImport`)."""

    WORD = "word"  # an interned string
    OPTIONAL_WORD = "optional-word"  # a string or None
    WORDS = "words"  # a tuple of interned strings
    PAIRS = "pairs"  # a string map as sorted (key, value) pairs
    JSON = "json"  # canonical JSON bytes, None when absent (rare, kept exact)
    OWN = "own"  # the agent holds it its own way (ports: slice ports)


def _wire_to_attribute(model: type[BaseModel]) -> dict[str, str]:
    return {info.alias or name: name for name, info in model.model_fields.items()}


_EXPORT_ATTRIBUTES: Final = _wire_to_attribute(InternalServiceExportSpec)
_IMPORT_ATTRIBUTES: Final = _wire_to_attribute(ServiceImportSpec)


def plain(value: Any) -> Any:
    """`value` in its wire form: models dumped as `to_wire` does, lists of them walked.

    Anything else is answered as it is, not copied (the judge compares these once per
    export and property, on the write path): callers read it and never change it. A spec's
    maps hold only strings, so only models and lists of models need dumping."""
    if isinstance(value, BaseModel):
        return to_wire(value)
    if isinstance(value, (list, tuple)):
        if any(isinstance(item, BaseModel) for item in value):
            return [plain(item) for item in value]
        return list(value) if isinstance(value, tuple) else value
    return value


@dataclass(frozen=True)
class ImportProperty:
    """One property of a ServiceImport, declared once (see the module docstring)."""

    # The property's name in messages, `PropertyConflict.field` and the CLI: the export's
    # wire field (the first one, for a property of several).
    name: str
    reason: str  # the Conflict reason of an export that differs on it
    rule: Rule
    # (export wire field, import wire field) pairs, in the spec's order.
    fields: tuple[tuple[str, str], ...]
    column: str  # the `exports` column that keeps it
    storage: Storage
    # How the agent holds each field (`HeldImport` has an attribute per field, named as
    # the import spec's).
    held: Held
    label: str  # what people call it, capitalised ("Session affinity")
    words: str  # why an export conflicts on it, completing "this export conflicts: …"
    setter: str  # what sets it in a member cluster
    absent: Any = None  # the wire value when the export does not state it
    # Compared: only this path inside the JSON value (a config whose only meaningful
    # part is a timeout); () compares the whole value.
    compare_path: tuple[str, ...] = ()
    # Values are short words (an enumeration or unset): a message names both the export's
    # and the winner's instead of only the property.
    short: bool = False
    # Kubernetes does not let an existing Service change this (`spec.clusterIP` is
    # immutable): settling means recreating the Service, and the hint must say so rather
    # than send the operator to an edit the API server refuses.
    recreate: bool = False
    export_attributes: tuple[str, ...] = field(init=False)
    import_attributes: tuple[str, ...] = field(init=False)
    export_names: tuple[str, ...] = field(init=False)
    import_names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        # A wire field the models do not have fails here, at import, not in a verdict.
        exported = tuple(_EXPORT_ATTRIBUTES[export] for export, _ in self.fields)
        imported = tuple(_IMPORT_ATTRIBUTES[wire] for _, wire in self.fields)
        object.__setattr__(self, "export_attributes", exported)
        object.__setattr__(self, "import_attributes", imported)
        object.__setattr__(self, "export_names", tuple(export for export, _ in self.fields))
        object.__setattr__(self, "import_names", tuple(wire for _, wire in self.fields))

    @property
    def decided(self) -> bool:
        return self.rule is Rule.DECIDED

    @property
    def nullable(self) -> bool:
        """Whether its column holds NULL for an absent value."""
        if self.storage is Storage.WORD:
            return self.absent is None
        return self.storage is Storage.JSON_OR_NULL

    def _of(self, values: Mapping[str, Any], names: tuple[str, ...]) -> Any:
        if len(names) == 1:
            value = values.get(names[0])
            return self.absent if value is None else value
        present = {name: values[name] for name in names if values.get(name) is not None}
        return present or self.absent

    def wire_value(self, wire: Mapping[str, Any]) -> Any:
        """Its value in an export spec's wire dict (`to_wire(spec)`)."""
        return self._of(wire, self.export_names)

    def import_wire_value(self, wire: Mapping[str, Any]) -> Any:
        """Its value in an import spec's wire dict."""
        return self._of(wire, self.import_names)

    def value(self, spec: InternalServiceExportSpec) -> Any:
        """Its value in an export spec, in wire form (what `wire_value(to_wire(spec))` is)."""
        if len(self.export_attributes) == 1:
            value = getattr(spec, self.export_attributes[0])
            return self.absent if value is None else plain(value)
        values = {
            export: plain(getattr(spec, attribute))
            for (export, _), attribute in zip(self.fields, self.export_attributes, strict=True)
        }
        return self.wire_value(values)

    def import_value(self, spec: ServiceImportSpec) -> Any:
        """Its value in an import spec, in wire form."""
        values = {
            wire: plain(getattr(spec, attribute))
            for (_, wire), attribute in zip(self.fields, self.import_attributes, strict=True)
        }
        return self.import_wire_value(values)

    def import_fields(self, spec: ServiceImportSpec) -> dict[str, Any]:
        """Each of its fields in an import spec, by attribute, in wire form (None: absent)."""
        return {
            attribute: plain(getattr(spec, attribute)) for attribute in self.import_attributes
        }

    def compared(self, value: Any) -> Any:
        """The part of a wire value that is compared (`compare_path`; None when missing)."""
        for step in self.compare_path:
            value = value.get(step) if isinstance(value, Mapping) else None
        return value

    def compared_value(self, spec: InternalServiceExportSpec) -> Any:
        """What the judge compares with the winner's."""
        if self.compare_path:
            return self.compared(self.value(spec))
        return self.value(spec)


def _changed_by(what: str) -> str:
    return f"its {what} differs from the winner's"


# The table. Order: the spec's wire order, which is the order properties are named in.
PROPERTIES: Final[tuple[ImportProperty, ...]] = (
    ImportProperty(
        name="ports",
        reason=conditions.PORT_CONFLICT,
        rule=Rule.MERGED,
        fields=(("ports", "ports"),),
        column="ports",
        storage=Storage.JSON,
        absent=[],
        held=Held.OWN,
        label="Ports",
        words="its ports differ from the other exports' (a port missing here or in "
        "another cluster, or one declared differently under the same name or number)",
        setter="the Service's spec.ports",
    ),
    ImportProperty(
        name="type",
        reason=conditions.TYPE_CONFLICT,
        rule=Rule.DECIDED,
        fields=(("type", "type"),),
        column="type",
        storage=Storage.WORD,
        absent="ClusterSetIP",
        held=Held.WORD,
        label="Type",
        words=_changed_by("type"),
        setter="the Service's spec.clusterIP (None makes it Headless, anything else "
        "ClusterSetIP)",
        short=True,
        recreate=True,
    ),
    ImportProperty(
        name="sessionAffinity",
        reason=conditions.SESSION_AFFINITY_CONFLICT,
        rule=Rule.DECIDED,
        fields=(("sessionAffinity", "sessionAffinity"),),
        column="session_affinity",
        storage=Storage.WORD,
        absent="None",
        held=Held.WORD,
        label="Session affinity",
        words=_changed_by("session affinity"),
        setter="the Service's spec.sessionAffinity",
        short=True,
    ),
    ImportProperty(
        name="sessionAffinityConfig",
        reason=conditions.SESSION_AFFINITY_CONFIG_CONFLICT,
        rule=Rule.DECIDED,
        fields=(("sessionAffinityConfig", "sessionAffinityConfig"),),
        column="session_affinity_config",
        storage=Storage.JSON,
        # `{}`, `{clientIP: {}}` and none all mean "no client-IP timeout configured".
        compare_path=("clientIP", "timeoutSeconds"),
        held=Held.JSON,
        label="Session affinity timeout",
        words=_changed_by("session affinity timeout"),
        setter="the Service's spec.sessionAffinityConfig",
    ),
    ImportProperty(
        name="internalTrafficPolicy",
        reason=conditions.INTERNAL_TRAFFIC_POLICY_CONFLICT,
        rule=Rule.DECIDED,
        fields=(("internalTrafficPolicy", "internalTrafficPolicy"),),
        column="internal_traffic_policy",
        storage=Storage.WORD,
        held=Held.OPTIONAL_WORD,
        label="Internal traffic policy",
        words=_changed_by("internal traffic policy"),
        setter="the Service's spec.internalTrafficPolicy",
        short=True,
    ),
    ImportProperty(
        name="trafficDistribution",
        reason=conditions.TRAFFIC_DISTRIBUTION_CONFLICT,
        rule=Rule.DECIDED,
        fields=(("trafficDistribution", "trafficDistribution"),),
        column="traffic_distribution",
        storage=Storage.WORD,
        held=Held.OPTIONAL_WORD,
        label="Traffic distribution",
        words=_changed_by("traffic distribution"),
        setter="the Service's spec.trafficDistribution",
        short=True,
    ),
    ImportProperty(
        name="ipFamilies",
        reason=conditions.IP_FAMILY_CONFLICT,
        rule=Rule.MERGED,
        fields=(("ipFamilies", "ipFamilies"),),
        column="ip_families",
        storage=Storage.JSON,
        absent=[],
        held=Held.WORDS,
        label="IP families",
        words="it serves other IP families than the winner",
        setter="the Service's spec.ipFamilies and spec.ipFamilyPolicy",
    ),
    ImportProperty(
        name="exportedLabels",
        reason=conditions.LABELS_CONFLICT,
        rule=Rule.DECIDED,
        fields=(("exportedLabels", "labels"),),
        column="exported_labels",
        storage=Storage.JSON,
        absent={},
        held=Held.PAIRS,
        label="Exported labels",
        words="its exported labels differ from the winner's",
        setter="the ServiceExport's spec.exportedLabels",
    ),
    ImportProperty(
        name="exportedAnnotations",
        reason=conditions.ANNOTATIONS_CONFLICT,
        rule=Rule.DECIDED,
        fields=(("exportedAnnotations", "annotations"),),
        column="exported_annotations",
        storage=Storage.JSON,
        absent={},
        held=Held.PAIRS,
        label="Exported annotations",
        words="its exported annotations differ from the winner's",
        setter="the ServiceExport's spec.exportedAnnotations",
    ),
    # The three cluster-selection annotations are one property of the Service: decided and
    # compared together, so a Service never mixes one cluster's selectors with another's
    # policy (docs/reference.md#cluster-selection).
    ImportProperty(
        name="clusterSelectors",
        reason=conditions.CLUSTER_SELECTORS_CONFLICT,
        rule=Rule.DECIDED,
        fields=(
            ("clusterSelectors", "clusterSelectors"),
            ("clusterSelection", "clusterSelection"),
            ("importClusters", "importClusters"),
        ),
        column="cluster_selection",
        storage=Storage.JSON_OR_NULL,
        held=Held.JSON,
        label="Cluster selection",
        words="its cluster selection differs from the winner's",
        setter=f"the ServiceExport's annotations {ANNOTATION_CLUSTER_SELECTORS}, "
        f"{ANNOTATION_CLUSTER_SELECTION} and {ANNOTATION_IMPORT_CLUSTERS}",
    ),
)

DECIDED: Final[tuple[ImportProperty, ...]] = tuple(p for p in PROPERTIES if p.decided)

_BY_NAME: Final = {p.name: p for p in PROPERTIES}
_BY_REASON: Final = {p.reason: p for p in PROPERTIES}


def by_name(name: str) -> ImportProperty:
    """The row named `name` (KeyError when there is none)."""
    return _BY_NAME[name]


def by_reason(reason: str) -> ImportProperty | None:
    """The row whose conflict reason is `reason`, if any."""
    return _BY_REASON.get(reason)


def words_document() -> dict[str, Any]:
    """The words for people, as the hub serves them to the console: by reason, what the
    reason means, and each property's name, label, rule and what to change."""
    return {
        "reasons": {p.reason: p.words for p in PROPERTIES},
        "properties": [
            {
                "name": p.name,
                "label": p.label,
                "reason": p.reason,
                "rule": p.rule.value,
                "setter": p.setter,
            }
            for p in PROPERTIES
        ],
    }
