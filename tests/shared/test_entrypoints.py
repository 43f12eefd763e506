"""The console scripts of the hub and the agent say which extra is missing, in one line.

`pip install mcsync` installs the CLI alone. The table runs the check against
the installed distribution's real Requires-Dist lines with made-up installed versions; the
last test runs `mcsync-hub`'s entry point in an interpreter that sees only what a plain
`pip install mcsync` gives (the project's metadata, `packaging`, the source), no server
package at all.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from shared.entrypoints import DISTRIBUTION, EXIT_NOT_INSTALLED, missing_requirements

REPO = Path(__file__).resolve().parents[2]
REQUIRES = metadata.requires(DISTRIBUTION) or []
EVERYTHING = {r: "99.0" for r in ("fastapi", "uvicorn", "kubernetes")}


@pytest.mark.parametrize(
    ("extra", "versions", "expected"),
    [
        ("hub", None, []),  # the test venv has both extras
        ("agent", None, []),
        ("hub", {"fastapi": None}, ["fastapi (not installed)"]),
        ("hub", {"fastapi": "0.100.0"}, ["fastapi 0.100.0 (needs >=0.115)"]),
        ("agent", {"kubernetes": None, "fastapi": None}, ["kubernetes (not installed)"]),
        ("hub", {"kubernetes": None}, []),  # the hub does not need the agent's packages
    ],
)
def test_missing_requirements_names_each_unmet_one(
    extra: str, versions: dict[str, str | None] | None, expected: list[str]
) -> None:
    def version_of(name: str) -> str | None:
        if versions is not None and name in versions:
            return versions[name]
        return metadata.version(name)

    assert missing_requirements(extra, REQUIRES, version_of) == expected


def test_the_hub_without_its_extra_says_so_in_one_line(tmp_path: Path) -> None:
    """Only the distribution's metadata, `packaging` and the source on the path."""
    # The installed metadata (a .dist-info, or the .egg-info of an editable install).
    dist_info = Path(str(metadata.distribution(DISTRIBUTION)._path))  # type: ignore[attr-defined]
    packaging_dir = Path(str(metadata.distribution("packaging").locate_file("packaging")))
    site = tmp_path / "site"
    site.mkdir()
    (site / dist_info.name).symlink_to(dist_info)
    (site / "packaging").symlink_to(packaging_dir)
    script = (
        "import sys; sys.path[:0] = [" + repr(str(site)) + ", " + repr(str(REPO)) + "]\n"
        "from shared.entrypoints import hub\n"
        "sys.argv = ['mcsync-hub', '--help']\n"
        "raise SystemExit(hub())\n"
    )
    run = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True,
                         text=True, timeout=60, check=False)
    assert run.returncode == EXIT_NOT_INSTALLED, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr
    assert lines[0].startswith("mcsync-hub: the [hub] extra is not installed: fastapi (not "
                               "installed)")
    assert lines[0].endswith("install it with: pip install 'mcsync[hub]'")
