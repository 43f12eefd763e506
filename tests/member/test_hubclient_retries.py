"""`member.hubclient`'s retries against a real local HTTP server that plays a busy hub.

The hub itself answers 503 with `Retry-After` in seconds; a proxy or load balancer in front
of it may answer with an HTTP-date instead (RFC 9110 §10.2.3). This server says whatever
a test scripts, so both forms, and a garbled one, can be sent over a real socket. The
client's `sleep` is recorded instead of slept: the test sees the wait the client chose.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from member.hubclient import HubClient, HubClientConfig, HubUnavailable

VERSION = {"hubVersion": "9.9.9", "apiVersion": "mcsync.io/v1alpha1", "minAgentVersion": "0.1.0"}


class BusyHub(ThreadingHTTPServer):
    """Answers each request with the next scripted (status, Retry-After) and, once the
    script is spent, with the hub's version."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.script: list[tuple[int, str | None]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def next_answer(self, path: str) -> tuple[int, str | None]:
        with self._lock:
            self.paths.append(path)
            return self.script.pop(0) if self.script else (200, None)


class _Answer(BaseHTTPRequestHandler):
    server: BusyHub

    def do_GET(self) -> None:
        status, retry_after = self.server.next_answer(self.path)
        body = json.dumps(VERSION if status == 200 else {"kind": "Status", "message": "busy"})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test asserts on `BusyHub.paths`."""


@pytest.fixture
def busy_hub() -> Iterator[BusyHub]:
    hub = BusyHub()
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    yield hub
    hub.shutdown()
    hub.server_close()


def client(hub: BusyHub, sleeps: list[float], **config: Any) -> HubClient:
    settings: dict[str, Any] = {"backoff_initial": 0.01, "backoff_max": 0.05, **config}
    return HubClient(
        HubClientConfig(base_url=hub.url, cluster_id="east", token="t", **settings),
        sleep=sleeps.append,
    )


def http_date(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")


def test_waits_until_the_http_date_retry_after_names(busy_hub: BusyHub) -> None:
    busy_hub.script = [(503, http_date(datetime.now(UTC) + timedelta(seconds=30)))]
    sleeps: list[float] = []
    with client(busy_hub, sleeps, retry_after_max=60.0) as hub:
        assert hub.version().hub_version == "9.9.9"
    assert busy_hub.paths == ["/api/v1/version"] * 2
    # The date has whole seconds and a moment passed between writing and reading it.
    assert len(sleeps) == 1 and 28.0 < sleeps[0] <= 30.0


def test_retry_after_in_seconds_is_waited_and_a_far_one_clamped(busy_hub: BusyHub) -> None:
    busy_hub.script = [(429, "3"), (503, "3600")]
    sleeps: list[float] = []
    with client(busy_hub, sleeps, retry_after_max=7.0) as hub:
        hub.version()
    assert sleeps == [3.0, 7.0]


def test_a_past_or_garbled_retry_after_falls_back_to_the_clients_backoff(
    busy_hub: BusyHub,
) -> None:
    busy_hub.script = [(503, "Sun, 06 Nov 1994 08:49:37 GMT"), (503, "in a moment")]
    sleeps: list[float] = []
    with client(busy_hub, sleeps, backoff_initial=0.01, backoff_max=0.05) as hub:
        hub.version()
    assert len(sleeps) == 2
    assert 0.0 <= sleeps[0] <= 0.01 and 0.0 <= sleeps[1] <= 0.02


def test_a_hub_busy_through_the_budget_is_unavailable(busy_hub: BusyHub) -> None:
    busy_hub.script = [(503, "1")] * 3
    sleeps: list[float] = []
    with client(busy_hub, sleeps, max_attempts=3) as hub, pytest.raises(HubUnavailable) as info:
        hub.version()
    assert "after 3 attempts" in str(info.value)
    assert sleeps == [1.0, 1.0]  # no wait after the last attempt


def test_a_backoff_that_makes_no_sense_is_refused() -> None:
    with pytest.raises(ValueError, match="backoff cap"):
        HubClientConfig(
            base_url="http://127.0.0.1:1",
            cluster_id="east",
            token="t",
            backoff_initial=5.0,
            backoff_max=1.0,
        )
