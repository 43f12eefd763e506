"""`HubView`: our writes' answers win over a lagging feed, and are let go once it catches up."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from member.hubfeed import HubView
from member.transform import transform_hub_record
from shared import conditions as c
from shared.models import InternalServiceExport, to_wire

SINCE = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "shop/web"


def record(revision: int, *, port: int = 80, message: str = "") -> InternalServiceExport:
    body: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": str(revision)},
        "spec": {
            "ports": [{"name": "http", "protocol": "TCP", "port": port}],
            "serviceReference": {
                "clusterId": "east",
                "namespace": "shop",
                "name": "web",
                "resourceVersion": "7",
                "exportedSince": SINCE.isoformat(),
                "exportCreationTimestamp": SINCE.isoformat(),
            },
        },
    }
    if message:
        body["status"] = {
            "conditions": [
                {"type": c.CONFLICT, "status": "False", "reason": "NoConflicts", "message": message}
            ]
        }
    return InternalServiceExport.model_validate(body)


class FeedCache:
    """The part of an Informer HubView reads: its cache (transformed) and its position."""

    def __init__(self) -> None:
        self.cache: dict[str, dict[str, Any]] = {}
        self.resource_version = "0"

    def feed(self, rec: InternalServiceExport) -> None:
        self.cache[KEY] = transform_hub_record(to_wire(rec))
        self.resource_version = str(rec.metadata.resource_version)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(key)

    def keys(self) -> list[str]:
        return list(self.cache)


def view_over(feed: FeedCache) -> HubView:
    return HubView(feed)  # type: ignore[arg-type]


def test_our_write_wins_until_the_feed_catches_up_then_is_let_go() -> None:
    feed = FeedCache()
    feed.feed(record(10, port=80))
    view = view_over(feed)
    ours = record(12, port=81, message="judged")
    view.remember(ours)
    got = view.get(KEY)
    assert got is not None and got.spec == ours.spec
    verdict = got.condition(c.CONFLICT)
    assert verdict is not None and verdict.message == "judged"
    assert view.pending() == 1

    feed.feed(record(12, port=81, message="judged"))
    view.settle(KEY)  # what the agent calls on each feed event
    assert view.pending() == 0
    got = view.get(KEY)
    assert got is not None and got.metadata.resource_version == "12"


def test_a_write_the_feed_already_has_is_not_held() -> None:
    """A duration check that changed nothing answers the record the feed delivered: holding
    it would keep one record per key after a startup repair."""
    feed = FeedCache()
    feed.feed(record(10))
    view = view_over(feed)
    view.remember(record(10))
    assert view.pending() == 0
    got = view.get(KEY)
    assert got is not None and got.metadata.resource_version == "10"


def test_a_withdrawal_hides_the_stale_record_until_the_feed_sees_it() -> None:
    feed = FeedCache()
    feed.feed(record(10))
    view = view_over(feed)
    view.forget(KEY, record(11))
    assert view.get(KEY) is None  # the feed still shows revision 10
    feed.cache.clear()
    feed.resource_version = "11"
    view.settle(KEY)
    assert view.pending() == 0 and view.get(KEY) is None
    # A later export of the same key (revision 13) is seen again.
    feed.feed(record(13))
    got = view.get(KEY)
    assert got is not None and got.metadata.resource_version == "13"


def test_held_answer_is_compact_but_complete() -> None:
    feed = FeedCache()
    view = view_over(feed)
    ours = record(5, message="m")
    view.remember(ours)
    got = view.get(KEY)
    assert got is not None
    assert got.spec == ours.spec and got.condition(c.CONFLICT) == copy.deepcopy(
        ours.condition(c.CONFLICT)
    )
