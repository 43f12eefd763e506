"""The console scripts' first step: one line naming the missing extra, not a traceback.

`pip install mcsync` installs the CLI alone; the hub and the agent need their extras
(`mcsync[hub]`, `mcsync[agent]`). Without them, `mcsync-hub` used to die in an
`ImportError` traceback from whichever module happened to be imported first. The entry points
here read what the installed distribution's own metadata says the extra requires, check each
requirement is installed at a version it accepts, and only then import the program. The
list is never written twice: pyproject.toml is the one place it lives.

Where mcsync is not installed as a distribution (`python -m hub` from a checkout) there is no
metadata to read and the program starts as it is.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from importlib import metadata

from packaging.requirements import Requirement

__all__ = ["agent", "hub", "missing_requirements"]

DISTRIBUTION = "mcsync"
# Exit code of an incomplete installation: neither a bad flag (2) nor an outage (3).
EXIT_NOT_INSTALLED = 1

VersionOf = Callable[[str], str | None]


def installed_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def missing_requirements(
    extra: str, requires: list[str], version_of: VersionOf = installed_version
) -> list[str]:
    """The requirements of `extra` (from `requires`, Requires-Dist lines) not met, each as
    "name (not installed)" or "name X (needs SPEC)"."""
    problems: list[str] = []
    for line in requires:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or not marker.evaluate({"extra": extra}):
            continue
        if requirement.name == DISTRIBUTION:  # an extra that names others: checked by its own
            continue
        version = version_of(requirement.name)
        if version is None:
            problems.append(f"{requirement.name} (not installed)")
        elif not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement.name} {version} (needs {requirement.specifier})")
    return problems


def _start(program: str, extra: str, target: str) -> int:
    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        requires = []
    problems = missing_requirements(extra, requires)
    if problems:
        print(
            f"{program}: the [{extra}] extra is not installed: {', '.join(problems)}; "
            f"install it with: pip install 'mcsync[{extra}]'",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_NOT_INSTALLED)
    module, _, function = target.partition(":")
    main: Callable[[], int] = getattr(importlib.import_module(module), function)
    return main()


def hub() -> int:
    """`mcsync-hub`."""
    return _start("mcsync-hub", "hub", "hub.__main__:main")


def agent() -> int:
    """`mcsync-agent`."""
    return _start("mcsync-agent", "agent", "member.__main__:main")
