"""Console benchmark (docs/reference.md#console): the fleet console at size, in a real browser.

    python -m bench.console [--services 10000] [--backend sqlite|postgresql] [--smoke]

One hub process on a fresh database; four clusters export `--services` Services between
them through full-state syncs (every tenth also from a second cluster, every hundredth of
those with another type: a conflict). Debian's Chromium, driven by Playwright as the
browser tests drive it (`tests/browser/support.py`), then measures:

* **overview**: from pressing Enter on the sign-in form to the clusters table and the first
  services on screen (the conflicting ones come first), and to the full first page of 50
  rows (the browser holds only that page: there is nothing more to load);
* **search**: from a search field `input` event to the table rewritten with the hub's
  answer and laid out, timed inside the page (`performance.now()`), for queries matching
  one, a hundred and every row: the console's 100 ms debounce, the hub's paged `q` query
  (SQL) and the render; `search_after_debounce_ms` is the same less the debounce;
* **live**: from the PUT of a new export (a key the table is filtered to) to its row on
  screen, measured by this process: hub commit, feed push, the page's read and the render;
* **watches**: the hub's `mcsync_hub_active_watches` before and with the console open.

Targets: overview < 2 s, search < 200 ms, live < 1 s, one more watch.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.support import base_parser, fresh_database_sync, percentiles, write_result
from tests.browser.support import FleetSeeder, chromium, export_body
from tests.member.agent_support import HubProcess

CLUSTERS = ("east", "west", "north", "south")
NAMESPACES = 20
LIVE_CHANGES = 20
SEARCHES = ("svc-00777", "team-07 svc-001", "svc-", "west team-1")


def service(index: int) -> tuple[str, str]:
    return f"team-{index % NAMESPACES:02d}", f"svc-{index:05d}"


def fleet_bodies(services: int) -> dict[str, list[dict[str, Any]]]:
    """Each cluster's exports: service i from cluster i % 4, every tenth also from the next
    cluster (every hundredth of those as Headless: a TypeConflict)."""
    bodies: dict[str, list[dict[str, Any]]] = {cluster: [] for cluster in CLUSTERS}
    for index in range(services):
        namespace, name = service(index)
        owner = CLUSTERS[index % len(CLUSTERS)]
        bodies[owner].append(export_body(owner, name, namespace=namespace))
        if index % 10 == 0:
            other = CLUSTERS[(index + 1) % len(CLUSTERS)]
            extra = {"type": "Headless"} if index % 100 == 0 else {}
            bodies[other].append(export_body(
                other, name, namespace=namespace, created="2026-01-02T12:00:00.000Z", **extra
            ))
    return bodies


def active_watches(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(r"^mcsync_hub_active_watches (\S+)$", text, re.M)
    return float(match.group(1)) if match else float("nan")


DEBOUNCE_MS = 100  # hub/console/static/views.js SEARCH_DEBOUNCE_MS

# Resolves when the list's status names the query (“query”): the hub's answer is rendered.
SEARCH_IN_PAGE = """(query) => new Promise((resolve) => {
  const input = document.getElementById("service-search");
  const status = document.getElementById("services-status");
  const holder = document.querySelector(".table-holder");
  const answered = () => status.textContent.includes(`“${query}”`) ||
    holder.textContent.includes(`No service matches “${query}”`);
  const start = performance.now();
  const observer = new MutationObserver(() => {
    if (!answered()) return;
    observer.disconnect();
    document.body.getBoundingClientRect();  // force the layout of the rewritten table
    const rows = document.querySelectorAll("table.services tbody tr").length;
    resolve({ ms: performance.now() - start, rows, status: status.textContent });
  });
  observer.observe(document.getElementById("main"),
                   { childList: true, subtree: true, characterData: true });
  input.value = query;
  input.dispatchEvent(new Event("input"));
})"""


def run(args: Any) -> dict[str, Any]:
    services = 300 if args.smoke else args.services
    with fresh_database_sync(args.backend) as url, tempfile.TemporaryDirectory() as tmp:
        hub = HubProcess(directory=Path(tmp), database=url,
                         extra_args=["--max-body-bytes", str(256 * 1024 * 1024)])
        hub.start()
        seeder = FleetSeeder(hub.url, admin_token=hub.admin_token)
        try:
            started = time.monotonic()
            for cluster in CLUSTERS:
                seeder.register(cluster)
            for cluster, bodies in fleet_bodies(services).items():
                seeder.sync(cluster, bodies)
            fill_seconds = time.monotonic() - started
            watches_before = active_watches(hub.url)
            with chromium() as browser:
                page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
                page.set_default_timeout(60_000)
                page.goto(f"{hub.url}/ui/")
                page.locator("#token").fill(hub.reader_token)
                begin = time.monotonic()
                page.keyboard.press("Enter")
                page.locator("table.clusters tbody tr").first.wait_for()
                page.locator("table.services tbody a").first.wait_for()
                overview = time.monotonic() - begin
                page.wait_for_function(
                    "(n) => document.querySelectorAll('table.services tbody tr').length >= n",
                    arg=min(50, services),
                )
                first_page = time.monotonic() - begin
                page.locator("#feed-state.live").wait_for()
                held_rows = page.evaluate(
                    "document.querySelectorAll('table.services tbody tr').length")
                watches_open = active_watches(hub.url)

                searches = []
                for _ in range(3):
                    for query in SEARCHES:
                        searches.append(page.evaluate(SEARCH_IN_PAGE, query))
                search_ms = [s["ms"] for s in searches]

                page.evaluate(SEARCH_IN_PAGE, "bench-live")
                live = []
                for index in range(LIVE_CHANGES):
                    name = f"bench-live-{index:03d}"
                    sent = time.monotonic()
                    seeder.export("east", name, namespace="team-00")
                    page.locator("table.services a", has_text=f"team-00/{name}").wait_for()
                    live.append(time.monotonic() - sent)
        finally:
            seeder.close()
            hub.stop()
    added_watches = watches_open - watches_before
    met = (overview < 2.0 and max(search_ms) < 200 and max(live) < 1.0 and added_watches == 1)
    return {
        "services": services,
        "clusters": len(CLUSTERS),
        "fill_seconds": round(fill_seconds, 1),
        "overview_on_screen_ms": round(overview * 1000, 1),
        "first_page_full_ms": round(first_page * 1000, 1),
        "rows_in_page": held_rows,
        "search_after_debounce_ms": {
            "median": round(statistics.median(search_ms) - DEBOUNCE_MS, 2),
            "max": round(max(search_ms) - DEBOUNCE_MS, 2),
        },
        "search_ms": {
            "median": round(statistics.median(search_ms), 2),
            "max": round(max(search_ms), 2),
            "per_query": {s["status"]: round(s["ms"], 2) for s in searches[: len(SEARCHES)]},
        },
        "live_change": percentiles(live),
        "watches": {"before": watches_before, "console_open": watches_open},
        "target": {"overview_ms": 2000, "search_ms": 200, "live_ms": 1000, "added_watches": 1,
                   "met": met},
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=10_000, help="service keys in the fleet")
    args = parser.parse_args()
    write_result("console", args, run(args))


if __name__ == "__main__":
    main()
