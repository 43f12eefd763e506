"""Fixtures of the end-to-end tests: the three-cluster fleet of `tests/e2e/fleet.py`."""

from tests.e2e.fleet import fleet  # noqa: F401
