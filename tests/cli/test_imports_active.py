"""`mcsync imports -o wide`: the ACTIVE column says, per import with cluster selectors, on
which tier its importing clusters are (docs/reference.md#cluster-selection), from three
listings whatever the number of imports — never one request per row."""

from __future__ import annotations

import io

import pytest

from cli.__main__ import main
from cli.cmd import imports
from shared.clusterselection import ClusterSelector
from shared.models import ServiceImport
from tests.cli.fakehub import FakeHub
from tests.cli.samples import service_import
from tests.cli.test_commands import HUB
from tests.cli.test_import_page import _regional, _slice

REGION = "region.topology.mcsync.io"


def _selecting(name: str) -> ServiceImport:
    """An import of `name` exported by eu-1 and us-1: its own region first, then any."""
    item = service_import(name=name, clusters=["eu-1", "us-1"])
    item.spec.cluster_selectors = [
        ClusterSelector.model_validate(
            {"propertySelector": {"matchProperties": {REGION: "@SameAsImporter@"}}}),
        ClusterSelector.model_validate(
            {"propertySelector": {"matchExpressions": [{"key": REGION, "operator": "Exists"}]}}),
    ]
    return item


def _run(hub: FakeHub, *args: str) -> list[list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["imports", *args], environ={"MCSYNC_HUB_URL": HUB, "MCSYNC_TOKEN": "reader"},
                transport=hub.transport(), out=out, err=err)
    assert (code, err.getvalue()) == (0, "")
    return [line.split() for line in out.getvalue().splitlines()]


@pytest.mark.parametrize(("eu_ready", "active"), [
    # eu-1's endpoint is ready: both eu importers and the us importer use their own tier 1.
    ([True], "tier1:3"),
    # None ready in eu: the two eu importers are on tier 2 (every region), us-1 on tier 1.
    ([False], "tier1:1,tier2:2"),
], ids=["all-on-first-tier", "eu-failed-over"])
def test_wide_shows_how_many_importers_are_on_each_tier(
        eu_ready: list[bool | None], active: str) -> None:
    hub = FakeHub(
        clusters={c.metadata.name: c for c in
                  (_regional("eu-1", "eu"), _regional("eu-2", "eu"), _regional("us-1", "us"))},
        slices=[_slice("eu-1", "a", eu_ready), _slice("us-1", "b", [True])],
        imports=[service_import(name="plain"), _selecting("web")],
    )
    header, *rows = _run(hub, "-o", "wide")
    assert header[-1] == "ACTIVE"
    cells = {row[1]: row[-1] for row in rows}
    assert cells == {"plain": "<none>", "web": active}


def test_wide_asks_three_listings_whatever_the_number_of_imports() -> None:
    hub = FakeHub(
        clusters={"eu-1": _regional("eu-1", "eu"), "us-1": _regional("us-1", "us")},
        slices=[_slice("eu-1", "a", [True]), _slice("us-1", "b", [True])],
        imports=[_selecting(f"web{i}") for i in range(12)],
    )
    _run(hub, "-o", "wide")
    asked = sorted(r.url.path.rsplit("/", 1)[-1] for r in hub.requests if r.method == "GET")
    assert asked == ["clusters", "endpointslices", "serviceimports"]


def test_the_narrow_table_asks_only_for_the_imports() -> None:
    hub = FakeHub(clusters={"eu-1": _regional("eu-1", "eu")}, imports=[_selecting("web")])
    header, _row = _run(hub)
    assert "ACTIVE" not in header and header == list(imports.HEADERS)
    assert [r.url.path.rsplit("/", 1)[-1] for r in hub.requests] == ["serviceimports"]


def test_wide_without_selectors_anywhere_asks_nothing_more() -> None:
    hub = FakeHub(imports=[service_import(name="plain")])
    (*_, active), (*_, cell) = _run(hub, "-o", "wide")
    assert (active, cell) == ("ACTIVE", "<none>")
    assert [r.url.path.rsplit("/", 1)[-1] for r in hub.requests] == ["serviceimports"]
