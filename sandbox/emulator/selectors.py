"""Label and field selectors, parsed once per request and matched against plain dicts.

Label selectors follow `k8s.io/apimachinery/pkg/labels`: equality (`a=b`, `a==b`,
`a!=b`), set-based (`a in (x,y)`, `a notin (x)`), existence (`a`, `!a`), joined by commas
that are not inside parentheses. Field selectors support `=`, `==`, `!=` on the fields a
real apiserver indexes for the resources served here (`metadata.name`,
`metadata.namespace`, for Events the `involvedObject.*`, `reason`, `type` fields, for
Namespaces `status.phase`).
A selector that does not parse is a 400, as in Kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.emulator.errors import bad_request

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_KEY_RE = re.compile(rf"^{_KEY}$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")

EVENT_FIELDS = frozenset({
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
})
COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        # "!=" and "notin" match objects without the label too, as in Kubernetes.
        return not present or value not in self.values


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses: `a in (x,y),b` -> [`a in (x,y)`, `b`]."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise bad_request(f"unable to parse requirement: unbalanced ')' in {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise bad_request(f"unable to parse requirement: unbalanced '(' in {text!r}")
    parts.append("".join(current))
    return parts


def _check_key(key: str, whole: str) -> str:
    if not _KEY_RE.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in {whole!r}")
    return key


def _check_value(value: str, whole: str) -> str:
    if not _VALUE_RE.match(value) or len(value) > 63:
        raise bad_request(
            f"unable to parse requirement: invalid label value {value!r} in {whole!r}"
        )
    return value


_SET_RE = re.compile(r"^\s*(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")


def _parse_requirement(part: str, whole: str) -> Requirement:
    text = part.strip()
    if not text:
        raise bad_request(f"unable to parse requirement: empty requirement in {whole!r}")
    m = _SET_RE.match(text)
    if m:
        values = frozenset(
            _check_value(v.strip(), whole) for v in m.group("values").split(",")
        )
        return Requirement(_check_key(m.group("key"), whole), m.group("op"), values)
    for op, norm in (("!=", "!="), ("==", "="), ("=", "=")):
        if op in text:
            key, _, value = text.partition(op)
            return Requirement(
                _check_key(key.strip(), whole), norm,
                frozenset({_check_value(value.strip(), whole)}),
            )
    if text.startswith("!"):
        return Requirement(_check_key(text[1:].strip(), whole), "!exists")
    return Requirement(_check_key(text, whole), "exists")


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector()
    return LabelSelector(tuple(_parse_requirement(p, text) for p in _split_top_level(text)))


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if path == "source" and isinstance(obj.get("source"), Mapping):
        return str(obj["source"].get("component") or "")
    return "" if node is None or isinstance(node, Mapping) else str(node)


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[tuple[str, bool, str], ...] = ()  # (field, equal?, value)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(
            (_field_value(obj, field) == value) == equal for field, equal, value in self.terms
        )

    @property
    def empty(self) -> bool:
        return not self.terms


def parse_field_selector(text: str | None, *, allowed: frozenset[str]) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector()
    terms: list[tuple[str, bool, str]] = []
    for part in text.split(","):
        part = part.strip()
        for op, equal in (("!=", False), ("==", True), ("=", True)):
            if op in part:
                field, _, value = part.partition(op)
                field = field.strip()
                if field not in allowed:
                    raise bad_request(f'"{field}" is not a known field selector: only '
                                      f"{', '.join(sorted(allowed))}")
                terms.append((field, equal, value.strip()))
                break
        else:
            raise bad_request(f"invalid selector: {text!r}; can't understand {part!r}")
    return FieldSelector(tuple(terms))


NAMESPACE_FIELDS = frozenset({"status.phase"})


def allowed_fields(plural: str) -> frozenset[str]:
    if plural == "events":
        return COMMON_FIELDS | EVENT_FIELDS
    if plural == "namespaces":
        return COMMON_FIELDS | NAMESPACE_FIELDS
    return COMMON_FIELDS


Matcher = Callable[[Mapping[str, Any]], bool]
