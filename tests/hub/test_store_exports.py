"""ExportStore round trips on SQLite and PostgreSQL: put, get, delete, patch, list."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry import trace
from sqlalchemy import func, select

from hub.store import Conflict, NotFound, Store
from hub.store.tables import changes
from shared.constants import ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION as LAST_OBSERVED
from tests.hub.test_store_support import at, conflict_of, make_export, opened_store


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, "alpha", "beta") as s:
        yield s


async def change_rows(store: Store) -> int:
    async with store.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(changes))).scalar_one())


async def test_put_get_delete_round_trip(store: Store) -> None:
    export = make_export("alpha", annotations={"team": "web"})
    put = await store.exports.put("alpha", export)
    assert put.created and put.changed
    assert put.object.spec == export.spec
    assert put.object.metadata.annotations == {"team": "web"}
    assert conflict_of(put.object) == ("False", "NoConflicts")
    assert put.object.metadata.resource_version == str(await store.feed.current_revision())

    got = await store.exports.get("alpha", "demo", "web")
    assert got == put.object

    gone = await store.exports.delete("alpha", "demo", "web")
    assert gone.spec == export.spec
    assert int(gone.metadata.resource_version or 0) > int(put.object.metadata.resource_version or 0)
    with pytest.raises(NotFound, match="demo/web"):
        await store.exports.get("alpha", "demo", "web")
    with pytest.raises(NotFound, match="demo/web"):
        await store.exports.delete("alpha", "demo", "web")


async def test_replace_changes_spec_and_takes_a_new_revision(store: Store) -> None:
    first = await store.exports.put("alpha", make_export("alpha"))
    second = await store.exports.put("alpha", make_export("alpha", ports=[{"port": 8080}]))
    assert not second.created and second.changed
    assert [p.port for p in second.object.spec.ports] == [8080]
    assert int(second.object.metadata.resource_version or 0) > int(
        first.object.metadata.resource_version or 0
    )
    assert second.object.metadata.creation_timestamp == first.object.metadata.creation_timestamp


async def test_identical_re_put_writes_nothing(store: Store) -> None:
    first = await store.exports.put("alpha", make_export("alpha", annotations={"a": "1"}))
    revision, rows = await store.feed.current_revision(), await change_rows(store)

    again = await store.exports.put("alpha", make_export("alpha", annotations={"a": "1"}))
    # annotations omitted (None) keep the stored ones: still identical
    kept = await store.exports.put("alpha", make_export("alpha", annotations=None))

    for result in (again, kept):
        assert not result.created and not result.changed
        assert result.object.metadata.resource_version == first.object.metadata.resource_version
        assert result.object.metadata.annotations == {"a": "1"}
    assert await store.feed.current_revision() == revision
    assert await change_rows(store) == rows


async def test_put_with_other_annotations_replaces_them(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", annotations={"a": "1"}))
    result = await store.exports.put("alpha", make_export("alpha", annotations={"b": "2"}))
    assert result.changed
    assert result.object.metadata.annotations == {"b": "2"}


async def test_put_for_unregistered_cluster_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="gamma"):
        await store.exports.put("gamma", make_export("gamma"))
    assert await store.feed.current_revision() == 0


async def test_put_under_another_cluster_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="clusterId 'beta'"):
        await store.exports.put("alpha", make_export("beta"))


async def test_patch_annotations_with_precondition(store: Store) -> None:
    put = await store.exports.put("alpha", make_export("alpha", annotations={"keep": "me"}))
    rv = put.object.metadata.resource_version
    assert rv is not None

    patched = await store.exports.patch_annotations(
        "alpha", "demo", "web", resource_version=rv, annotations={LAST_OBSERVED: "100"}
    )
    assert patched.metadata.annotations == {"keep": "me", LAST_OBSERVED: "100"}
    assert int(patched.metadata.resource_version or 0) == int(rv) + 1
    assert patched.spec == put.object.spec
    assert await store.exports.get("alpha", "demo", "web") == patched

    # a null value removes a key
    removed = await store.exports.patch_annotations(
        "alpha",
        "demo",
        "web",
        resource_version=patched.metadata.resource_version or "",
        annotations={"keep": None},
    )
    assert removed.metadata.annotations == {LAST_OBSERVED: "100"}


async def test_patch_of_annotations_keeps_the_verdict_and_judges_nothing(store: Store) -> None:
    """The judge reads specs alone (docs/reference.md#conflicts): the agent's dedupe annotation
    patch (docs/reference.md#export-path) stores a new revision with the verdict it had, and costs
    no conflict resolution."""
    await store.exports.put("beta", make_export("beta", type="Headless"))
    put = await store.exports.put("alpha", make_export("alpha"))
    assert conflict_of(put.object)[0] == "True"
    resolutions: list[float] = []
    store.instrument(tracer=trace.NoOpTracer(), resolution_seconds=resolutions.append)
    patched = await store.exports.patch_annotations(
        "alpha", "demo", "web", resource_version=put.object.metadata.resource_version or "",
        annotations={LAST_OBSERVED: "7"},
    )
    assert resolutions == []
    assert patched.status.conditions == put.object.status.conditions
    before, after = put.object.metadata.resource_version, patched.metadata.resource_version
    assert int(after or 0) > int(before or 0)
    stored = await store.exports.get("alpha", "demo", "web")
    assert (stored.status.conditions, stored.metadata.annotations) == (
        put.object.status.conditions, {LAST_OBSERVED: "7"}
    )
    # A spec change of the same key is judged again.
    await store.exports.put("alpha", make_export("alpha", type="Headless"))
    assert len(resolutions) == 1
    assert conflict_of(await store.exports.get("alpha", "demo", "web"))[0] == "False"


async def test_patch_with_stale_resource_version_changes_nothing(store: Store) -> None:
    put = await store.exports.put("alpha", make_export("alpha"))
    rv = put.object.metadata.resource_version or ""
    await store.exports.patch_annotations(
        "alpha", "demo", "web", resource_version=rv, annotations={LAST_OBSERVED: "1"}
    )
    revision, rows = await store.feed.current_revision(), await change_rows(store)

    with pytest.raises(Conflict, match="resourceVersion"):
        await store.exports.patch_annotations(
            "alpha", "demo", "web", resource_version=rv, annotations={LAST_OBSERVED: "2"}
        )
    assert (await store.exports.get("alpha", "demo", "web")).metadata.annotations == {
        LAST_OBSERVED: "1"
    }
    assert await store.feed.current_revision() == revision
    assert await change_rows(store) == rows


async def test_patch_that_changes_nothing_makes_no_revision(store: Store) -> None:
    put = await store.exports.put("alpha", make_export("alpha", annotations={"a": "1"}))
    revision = await store.feed.current_revision()
    same = await store.exports.patch_annotations(
        "alpha",
        "demo",
        "web",
        resource_version=put.object.metadata.resource_version or "",
        annotations={"a": "1", "absent": None},
    )
    assert same.metadata.resource_version == put.object.metadata.resource_version
    assert await store.feed.current_revision() == revision


async def test_patch_of_missing_export_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="demo/nope"):
        await store.exports.patch_annotations(
            "alpha", "demo", "nope", resource_version="1", annotations={"a": "b"}
        )
    assert (await store.imports.list()).items == []


async def test_list_filters_and_pages(store: Store) -> None:
    for i in range(5):
        await store.exports.put("alpha", make_export("alpha", name=f"svc{i}"))
    await store.exports.put("beta", make_export("beta", name="svc0", created=at(10)))
    await store.exports.put("beta", make_export("beta", namespace="other", name="svc9"))
    # a clash on demo/svc1: beta's type differs from alpha's
    await store.exports.put("beta", make_export("beta", name="svc1", type="Headless"))

    everything = await store.exports.list()
    assert len(everything.items) == 8
    assert everything.continue_token is None
    assert everything.resource_version == str(await store.feed.current_revision())
    keys = [
        (e.metadata.namespace, e.metadata.name, e.spec.service_reference.cluster_id)
        for e in everything.items
    ]
    assert keys == sorted(keys)

    assert len((await store.exports.list(cluster_id="beta")).items) == 3
    assert len((await store.exports.list(namespace="other")).items) == 1
    assert len((await store.exports.list(name="svc0")).items) == 2
    conflicting = await store.exports.list(conflict=True)
    assert {(e.metadata.name, e.spec.service_reference.cluster_id) for e in conflicting.items} == {
        ("svc1", "alpha"),
        ("svc1", "beta"),
    }
    assert len((await store.exports.list(conflict=False)).items) == 6

    seen = []
    token = None
    while True:
        page = await store.exports.list(limit=3, continue_token=token)
        assert len(page.items) <= 3
        seen.extend(page.items)
        token = page.continue_token
        if token is None:
            break
    assert seen == everything.items

    with pytest.raises(ValueError, match="continue token"):
        await store.exports.list(continue_token="not-a-token")
    with pytest.raises(ValueError, match="limit"):
        await store.exports.list(limit=0)
