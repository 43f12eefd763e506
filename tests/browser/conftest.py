"""Fixtures of the console's browser tests: one hub process with a seeded fleet and one
Chromium per module; a fresh browser context (its own session storage) per test, whose
requests and console messages are recorded so that every test can say none went
elsewhere and nothing failed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.browser.support import FleetSeeder, chromium, seed_demo
from tests.member.agent_support import HubProcess


@dataclass
class ConsoleHub:
    hub: HubProcess
    seeder: FleetSeeder

    @property
    def url(self) -> str:
        return self.hub.url

    @property
    def console(self) -> str:
        return f"{self.hub.url}/ui/"


@dataclass
class Tab:
    """A page and what it did: every request URL, console errors, uncaught exceptions."""

    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def assert_clean(self, origin: str) -> None:
        elsewhere = [url for url in self.requests if not url.startswith(origin + "/")]
        assert elsewhere == [], f"requests to another origin: {elsewhere}"
        assert self.errors == [], f"console errors: {self.errors}"


@pytest.fixture(scope="module")
def console_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHub]:
    directory: Path = tmp_path_factory.mktemp("console-hub")
    hub = HubProcess(directory=directory, extra_args=["--watch-bookmark-seconds", "1"])
    hub.start()
    seeder = FleetSeeder(hub.url, admin_token=hub.admin_token)
    try:
        seed_demo(seeder)
        yield ConsoleHub(hub=hub, seeder=seeder)
    finally:
        seeder.close()
        hub.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def tab(browser: Any) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    recorded = Tab(page=page)
    page.on("request", lambda request: recorded.requests.append(request.url))
    page.on(
        "console",
        lambda message: recorded.errors.append(message.text) if message.type == "error" else None,
    )
    page.on("pageerror", lambda error: recorded.errors.append(str(error)))
    try:
        yield recorded
    finally:
        context.close()
