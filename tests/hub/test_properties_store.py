"""The one table of ServiceImport properties drives the store: for each decided row, the
fleet-wide SQL query (on SQLite and PostgreSQL) finds an export that differs from its
winner on that row alone, with the row's reason and both values in wire form; and the hub
serves the table's words to the console."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from hub.app import create_app
from hub.store import Store
from shared import properties
from tests.hub.test_api_support import settings_for
from tests.hub.test_store_support import at, make_export, opened_store
from tests.shared.test_properties import DECIDED, SAMPLES, sample_fields


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, "alpha", "beta", "gamma") as s:
        yield s


@pytest.mark.parametrize("prop", DECIDED)
async def test_the_sql_query_finds_each_row(
    store: Store, prop: properties.ImportProperty
) -> None:
    won, lost = SAMPLES[prop.name]
    await store.exports.put("alpha", make_export("alpha", created=at(0),
                                                 **sample_fields(prop, won)))
    await store.exports.put("beta", make_export("beta", created=at(1),
                                                **sample_fields(prop, lost)))
    await store.exports.put("gamma", make_export("gamma", created=at(2),
                                                 **sample_fields(prop, won)))
    page = await store.conflicts.list()
    assert [(i.cluster, i.winner) for i in page.items] == [("beta", "alpha")]
    (disputed,) = page.items[0].properties
    assert (disputed.field, disputed.reason) == (prop.name, prop.reason)
    assert disputed.value == lost
    assert disputed.decided_value == won
    export = await store.exports.get("beta", "demo", "web")
    condition = export.condition("Conflict")
    assert condition is not None and condition.reason == prop.reason


async def test_the_console_reads_the_words_from_the_hub() -> None:
    app = create_app(settings_for("sqlite:///unused.db"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://hub") as client:
        answer = await client.get("/ui/words.json")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert "default-src 'self'" in answer.headers["content-security-policy"]
    assert answer.json() == properties.words_document()
