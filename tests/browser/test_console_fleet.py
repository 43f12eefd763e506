"""A fleet in trouble, live in an open console (docs/reference.md#failover, #console): a cluster
whose heartbeats stop turns Stale and its endpoints are withdrawn, another reports a held mass
withdrawal — and the console says so without a reload, though heartbeats are in no feed (the
clusters are read again at the feed's BOOKMARK, every second on this hub). Its own hub process with
a 3-second cluster TTL, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import Tab
from tests.browser.support import Beater, FleetSeeder, off_the_loop
from tests.browser.test_console import active_watches_of, row
from tests.conftest import BACKENDS, dispose_database_url, make_database_url, require_postgres
from tests.member.agent_support import HubProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

WAIT_MS = 20_000


@pytest.fixture(params=BACKENDS)
def short_ttl_hub(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[HubProcess]:
    """Staleness and withdrawal are decided in the database: both back ends."""
    if request.param == "postgresql":
        off_the_loop(require_postgres)
    database = off_the_loop(make_database_url, str(request.param), tmp_path)
    hub = HubProcess(
        directory=tmp_path, database=database,
        extra_args=["--cluster-ttl", "3", "--watch-bookmark-seconds", "1"],
    )
    try:
        hub.start()
        yield hub
    finally:
        hub.stop()
        off_the_loop(dispose_database_url, database)


def test_stale_cluster_and_held_withdrawal_show_live(short_ttl_hub: HubProcess, tab: Tab) -> None:
    hub = short_ttl_hub
    seeder = FleetSeeder(hub.url, admin_token=hub.admin_token)
    for cluster in ("east", "west", "south"):
        seeder.register(cluster)
    seeder.export("east", "web", created="2026-01-01T10:00:00.000Z")
    seeder.export("west", "web", created="2026-01-01T11:00:00.000Z")
    seeder.slice("east", "web", ready=2, total=2)
    seeder.slice("west", "web", ready=1, total=1)
    keep = {c: seeder.tokens[c] for c in ("west", "south")}
    with Beater(hub.url, keep, held={"west": (12, 20)}):
        page = tab.page
        page.goto(f"{hub.url}/ui/")
        page.locator("#token").fill(hub.reader_token)
        page.keyboard.press("Enter")
        page.locator("#feed-state.live").wait_for()
        page.evaluate("window.stillThisPage = true")
        clusters = page.locator("table.clusters")

        # east stops beating: Stale after its 3 s TTL, and its endpoints withdrawn.
        row(page, clusters, "east").filter(has_text="Stale").wait_for(timeout=WAIT_MS)
        row(page, clusters, "east").filter(has_text="withdrawn").wait_for(timeout=WAIT_MS)
        held = row(page, clusters, "west").locator("td").nth(6).inner_text()
        assert "held" in held and "12" in held, held
        assert "Ready" in row(page, clusters, "south").inner_text()
        counters = page.locator(".counters").inner_text()
        assert "1\nStale" in counters and "1\nheld withdrawals" in counters, counters
        assert page.evaluate("window.stillThisPage") is True, "the page reloaded"

        page.locator("table.services a", has_text="demo/web").click()
        endpoints = page.get_by_role("region", name="Endpoints per cluster")
        row(page, endpoints, "east").filter(has_text="withdrawn").wait_for(timeout=WAIT_MS)
        assert "yes" in row(page, endpoints, "west").inner_text()
        imports = page.get_by_role("region", name="Where it is imported")
        assert "unknown: Stale: no heartbeat" in row(page, imports, "east").inner_text()
        assert active_watches_of(hub.url) == 1
    seeder.close()
    tab.assert_clean(hub.url)
