"""The hub's `/metrics` (docs/reference.md#observability): series and values checked against the
API's own answers.

Exports by verdict must equal what `GET /api/v1/serviceexports?conflict=…` answers; the
conflict-resolution histogram counts one sample per write that changed something; request
durations are labelled by route template, never by a path with names in it; nothing in the
exposition carries a cluster name, a service name or a token.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hub.api.deps import context_of
from hub.metrics import HubMetrics
from member.hubclient import ROUTE_EXPORT
from tests.hub.test_api_support import (
    ADMIN,
    ADMIN_TOKEN,
    READER_TOKEN,
    Hub,
    at,
    export_path,
    running_hub,
    serving,
)

DEADLINE = 30.0


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(client: httpx.AsyncClient) -> tuple[str, Samples]:
    answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return answer.text, samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of every sample `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


async def fleet_count(hub: Hub, *, conflict: bool) -> int:
    answer = await hub.client.get(
        "/api/v1/serviceexports", params={"conflict": str(conflict).lower()}, headers=ADMIN
    )
    assert answer.status_code == 200
    return len(answer.json()["items"])


async def test_exports_by_verdict_and_resolutions_match_the_api(hub: Hub) -> None:
    members = await hub.register("east", "west")
    _, before = await scrape(hub.client)
    assert value(before, "mcsync_hub_exports", verdict="conflict") == 0
    assert value(before, "mcsync_hub_exports", verdict="no_conflict") == 0
    assert value(before, "mcsync_hub_conflict_resolution_duration_seconds_count") == 0

    # web: east is the older export; west's differing session affinity makes both conflict.
    assert (await hub.put("east", members["east"], created=at(0))).status_code == 201
    west = await hub.put("west", members["west"], created=at(5), sessionAffinity="ClientIP")
    assert west.status_code == 201
    assert (await hub.put("east", members["east"], name="api")).status_code == 201
    # An identical re-PUT writes nothing: no resolution.
    assert (await hub.put("east", members["east"], name="api")).status_code == 200

    _, after = await scrape(hub.client)
    assert value(after, "mcsync_hub_exports", verdict="conflict") == 2
    assert await fleet_count(hub, conflict=True) == 2
    assert value(after, "mcsync_hub_exports", verdict="no_conflict") == 1
    assert await fleet_count(hub, conflict=False) == 1
    assert value(after, "mcsync_hub_conflict_resolution_duration_seconds_count") == 3
    assert value(after, "mcsync_hub_export_writes_total", outcome="created") == 3
    assert value(after, "mcsync_hub_export_writes_total", outcome="unchanged") == 1

    # The younger export withdraws: web is re-judged, nothing conflicts any more.
    gone = await hub.client.delete(export_path("west"), headers=members["west"])
    assert gone.status_code == 200
    _, last = await scrape(hub.client)
    assert value(last, "mcsync_hub_exports", verdict="conflict") == 0 == await fleet_count(
        hub, conflict=True
    )
    assert value(last, "mcsync_hub_exports", verdict="no_conflict") == 2
    assert value(last, "mcsync_hub_conflict_resolution_duration_seconds_count") == 4


async def test_request_series_use_route_templates_and_never_carry_names_or_tokens(
    hub: Hub,
) -> None:
    members = await hub.register("east")
    token = members["east"]["Authorization"].removeprefix("Bearer ")
    assert (await hub.put("east", members["east"], name="checkout")).status_code == 201
    read = await hub.client.get(export_path("east", name="checkout"), headers=members["east"])
    assert read.status_code == 200
    missing = await hub.client.get(export_path("east", name="nothing"), headers=members["east"])
    assert missing.status_code == 404
    unknown = await hub.client.get("/no/such/place", headers=ADMIN)
    assert unknown.status_code == 404

    text, samples = await scrape(hub.client)
    count = "mcsync_hub_request_duration_seconds_count"
    assert value(samples, count, method="PUT", route=ROUTE_EXPORT, code="201") == 1
    assert value(samples, count, method="GET", route=ROUTE_EXPORT, code="200") == 1
    assert value(samples, count, method="GET", route=ROUTE_EXPORT, code="404") == 1
    assert value(samples, count, method="GET", route="<unmatched>", code="404") == 1
    routes = {dict(ls).get("route") for (n, ls) in samples if n == count}
    assert all(r is not None and (r.startswith("/") or r == "<unmatched>") for r in routes)
    assert not any("/no/such" in str(r) for r in routes)
    for secret in ("east", "checkout", "nothing", token, ADMIN_TOKEN, READER_TOKEN):
        # Only label values matter; help texts are fixed prose.
        labels = [v for (_, ls) in samples for _, v in ls]
        assert not any(secret in label for label in labels), secret
    assert token not in text


async def test_pool_usage_and_process_series(hub: Hub) -> None:
    _, samples = await scrape(hub.client)
    limit = value(samples, "mcsync_hub_db_pool_max_connections")
    assert limit == 2 * hub.settings.pool_size  # pool size plus as much overflow
    in_use = value(samples, "mcsync_hub_db_pool_connections", state="in_use")
    idle = value(samples, "mcsync_hub_db_pool_connections", state="idle")
    assert in_use is not None and idle is not None
    assert 0 <= in_use + idle <= limit
    assert value(samples, "process_cpu_seconds_total") is not None
    assert value(samples, "mcsync_hub_database_errors_total") == 0


async def test_feed_lag_is_how_far_the_furthest_watch_is_behind(hub: Hub) -> None:
    members = await hub.register("east")
    for second in range(3):
        answer = await hub.put("east", members["east"], name=f"svc{second}", created=at(second))
        assert answer.status_code == 201
    store = hub.store
    newest = store.feed.known_revision()
    assert newest > 0
    metrics = HubMetrics()
    lag = "mcsync_hub_feed_lag_revisions"
    await metrics.refresh(store, watch_positions=[newest, newest - 2])
    assert metrics.registry.get_sample_value(lag) == 2
    await metrics.refresh(store, watch_positions=[])
    assert metrics.registry.get_sample_value(lag) == 0
    await metrics.refresh(store, watch_positions=[newest + 1])  # read ahead of the notifier
    assert metrics.registry.get_sample_value(lag) == 0


async def test_open_watches_are_counted_and_caught_up(hub: Hub) -> None:
    members = await hub.register("east")
    path = "/api/v1/clusters/east/serviceexports"
    async with serving(hub.app) as url, httpx.AsyncClient(base_url=url, timeout=DEADLINE) as http:
        params = {"watch": "true", "resourceVersion": "0", "timeoutSeconds": "60"}
        async with http.stream("GET", path, params=params, headers=members["east"]) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            assert (await hub.put("east", members["east"])).status_code == 201
            async with asyncio.timeout(DEADLINE):
                event = json.loads(await anext(lines))
            assert event["type"] == "ADDED"

            async def caught_up() -> Samples:
                while True:
                    _, samples = await scrape(hub.client)
                    if value(samples, "mcsync_hub_feed_lag_revisions") == 0:
                        return samples
                    await asyncio.sleep(0.05)

            async with asyncio.timeout(DEADLINE):
                samples = await caught_up()
            assert value(samples, "mcsync_hub_active_watches") == 1
            assert value(samples, "mcsync_hub_watch_events_total", type="ADDED") == 1

    async def closed() -> None:
        while True:
            if not context_of(hub.app).open_watches:
                return
            await asyncio.sleep(0.05)

    async with asyncio.timeout(DEADLINE):
        await closed()  # the stream ends with its client; the gauge follows
    _, samples = await scrape(hub.client)
    assert value(samples, "mcsync_hub_active_watches") == 0


async def test_no_created_series_and_head_answers(hub: Hub) -> None:
    """No `*_created` timestamps beside the counters (they double every scrape for a fact
    `process_start_time_seconds` has), and `HEAD /metrics` answers as GET does, bodiless."""
    members = await hub.register("east")
    assert (await hub.put("east", members["east"])).status_code == 201
    scraped = await hub.client.get("/metrics")
    assert scraped.status_code == 200
    names = {s.name for f in text_string_to_metric_families(scraped.text) for s in f.samples}
    assert "mcsync_hub_export_writes_total" in names
    assert not [name for name in names if name.endswith("_created")]
    head = await hub.client.head("/metrics")
    assert head.status_code == 200
    assert head.headers["content-type"] == scraped.headers["content-type"]
    assert head.content == b""


async def test_feed_series_exist_for_both_feeds_from_the_start(hub: Hub) -> None:
    scraped = await hub.client.get("/metrics")
    samples = {
        (s.name, s.labels.get("feed")): s.value
        for f in text_string_to_metric_families(scraped.text)
        for s in f.samples
    }
    for feed in ("exports", "imports"):
        assert samples[("mcsync_hub_feed_watchers", feed)] == 0
        assert samples[("mcsync_hub_feed_events_encoded_total", feed)] == 0
        assert samples[("mcsync_hub_feed_events_fanned_out_total", feed)] == 0
