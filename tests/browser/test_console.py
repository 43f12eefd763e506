"""The fleet console (docs/reference.md#console) in a real browser: Debian's Chromium driven by
Playwright, against a real hub process whose fleet was written through the REST API.

Every test ends by checking that its tab requested nothing from another origin and logged
no console error (`Tab.assert_clean`).
"""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.browser.conftest import ConsoleHub, Tab
from tests.browser.support import axe_source, export_body

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

LIVE_SECONDS = 10.0


def sign_in(tab: Tab, hub: ConsoleHub, *, route: str = "") -> Any:
    page = tab.page
    page.goto(hub.console + route)
    page.locator("#token").fill(hub.hub.reader_token)
    page.keyboard.press("Enter")
    page.locator("#feed-state.live").wait_for()
    return page


def service_rows(page: Any) -> list[str]:
    return [text.strip() for text in page.locator("table.services tbody th").all_inner_texts()]


def row(page: Any, table: Any, name: str) -> Any:
    """The body row of `table` whose row header is exactly `name`."""
    return table.locator("tbody tr").filter(
        has=page.get_by_role("rowheader", name=name, exact=True)
    )


def active_watches(hub: ConsoleHub) -> float:
    return active_watches_of(hub.url)


def active_watches_of(url: str) -> float:
    """The hub's open watches, from its own metric."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(r"^mcsync_hub_active_watches (\S+)$", text, re.M)
    assert match, "the hub exports mcsync_hub_active_watches"
    return float(match.group(1))


def wait_until(condition: Any, *, what: str, timeout: float = LIVE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def test_sign_in_lands_on_clusters_and_services_together(console_hub: ConsoleHub, tab: Tab) -> None:
    page = sign_in(tab, console_hub)
    assert page.locator("h1").inner_text() == "Fleet overview"
    clusters = page.locator("table.clusters tbody tr")
    assert clusters.count() == 4
    states = dict(zip(
        page.locator("table.clusters tbody th").all_inner_texts(),
        page.locator("table.clusters tbody td:nth-child(2)").all_inner_texts(), strict=True,
    ))
    assert states == {"east": "Ready", "edge": "Ready", "west": "Ready", "north": "Pending"}
    assert list(states) == ["north", "east", "edge", "west"]  # needing attention first
    assert page.locator("table.clusters tbody tr", has_text="north").locator("time").count() == 0
    rows = service_rows(page)
    assert rows[0] == "demo/api"  # the conflicting service comes first
    assert {"demo/web", "shop/cart"} <= set(rows)
    assert "its type differs from the winner's" in page.locator("table.services").inner_text()
    # The token is in this tab's session storage, never in the URL or the hub's log.
    token = console_hub.hub.reader_token
    assert page.evaluate("sessionStorage.getItem('mcsync.console.token')") == token
    assert token not in page.url
    assert token not in console_hub.hub.log_path.read_text()
    tab.assert_clean(console_hub.url)


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("unknown", "did not accept this token"),
        ("member", "may not read the fleet"),
    ],
)
def test_a_token_that_cannot_read_the_fleet_gets_a_message(
    console_hub: ConsoleHub, tab: Tab, which: str, message: str
) -> None:
    page = tab.page
    token = ("nobody-" + "x" * 20 if which == "unknown"
             else console_hub.seeder.tokens["east"]["Authorization"].removeprefix("Bearer "))
    page.goto(console_hub.console)
    page.locator("#token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    alert.filter(has_text=message).wait_for()
    assert page.evaluate("sessionStorage.getItem('mcsync.console.token')") is None
    assert page.locator("#nav").is_hidden()
    assert token not in page.url
    # The refused sign-in answers 401/403, which the browser reports itself; nothing else.
    tab.errors = [e for e in tab.errors if "status of 401" not in e and "status of 403" not in e]
    tab.assert_clean(console_hub.url)


def test_an_export_change_shows_without_reload_over_one_watch(
    console_hub: ConsoleHub, tab: Tab
) -> None:
    page = sign_in(tab, console_hub)
    page.evaluate("window.stillThisPage = true")
    wait_until(lambda: active_watches(console_hub) == 1, what="one open watch: the console's")

    console_hub.seeder.export("east", "live", created="2026-01-01T10:00:00.000Z")
    page.locator("table.services a", has_text="demo/live").wait_for(timeout=LIVE_SECONDS * 1000)
    # A conflict moves it up among the conflicting services, with the reason in words.
    console_hub.seeder.export("west", "live", type="Headless", created="2026-01-02T10:00:00.000Z")
    wait_until(lambda: "its type differs from the winner's" in row(
        page, page.locator("table.services"), "demo/live").inner_text(),
        what="demo/live's row read again, in conflict")
    assert service_rows(page)[:2] == ["demo/api", "demo/live"]  # among the conflicting
    console_hub.seeder.withdraw("west", "live")
    console_hub.seeder.withdraw("east", "live")
    wait_until(lambda: "demo/live" not in service_rows(page), what="demo/live gone")

    assert page.evaluate("window.stillThisPage") is True, "the page reloaded"
    assert active_watches(console_hub) == 1, "the console holds one watch, whatever changed"
    tab.assert_clean(console_hub.url)


def searched(tab: Tab, words: str) -> bool:
    """Whether the tab asked the hub for the ServiceImports matching `words`."""
    return any("/api/v1/serviceimports?" in url and f"q={quote(words)}" in url
               for url in tab.requests)


def test_search_is_answered_by_the_hub_and_its_url_can_be_shared(
    console_hub: ConsoleHub, tab: Tab
) -> None:
    page = sign_in(tab, console_hub)
    search = page.get_by_label("Search services")
    search.fill("cart")
    wait_until(lambda: service_rows(page) == ["shop/cart"], what="the search for cart")
    assert searched(tab, "cart"), "the hub answered the search"
    search.fill("west demo")  # every word must match: cluster west, namespace demo
    wait_until(lambda: service_rows(page) == ["demo/api", "demo/web"], what="west demo")
    assert searched(tab, "west demo")
    search.fill("nothing-like-this")
    page.locator("table.services", has_text="No service matches").wait_for()
    search.fill("cart")
    wait_until(lambda: service_rows(page) == ["shop/cart"], what="cart again")
    assert page.evaluate("location.hash") == "#/?q=cart"
    page.reload()  # the token is still in the tab; the search is in the URL
    page.locator("#feed-state.live").wait_for()
    assert page.get_by_label("Search services").input_value() == "cart"
    wait_until(lambda: service_rows(page) == ["shop/cart"], what="the shared search")
    tab.assert_clean(console_hub.url)


def test_a_service_page_gives_verdicts_endpoints_and_imports(
    console_hub: ConsoleHub, tab: Tab
) -> None:
    page = sign_in(tab, console_hub, route="#/services/demo/api")
    exports = page.locator("table.exports")
    exports.wait_for()
    west = row(page, exports, "west").inner_text()
    assert "its type differs from the winner's" in west
    assert 'type: "Headless" here, "ClusterSetIP" on the winner (east)' in west
    assert "winner" in row(page, exports, "east").inner_text()
    imports = page.get_by_role("region", name="Where it is imported")
    assert "has never sent a heartbeat" in row(page, imports, "north").inner_text()
    # The hub's answer (`mcsync describe import`'s rows), not the console's own reading.
    assert "its scope imports only namespaces shop, not demo" in row(
        page, imports, "edge").inner_text()
    # west's seeded heartbeats carry no import counts: the hub knows it imports nothing.
    assert "no: its agent reports no imports" in row(page, imports, "west").inner_text()

    page.goto(console_hub.console + "#/services/demo/web")
    endpoints = page.get_by_role("region", name="Endpoints per cluster")
    row(page, endpoints, "east").wait_for()
    cells = row(page, endpoints, "east").locator("td").all_inner_texts()
    assert cells[:2] == ["2", "3"]  # ready, total
    cells = row(page, endpoints, "west").locator("td").all_inner_texts()
    assert cells[:2] == ["2", "2"]
    ports = page.get_by_role("region", name="ServiceImport").inner_text()
    assert "east, west" in ports
    tab.assert_clean(console_hub.url)


def test_keyboard_alone_signs_in_and_opens_a_service(console_hub: ConsoleHub, tab: Tab) -> None:
    page = tab.page
    page.goto(console_hub.console)
    assert page.evaluate("document.activeElement.id") == "token"
    page.keyboard.type(console_hub.hub.reader_token)
    page.keyboard.press("Enter")
    page.locator("#feed-state.live").wait_for()
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "demo/web":
            break
    else:
        pytest.fail("Tab never reached the demo/web link")
    page.keyboard.press("Enter")
    page.locator("table.exports").wait_for()
    assert page.evaluate("document.activeElement.id") == "service-heading"
    assert page.url.endswith("#/services/demo/web")
    tab.assert_clean(console_hub.url)


# The fleet and services views are the overview's two sections on their own.
@pytest.mark.parametrize("route", ["sign-in", "", "#/services/demo/api"])
def test_axe_finds_no_serious_or_critical_violation(
    console_hub: ConsoleHub, tab: Tab, route: str
) -> None:
    page = tab.page
    if route == "sign-in":
        page.goto(console_hub.console)
        page.locator("#token").wait_for()
    else:
        sign_in(tab, console_hub, route=route)
        if "services/" in route:
            page.locator("table.exports").wait_for()
    page.evaluate(axe_source())  # through DevTools, so the page's CSP does not apply
    violations = page.evaluate(
        """async () => (await axe.run(document, { resultTypes: ["violations"] })).violations
            .map((v) => ({ id: v.id, impact: v.impact, help: v.help,
                           nodes: v.nodes.map((n) => n.target.join(" ")) }))"""
    )
    serious = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert serious == [], serious
    tab.assert_clean(console_hub.url)


def test_a_hub_that_cannot_answer_keeps_the_operator_signed_in(
    console_hub: ConsoleHub, tab: Tab
) -> None:
    page = sign_in(tab, console_hub)
    unavailable = {"kind": "Status", "code": 503, "message": "database unavailable"}
    page.route("**/api/v1/clusters", lambda route: route.fulfill(status=503, json=unavailable))
    page.reload()
    page.get_by_role("heading", name="The hub cannot be read right now").wait_for()
    assert "database unavailable" in page.get_by_role("alert").inner_text()
    assert page.evaluate("sessionStorage.getItem('mcsync.console.token')") is not None
    page.unroute("**/api/v1/clusters")
    page.get_by_role("button", name="Try again").press("Enter")
    page.locator("#feed-state.live").wait_for()
    assert page.locator("h1").inner_text() == "Fleet overview"
    tab.errors = [e for e in tab.errors if "status of 503" not in e]
    tab.assert_clean(console_hub.url)


# Last in this module: it adds a cluster and sixty services to the shared fleet.
def test_the_list_pages_through_the_hub_fifty_rows_at_a_time(
    console_hub: ConsoleHub, tab: Tab
) -> None:
    seeder = console_hub.seeder
    seeder.register("bulk")
    names = [f"s{index:02d}" for index in range(60)]
    seeder.sync("bulk", [export_body("bulk", name, namespace="bulk") for name in names])
    page = sign_in(tab, console_hub, route="#/services?q=bulk")
    wait_until(lambda: len(service_rows(page)) == 50, what="the first page")
    assert service_rows(page) == [f"bulk/{name}" for name in names[:50]]
    assert page.get_by_role("button", name="Previous page").is_disabled()
    page.get_by_role("button", name="Next page").click()
    wait_until(lambda: service_rows(page) == [f"bulk/{name}" for name in names[50:]],
               what="the second page")
    assert any("q=bulk" in url and "continue=" in url for url in tab.requests), tab.requests
    assert page.get_by_role("button", name="Next page").is_disabled()
    # A live change of a row on screen: it is read again, with the rest of its page.
    seeder.export("west", "s55", namespace="bulk", created="2026-01-03T12:00:00.000Z")
    wait_until(lambda: "bulk, west" in row(
        page, page.locator("table.services"), "bulk/s55").inner_text(), what="s55 from west")
    page.get_by_role("button", name="Previous page").click()
    wait_until(lambda: service_rows(page) == [f"bulk/{name}" for name in names[:50]],
               what="the first page again")
    assert len(service_rows(page)) == 50
    tab.assert_clean(console_hub.url)


@pytest.mark.parametrize("route", ["", "#/services", "#/fleet", "#/services/demo/api"])
def test_a_420_pixel_window_never_scrolls_sideways(
    console_hub: ConsoleHub, tab: Tab, route: str
) -> None:
    """A phone or a narrow side panel: wide tables scroll inside their own holder, long
    names wrap, and the page itself is never wider than the window."""
    page = tab.page
    page.set_viewport_size({"width": 420, "height": 800})
    sign_in(tab, console_hub, route=route)
    page.locator("table").first.wait_for()
    if "services/" in route:
        page.locator("table.exports").wait_for()
    widths = page.evaluate(
        "({page: document.documentElement.scrollWidth, window: window.innerWidth})")
    assert widths["page"] <= widths["window"], widths
    tab.assert_clean(console_hub.url)


def test_times_in_the_tables_read_as_ages(console_hub: ConsoleHub, tab: Tab) -> None:
    page = sign_in(tab, console_hub, route="#/services/demo/api")
    exports = page.locator("table.exports")
    exports.wait_for()
    since = row(page, exports, "east").locator("td").nth(2)
    assert re.fullmatch(r"\d+ (s|min|h|d) ago", since.inner_text().strip())
    # The exact moment stays one hover away.
    assert re.match(r"\d{4}-\d\d-\d\dT", since.locator("time").get_attribute("title") or "")
    tab.assert_clean(console_hub.url)
