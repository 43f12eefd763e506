"""A property of the whole API: every name the hub accepts in a body can
be read and deleted through its path. Runs on SQLite and PostgreSQL.

The bug it guards against: the body's validators and the path's disagreed about
`"evil\\n"` (Python's `re` let `$` match before the newline; the path parameter is checked
by pydantic-core's Rust engine, which does not), so a registered cluster could never be
deleted. Hypothesis draws names from an alphabet of what such disagreements are made of —
newlines, spaces, dots, capitals, underscores, non-ASCII letters — around valid labels;
whatever the hub accepts (201/200) must then answer 200 on GET and DELETE of its path and
404 afterwards, and whatever it refuses must be a 422 that stored nothing.

One hub (the app's real lifespan and store, in process) serves every example of a run:
the examples run on one event loop (`asyncio.Runner`) that outlives each of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hub.test_api_support import ADMIN, Hub, export_body, running_hub

pytestmark = [pytest.mark.reliability]

EXAMPLES = 120

# Names near the boundary: mostly label characters, plus what slips past sloppy anchors.
ALPHABET = st.sampled_from([*"abcz09-", "\n", "\r", " ", ".", "A", "_", "é", "\t", "/"])
NAMES = st.one_of(
    st.text(ALPHABET, min_size=1, max_size=12),
    st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True).flatmap(
        lambda base: st.sampled_from([base, base + "\n", base + "\r\n", " " + base, base + "."])
    ),
    st.text(ALPHABET, min_size=60, max_size=66),
)


@pytest.fixture
def hub_loop(database_url: str) -> Iterator[tuple[asyncio.Runner, Hub]]:
    with asyncio.Runner() as runner:
        context = running_hub(database_url)
        hub = runner.run(context.__aenter__())
        try:
            yield runner, hub
        finally:
            runner.run(context.__aexit__(None, None, None))


def _segment(name: str) -> str:
    return quote(name, safe="")


async def _cluster_round_trip(hub: Hub, name: str) -> str:
    registered = await hub.client.post(
        "/api/v1/clusters", json={"metadata": {"name": name}}, headers=ADMIN
    )
    if registered.status_code != 201:
        assert registered.status_code in (409, 422), (name, registered.text)
        listed = await hub.client.get("/api/v1/clusters", headers=ADMIN)
        assert name not in [c["metadata"]["name"] for c in listed.json()["items"]], name
        return "refused"
    path = f"/api/v1/clusters/{_segment(name)}"
    read = await hub.client.get(path, headers=ADMIN)
    assert read.status_code == 200, (name, read.text)
    assert read.json()["metadata"]["name"] == name
    deleted = await hub.client.delete(path, headers=ADMIN)
    assert deleted.status_code == 200, (name, deleted.text)
    gone = await hub.client.get(path, headers=ADMIN)
    assert gone.status_code == 404, (name, gone.text)
    return "accepted"


async def _export_round_trip(hub: Hub, member: dict[str, str], namespace: str, name: str) -> str:
    # Through the full-state sync: no path names the export, only its body does.
    body: dict[str, Any] = export_body("east", namespace=namespace, name=name)
    synced = await hub.client.put(
        "/api/v1/clusters/east/serviceexports", json={"items": [body]}, headers=member
    )
    if synced.status_code != 200:
        assert synced.status_code == 422, (namespace, name, synced.text)
        return "refused"
    path = f"/api/v1/clusters/east/serviceexports/{_segment(namespace)}/{_segment(name)}"
    read = await hub.client.get(path, headers=member)
    assert read.status_code == 200, (namespace, name, read.text)
    deleted = await hub.client.delete(path, headers=member)
    assert deleted.status_code == 200, (namespace, name, deleted.text)
    gone = await hub.client.get(path, headers=member)
    assert gone.status_code == 404, (namespace, name, gone.text)
    return "accepted"


PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def test_every_accepted_cluster_name_can_be_read_and_deleted_by_its_path(
    hub_loop: tuple[asyncio.Runner, Hub],
) -> None:
    runner, hub = hub_loop
    outcomes: dict[str, int] = {}

    @PROPERTY
    @given(name=NAMES)
    def check(name: str) -> None:
        outcome = runner.run(_cluster_round_trip(hub, name))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    check()
    print(f"\n[cluster-name-round-trip] {outcomes}")
    assert outcomes.get("accepted") and outcomes.get("refused"), outcomes  # both sides probed


def test_every_accepted_export_name_can_be_read_and_deleted_by_its_path(
    hub_loop: tuple[asyncio.Runner, Hub],
) -> None:
    runner, hub = hub_loop
    member = runner.run(hub.register("east"))["east"]
    outcomes: dict[str, int] = {}

    @PROPERTY
    @given(namespace=NAMES, name=NAMES)
    def check(namespace: str, name: str) -> None:
        outcome = runner.run(_export_round_trip(hub, member, namespace, name))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    check()
    print(f"\n[export-name-round-trip] {outcomes}")
    assert outcomes.get("accepted") and outcomes.get("refused"), outcomes
