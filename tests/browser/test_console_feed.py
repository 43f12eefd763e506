"""The console's feed across a lost connection (docs/reference.md#console "a lost feed reconnects
from its last revision", docs/reference.md#change-feeds): the hub restarts under an open console,
which resumes its one watch from the last revision it saw — a change written before it reconnected
still arrives, and nothing is relisted — or, when the hub no longer holds that revision (410),
relists and shows what changed meanwhile. Each test has its own hub process, restarted on the same
port, on SQLite and on PostgreSQL (LISTEN/NOTIFY)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Tab
from tests.browser.support import FleetSeeder, off_the_loop
from tests.conftest import BACKENDS, dispose_database_url, make_database_url, require_postgres
from tests.member.agent_support import HubProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

WAIT_MS = 20_000
FEED_ROUTE = "**/api/v1/serviceexports?watch=true*"


@pytest.fixture
def restartable(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[HubProcess]:
    """`request.param`: (back end, extra hub flags)."""
    backend, flags = getattr(request, "param", ("sqlite", []))
    if backend == "postgresql":
        off_the_loop(require_postgres)
    database = off_the_loop(make_database_url, backend, tmp_path)
    hub = HubProcess(directory=tmp_path, database=database, extra_args=list(flags))
    try:
        hub.start()
        yield hub
    finally:
        hub.stop()
        off_the_loop(dispose_database_url, database)


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


def restart(hub: HubProcess) -> None:
    hub.stop()
    hub.start()


def hold_the_feed(page: Any) -> None:
    """From now on the console's attempts to watch wait, unanswered, until `release`."""
    page.route(FEED_ROUTE, lambda route: None)


def release(page: Any) -> None:
    page.unroute(FEED_ROUTE)  # lets the held attempt through


@pytest.mark.parametrize(
    "restartable", [(backend, ["--history-limit", "3"]) for backend in BACKENDS],
    indirect=True, ids=BACKENDS,
)
def test_a_lost_feed_resumes_from_its_revision_or_relists_on_410(
    restartable: HubProcess, tab: Tab
) -> None:
    seeder = FleetSeeder(restartable.url, admin_token=restartable.admin_token)
    seeder.register("east")
    seeder.export("east", "feed-one")
    page = open_console(tab, restartable)
    page.locator("table.services a", has_text="demo/feed-one").wait_for()

    # A change written before the console reconnects comes from the hub's history.
    hold_the_feed(page)
    restart(restartable)
    page.locator("#feed-state.reconnecting").wait_for(timeout=WAIT_MS)
    seeder.export("east", "feed-two")
    release(page)
    page.locator("table.services a", has_text="demo/feed-two").wait_for(timeout=WAIT_MS)
    page.locator("#feed-state.live").wait_for(timeout=WAIT_MS)
    revisions = watch_revisions(tab)
    # Nothing changed between the console's list and the restart, so each reconnection asks
    # from the list's revision.
    assert len(revisions) >= 2 and set(revisions) == {revisions[0]}, revisions

    # Twice the history the hub keeps goes by: the revision is gone (410), so it relists.
    hold_the_feed(page)
    restart(restartable)
    page.locator("#feed-state.reconnecting").wait_for(timeout=WAIT_MS)
    for index in range(6):
        latest = seeder.export("east", f"feed-more-{index}")["metadata"]["resourceVersion"]
    release(page)
    page.locator("table.services a", has_text="demo/feed-more-5").wait_for(timeout=WAIT_MS)
    page.locator("#feed-state.live").wait_for(timeout=WAIT_MS)
    # It read the page again and watches from that read: its position is past every write.
    assert int(watch_revisions(tab)[-1]) >= int(latest), watch_revisions(tab)
    assert page.locator("table.services tbody th").count() == 8
    seeder.close()
    tab.errors = [e for e in tab.errors
                  if "ERR_" not in e and "Failed to fetch" not in e and "status of 410" not in e]
    tab.assert_clean(restartable.url)
