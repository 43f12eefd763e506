"""The console's feed across a lost connection (SPEC §8 "a lost feed reconnects from its
last revision", §4.3): the hub restarts under an open console, which resumes its one watch
from the last revision it saw — a change written before it reconnected still arrives, and
nothing is relisted — or, when the hub no longer holds that revision (410), relists and
shows what changed meanwhile. Each test has its own hub process (SQLite file), restarted
on the same port."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Tab
from tests.browser.support import FleetSeeder
from tests.member.agent_support import HubProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

WAIT_MS = 20_000


@pytest.fixture
def restartable(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[HubProcess]:
    hub = HubProcess(directory=tmp_path, extra_args=list(getattr(request, "param", [])))
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


def open_console(tab: Tab, hub: HubProcess) -> Any:
    page = tab.page
    page.goto(f"{hub.url}/ui/#/services?q=feed")
    page.locator("#token").fill(hub.reader_token)
    page.keyboard.press("Enter")
    page.locator("#feed-state.live").wait_for()
    return page


def watch_revisions(tab: Tab) -> list[str]:
    return [match.group(1) for url in tab.requests
            if (match := re.search(r"serviceexports\?watch=true&resourceVersion=(\d+)", url))]


def relists(tab: Tab) -> int:
    return sum("serviceimports?conflict=false" in url for url in tab.requests)


def restart(hub: HubProcess) -> None:
    hub.stop()
    hub.start()


def test_a_restarted_hub_is_watched_again_from_the_last_revision(
    restartable: HubProcess, tab: Tab
) -> None:
    seeder = FleetSeeder(restartable.url, admin_token=restartable.admin_token)
    seeder.register("east")
    seeder.export("east", "feed-one")
    page = open_console(tab, restartable)
    page.locator("table.services a", has_text="demo/feed-one").wait_for()
    # Block the console's reconnection until a change has been written after the restart.
    held: list[Any] = []
    page.route("**/api/v1/serviceexports?watch=true*", lambda route: held.append(route))
    restart(restartable)
    page.locator("#feed-state.reconnecting").wait_for(timeout=WAIT_MS)
    seeder.export("east", "feed-two")
    page.unroute("**/api/v1/serviceexports?watch=true*")  # lets the held attempt through

    page.locator("table.services a", has_text="demo/feed-two").wait_for(timeout=WAIT_MS)
    page.locator("#feed-state.live").wait_for(timeout=WAIT_MS)
    revisions = watch_revisions(tab)
    # Nothing changed between the console's list and the restart, so each reconnection asks
    # from the list's revision: feed-two, written after it, came from the hub's history.
    assert len(revisions) >= 2 and set(revisions) == {revisions[0]}, revisions
    assert relists(tab) == 1, "it resumed from its revision instead of reloading"
    seeder.close()
    tab.errors = [e for e in tab.errors if "ERR_" not in e and "Failed to fetch" not in e]
    tab.assert_clean(restartable.url)


@pytest.mark.parametrize("restartable", [["--history-limit", "3"]], indirect=True)
def test_a_revision_the_hub_no_longer_holds_relists(restartable: HubProcess, tab: Tab) -> None:
    seeder = FleetSeeder(restartable.url, admin_token=restartable.admin_token)
    seeder.register("east")
    seeder.export("east", "feed-one")
    page = open_console(tab, restartable)
    page.locator("table.services a", has_text="demo/feed-one").wait_for()
    held: list[Any] = []
    page.route("**/api/v1/serviceexports?watch=true*", lambda route: held.append(route))
    restart(restartable)
    page.locator("#feed-state.reconnecting").wait_for(timeout=WAIT_MS)
    for index in range(6):  # twice the history the hub keeps
        seeder.export("east", f"feed-more-{index}")
    page.unroute("**/api/v1/serviceexports?watch=true*")

    page.locator("table.services a", has_text="demo/feed-more-5").wait_for(timeout=WAIT_MS)
    page.locator("#feed-state.live").wait_for(timeout=WAIT_MS)
    assert relists(tab) == 2, "a 410 made it reload the services once"
    assert page.locator("table.services tbody th").count() == 7
    seeder.close()
    tab.errors = [e for e in tab.errors
                  if "ERR_" not in e and "Failed to fetch" not in e and "status of 410" not in e]
    tab.assert_clean(restartable.url)
