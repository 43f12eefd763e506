"""Version comparison as the hub's `minAgentVersion` check relies on it
(docs/reference.md#failover)."""

from __future__ import annotations

import pytest

from shared.version import is_older, parse_version


@pytest.mark.parametrize(
    ("version", "than", "older"),
    [
        ("0.1.0", "0.2.0", True),
        ("0.2.0", "0.2.0", False),
        ("0.2", "0.2.0", False),  # missing components count as 0
        ("0.10.0", "0.9.0", False),  # numeric, not string, order
        ("0.2.0-rc1", "0.2.0", True),  # a release candidate is not the release
        ("0.2.0rc1", "0.2.0rc2", True),
        ("0.2.0.dev3+g1a2b3c", "0.2.0", True),
        ("v1.0.0", "0.9.9", False),
        ("1.0.0+local", "1.0.0", False),
    ],
)
def test_versions_compare_in_pep440_order(version: str, than: str, older: bool) -> None:
    assert is_older(version, than) is older


@pytest.mark.parametrize("text", ["", "latest", "1.x", "1..2"])
def test_a_bad_version_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="not a version"):
        parse_version(text)
