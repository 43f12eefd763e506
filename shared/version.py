"""Versions that the hub and the agent compare at heartbeat time (docs/reference.md#failover).

`__version__` here is the project's one version source: setuptools reads it at build time
(`[tool.setuptools.dynamic]` in pyproject.toml) and the charts' `version`/`appVersion` are
checked against it by tests/helm. Comparison follows PEP 440 through `packaging.version`,
so a pre-release sorts before its release (`0.2.0rc1` < `0.2.0`) — hand-rolled dotted
integers counted `0.2.0-rc1` equal to `0.2.0` and let a release candidate pass a
`minAgentVersion` of the release.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

__version__ = "0.1.0"

# The oldest agent the hub accepts exports from, unless the operator configures another.
DEFAULT_MIN_AGENT_VERSION = "0.1.0"


def parse_version(text: str) -> Version:
    """Parse a PEP 440 version ("1.2.3", "v1.2.3", "0.2.0-rc1", "0.2.0.dev3+g1a2b3c").

    Raises ValueError naming the text when it is not a version, so a bad
    `--min-agent-version` stops the hub at start instead of mis-comparing later.
    """
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise ValueError(f"not a version (expected PEP 440, like 1.2.3): {text!r}") from None


def is_older(version: str, than: str) -> bool:
    """True when `version` sorts strictly before `than` (PEP 440 order)."""
    return parse_version(version) < parse_version(than)
