"""Versions that the hub and the agent compare at heartbeat time (SPEC §5)."""

from __future__ import annotations

__version__ = "0.1.0"

# The oldest agent the hub accepts exports from, unless the operator configures another.
DEFAULT_MIN_AGENT_VERSION = "0.1.0"


def parse_version(text: str) -> tuple[int, ...]:
    """Parse "1.2.3" (an optional leading "v" and any "-suffix"/"+build" ignored) to a tuple.

    Raises ValueError naming the text when it is not dotted integers, so a bad
    `--min-agent-version` stops the hub at start instead of mis-comparing later.
    """
    core = text.strip().removeprefix("v").split("+", 1)[0].split("-", 1)[0]
    parts = core.split(".")
    if not core or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a version (expected dotted integers like 1.2.3): {text!r}")
    return tuple(int(p) for p in parts)


def is_older(version: str, than: str) -> bool:
    """True when `version` sorts strictly before `than` (missing components count as 0)."""
    a, b = parse_version(version), parse_version(than)
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)) < b + (0,) * (width - len(b))
