"""Takes the screenshots of docs/console.md with the browser tests' own setup.

    python -m tests.browser.screenshots [--output docs/console]

A hub process on a temporary SQLite file, the browser tests' demo fleet
(`support.seed_demo`) written through the REST API plus a fourth cluster, `south`, that
stops heartbeating (Stale, its endpoints withdrawn) while `west` reports a held mass
withdrawal, and Debian's Chromium through Playwright: one PNG per view, at 1 device pixel
per CSS pixel to keep them small.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx

from tests.browser.support import Beater, FleetSeeder, chromium, seed_demo
from tests.member.agent_support import HubProcess

VIEWS = (
    ("sign-in", None),
    ("overview", ""),
    ("fleet", "#/fleet"),
    ("services", "#/services?q=demo"),
    ("service-conflict", "#/services/demo/api"),
    ("service-endpoints", "#/services/demo/web"),
)


def wait_stale(hub: HubProcess, cluster: str) -> None:
    headers = {"Authorization": f"Bearer {hub.reader_token}"}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = httpx.get(f"{hub.url}/api/v1/clusters/{cluster}", headers=headers, timeout=10)
        if answer.json()["status"].get("endpointsWithdrawn"):
            return
        time.sleep(0.2)
    raise SystemExit(f"{cluster} did not go Stale")


def take(output: Path) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        hub = HubProcess(directory=Path(tmp), extra_args=["--cluster-ttl", "3"])
        hub.start()
        seeder = FleetSeeder(hub.url, admin_token=hub.admin_token)
        try:
            seed_demo(seeder)
            seeder.register("south")
            seeder.export("south", "web", created="2026-01-01T12:00:00.000Z")
            seeder.slice("south", "web", ready=1, total=1)
            beating = {c: seeder.tokens[c] for c in ("east", "west")}
            with Beater(hub.url, beating, held={"west": (12, 20)}), chromium() as browser:
                wait_stale(hub, "south")
                context = browser.new_context(
                    viewport={"width": 1100, "height": 700}, device_scale_factor=1
                )
                page = context.new_page()
                page.goto(f"{hub.url}/ui/")
                for name, route in VIEWS:
                    if route is not None:
                        page.goto(f"{hub.url}/ui/{route}")
                        page.locator("#feed-state.live").wait_for()
                        if "services/" in route:
                            page.locator("table.exports").wait_for()
                    path = output / f"{name}.png"
                    page.screenshot(path=str(path), full_page=True)
                    written.append(path)
                    if route is None:  # sign in for the views after this one
                        page.locator("#token").fill(hub.reader_token)
                        page.keyboard.press("Enter")
                        page.locator("#feed-state.live").wait_for()
        finally:
            seeder.close()
            hub.stop()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("docs/console"))
    for path in take(parser.parse_args().output):
        print(path, path.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
