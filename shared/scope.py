"""Namespace scope of a member cluster (docs/reference.md#scope-and-limits): which namespaces it may
export from and which it imports.

A MemberCluster's `spec.exportNamespaces` / `spec.importNamespaces` are lists of namespace
names and `*` globs (`team-*`, `*-prod`, `*`); an absent list allows every namespace, an
empty one none. The hub also denies exports from its `--deny-export-namespace` list
whatever a cluster's spec says. One module, so that the hub's check, the model's
validation and the CLI's flags agree on what a pattern is and what it matches.

A pattern is a DNS-1123 label in which `*` may stand for any run of characters (none
included): nothing else is special, so a pattern can never match more than its author
reads into it (`fnmatch`'s `?` and `[…]` are refused, not interpreted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# What the hub denies by default: the namespaces Kubernetes itself owns.
DEFAULT_DENY_EXPORT_NAMESPACES: tuple[str, ...] = ("kube-system", "kube-public", "kube-node-lease")

_PATTERN_RE = re.compile(r"[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?")


def pattern_error(pattern: str) -> str | None:
    """Why `pattern` is not a namespace name or `*` glob, or None."""
    if len(pattern) > 63 or _PATTERN_RE.fullmatch(pattern) is None:
        return (
            f"{pattern!r} is not a namespace name or '*' glob (lowercase letters, digits, '-' "
            "and '*', starting and ending with a letter, digit or '*', at most 63 characters)"
        )
    return None


def check_patterns(patterns: Iterable[str], what: str) -> list[str]:
    """`patterns` de-duplicated in order; ValueError naming `what` and the bad pattern."""
    checked: list[str] = []
    for pattern in patterns:
        problem = pattern_error(pattern)
        if problem is not None:
            raise ValueError(f"{what}: {problem}")
        if pattern not in checked:
            checked.append(pattern)
    return checked


def glob_matches(pattern: str, name: str) -> bool:
    """Whether `pattern` (where `*` stands for any run of characters) matches all of `name`.

    Two pointers, no regex: on a mismatch only the last `*` seen takes one more character
    and the match resumes just after it; earlier stars are never revisited, so the work is
    bounded by len(pattern) * len(name) (both at most 63) whatever the pattern. A regex
    translation (`.*` per star) backtracks through every way of sharing the name among
    the stars: a many-star pattern against a long name that almost matches held the hub's
    event loop, and every other request with it (docs/reference.md#scope-and-limits).
    """
    p = n = 0
    star = -1  # index in `pattern` of the last `*` seen
    resume = 0  # index in `name` where that star's run currently ends
    while n < len(name):
        if p < len(pattern) and pattern[p] == "*":
            star, resume = p, n
            p += 1
        elif p < len(pattern) and pattern[p] == name[n]:
            p += 1
            n += 1
        elif star >= 0:
            resume += 1
            p, n = star + 1, resume
        else:
            return False
    return all(c == "*" for c in pattern[p:])


def matching_pattern(namespace: str, patterns: Sequence[str]) -> str | None:
    """The first of `patterns` that matches `namespace` whole, or None."""
    for pattern in patterns:
        if pattern == namespace or ("*" in pattern and glob_matches(pattern, namespace)):
            return pattern
    return None


def allows(patterns: Sequence[str] | None, namespace: str) -> bool:
    """Whether a scope list allows `namespace` (None: the list is absent, all allowed)."""
    return patterns is None or matching_pattern(namespace, patterns) is not None
