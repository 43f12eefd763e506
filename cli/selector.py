"""`-l` label selectors, in kubectl's syntax, matched against a cluster's labels.

The hub lists clusters whole (a fleet has tens or hundreds of them, not millions), so the
selector is applied here, after the one listing request. The syntax is Kubernetes'
(`k8s.io/apimachinery/pkg/labels`): requirements joined by commas, all of which must
hold —

* `key=value`, `key==value`, `key!=value` (a missing key satisfies `!=`, as in kubectl);
* `key in (a,b)`, `key notin (a,b)` (a missing key satisfies `notin`);
* `key` (the key exists), `!key` (it does not).

A selector that does not parse is a usage error naming the requirement, so `mcsync
clusters -l 'env in prod'` fails at start instead of selecting nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from shared.models import QUALIFIED_NAME_RE

Operator = Literal["=", "!=", "in", "notin", "exists", "!"]

_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
_KEY = r"[^\s!=(),]+"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EQUALITY = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values  # "!=", "notin"


@dataclass(frozen=True)
class Selector:
    """All requirements of one `-l`; `text` is what the user wrote, for messages."""

    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)


def _split(text: str) -> list[str]:
    """Split at the commas that are not inside a `( … )` value set."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _key(key: str, part: str) -> str:
    name = key.rpartition("/")[2]
    if len(name) > 63 or not QUALIFIED_NAME_RE.fullmatch(key):
        raise ValueError(f"{part.strip()!r}: {key!r} is not a valid label key")
    return key


def _requirement(part: str) -> Requirement:
    if found := _SET.match(part):
        key, operator, raw = found.groups()
        values = [v.strip() for v in raw.split(",")]
        if not all(values) or not all(_VALUE_RE.match(v) for v in values):
            raise ValueError(f"{part.strip()!r}: expected a list of label values in ( )")
        return Requirement(_key(key, part), operator, frozenset(values))  # type: ignore[arg-type]
    if found := _EQUALITY.match(part):
        key, operator, value = found.groups()
        op: Operator = "!=" if operator == "!=" else "="
        return Requirement(_key(key, part), op, frozenset({value}))
    if found := _EXISTS.match(part):
        negated, key = found.groups()
        return Requirement(_key(key, part), "!" if negated else "exists")
    raise ValueError(
        f"{part.strip()!r} is not a label requirement (key=value, key!=value, "
        "key in (a,b), key notin (a,b), key, !key)"
    )


def parse_selector(text: str) -> Selector:
    """Parse a kubectl label selector; ValueError naming the bad requirement."""
    if not text.strip():
        raise ValueError("must not be empty")
    return Selector(text.strip(), tuple(_requirement(part) for part in _split(text)))
