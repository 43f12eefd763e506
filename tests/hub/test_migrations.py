"""Alembic migrations on SQLite and PostgreSQL (docs/reference.md#failover): upgrade, downgrade,
upgrade."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from hub.store import Store, migrate
from hub.store.db import make_engine
from hub.store.tables import metadata

TABLES = {
    "clusters",
    "exports",
    "service_imports",
    "revision",
    "changes",
    "endpoint_slices",
    "endpoint_withdrawals",
    "cluster_usage",
    "import_selectors",
    "import_exclusions",
    "cluster_namespaces",
    "namespace_reports",
}


async def table_names(url: str) -> set[str]:
    engine = make_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    finally:
        await engine.dispose()
    return names - {"alembic_version"}


async def test_upgrade_downgrade_upgrade(database_url: str) -> None:
    assert await migrate.current_async(database_url) is None
    await migrate.upgrade_async(database_url)
    assert await migrate.current_async(database_url) == migrate.head()
    assert await table_names(database_url) == TABLES

    await migrate.downgrade_async(database_url, "base")
    assert await migrate.current_async(database_url) is None
    assert await table_names(database_url) == set()

    await migrate.upgrade_async(database_url)
    assert await table_names(database_url) == TABLES
    store = await Store.open(database_url)
    try:
        assert await store.schema_at_head()
        assert await store.feed.current_revision() == 0
        await store.clusters.register("alpha", {})
    finally:
        await store.close()


async def test_schema_at_head_is_false_before_migrating(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        assert not await store.schema_at_head()
    finally:
        await store.close()
    await migrate.upgrade_async(database_url)
    store = await Store.open(database_url)
    try:
        assert await store.schema_at_head()
    finally:
        await store.close()


async def test_migrated_schema_matches_the_tables_module(database_url: str) -> None:
    await migrate.upgrade_async(database_url)
    engine = make_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(
                lambda c: compare_metadata(MigrationContext.configure(c), metadata)
            )
    finally:
        await engine.dispose()
    assert diff == []


def test_blocking_commands_work_outside_an_event_loop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path}/hub.db"
    migrate.upgrade(url)
    assert migrate.current(url) == migrate.head()
    migrate.downgrade(url, "base")
    assert migrate.current(url) is None


async def test_blocking_commands_work_inside_an_event_loop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path}/hub.db"
    migrate.upgrade(url)
    assert migrate.current(url) == migrate.head()


async def test_replicas_migrating_at_once_take_turns(database_url: str) -> None:
    import asyncio

    await asyncio.gather(*(migrate.upgrade_async(database_url) for _ in range(3)))
    assert await migrate.current_async(database_url) == migrate.head()


async def test_0002_keeps_the_history_and_its_downgrade_drops_only_import_rows(
    database_url: str,
) -> None:
    """Rows written before 0002 are export changes (the `kind` default); a downgrade keeps
    the export feed's rows and drops the import feed's, which the old schema cannot tell
    apart from exports."""
    await migrate.upgrade_async(database_url, "0001")
    engine = make_engine(database_url, pool_size=1)
    insert = text(
        "INSERT INTO changes (revision, cluster_id, namespace, name, type, object) "
        "VALUES (:revision, 'alpha', 'demo', 'web', 'ADDED', '{}')"
    )
    try:
        async with engine.begin() as conn:
            await conn.execute(insert, {"revision": 1})
        await migrate.upgrade_async(database_url, "0002")
        async with engine.begin() as conn:
            kinds = (await conn.execute(text("SELECT kind FROM changes"))).scalars().all()
            assert kinds == ["InternalServiceExport"]
            await conn.execute(
                text(
                    "INSERT INTO changes (revision, cluster_id, namespace, name, type, object, "
                    "kind) VALUES (2, 'alpha', 'demo', :name, 'ADDED', '{}', "
                    "'EndpointSliceExport')"
                ),
                {"name": "web-" + "x" * 200},  # a slice name longer than a label
            )
        await migrate.downgrade_async(database_url, "0001")
        async with engine.begin() as conn:
            revisions = (await conn.execute(text("SELECT revision FROM changes"))).scalars().all()
            assert revisions == [1]
    finally:
        await engine.dispose()
    assert await table_names(database_url) == TABLES - {
        "endpoint_slices",
        "endpoint_withdrawals",
        "cluster_usage",
        "import_selectors",
        "import_exclusions",
        "cluster_namespaces",
        "namespace_reports",
    }
