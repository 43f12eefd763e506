"""Failover in the store (docs/reference.md#failover), on SQLite and PostgreSQL: a Stale cluster's
slices leave the import feed once (DELETED events, out of the list) and come back with its next
heartbeat (ADDED, in the heartbeat's transaction); fail open per service; the panic
threshold; writes while withheld; the mass-withdrawal hold and its one-shot allowance;
and two replicas sweeping one database record each transition once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from hub.store import Conflict, NotFound, Store
from hub.store.tables import clusters, endpoint_withdrawals
from hub.store.withdrawals import check_panic_fraction
from shared.models import EndpointSliceExport, WithdrawalHold
from shared.timefmt import utcnow
from tests.hub.test_store_endpointslices import make_slice
from tests.hub.test_store_support import make_export, open_store, register

AGENT = "0.1.0"
LONG_AGO = timedelta(seconds=600)  # far beyond the default TTL of 90 s


async def beat(store: Store, *names: str, **hold: Any) -> None:
    for name in names:
        await store.clusters.beat(name, agent_version=AGENT, **hold)


async def age(store: Store, *names: str) -> None:
    """Make the clusters' last heartbeats older than the TTL (their agents went quiet)."""
    async with store.engine.begin() as conn:
        await conn.execute(
            update(clusters)
            .where(clusters.c.name.in_(names))
            .values(last_heartbeat=utcnow() - LONG_AGO)
        )


async def export(
    store: Store,
    cluster: str,
    service: str = "web",
    *,
    endpoints: bool = True,
    ready: bool | None = True,
) -> None:
    await store.exports.put(cluster, make_export(cluster, name=service))
    addresses = (f"10.{len(cluster)}.{len(service)}.7",) if endpoints else ()
    slice_ = make_slice(f"{service}-{cluster}", service=service, addresses=addresses)
    for endpoint in slice_.spec.endpoints:
        endpoint.conditions.ready = ready
    await store.endpointslices.put(cluster, slice_)


async def events_after(store: Store, revision: int) -> list[tuple[str, str, str]]:
    """(type, kind, name) of each import-feed change after `revision`."""
    out = []
    for row in await store.import_feed.imports_since(revision, 1000):
        event = row.event()
        out.append((event.type, event.object.kind, event.object.metadata.name or ""))
    return out


async def imported_slices(store: Store) -> set[str]:
    page = await store.import_feed.list_imports()
    return {i.metadata.name for i in page.items if isinstance(i, EndpointSliceExport)}


async def withheld_count(store: Store) -> int:
    async with store.engine.connect() as conn:
        value = await conn.execute(select(func.count()).select_from(endpoint_withdrawals))
        return int(value.scalar_one())


async def export_states(store: Store) -> list[tuple[str | None, Any, Any]]:
    """Each export's and each import's resourceVersion and verdict (the import's spec and ports;
    its cluster states are read-time facts)."""
    page = await store.exports.list()
    imports = await store.imports.list()
    return [
        (e.metadata.resource_version, e.condition("Conflict"), e.spec.service_reference.cluster_id)
        for e in page.items
    ] + [
        (i.metadata.resource_version, (i.spec, i.status.ports), i.metadata.name)
        for i in imports.items
    ]


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    s = await open_store(database_url)
    try:
        await register(s, "alpha", "beta", "gamma", "delta")
        await beat(s, "alpha", "beta", "gamma", "delta")
        for cluster in ("alpha", "beta", "gamma"):
            await export(s, cluster)
        yield s
    finally:
        await s.close()


async def test_a_stale_clusters_slices_leave_the_feed_once_and_come_back_with_its_heartbeat(
    store: Store,
) -> None:
    exports_before = await export_states(store)
    start = await store.import_feed.current_revision()
    await age(store, "beta")

    first = await store.withdrawals.sweep()
    assert first.wrote and first.applied.withheld == 1
    assert await events_after(store, start) == [("DELETED", "EndpointSliceExport", "web-beta")]
    assert await imported_slices(store) == {"web-alpha", "web-gamma"}
    beta = await store.clusters.get("beta")
    assert (beta.status.state, beta.status.endpoints_withdrawn) == ("Stale", True)
    assert not (await store.clusters.get("alpha")).status.endpoints_withdrawn
    # Export records, verdicts and the ServiceImport are as they were (not even rewritten).
    assert await export_states(store) == exports_before

    after_first = await store.import_feed.current_revision()
    again = await store.withdrawals.sweep()
    assert not again.wrote
    assert await store.import_feed.current_revision() == after_first

    outcome = await store.clusters.beat("beta", agent_version=AGENT)
    assert outcome.given_back == 1
    assert await events_after(store, after_first) == [("ADDED", "EndpointSliceExport", "web-beta")]
    assert await imported_slices(store) == {"web-alpha", "web-beta", "web-gamma"}
    assert not (await store.clusters.get("beta")).status.endpoints_withdrawn
    assert await withheld_count(store) == 0
    assert not (await store.withdrawals.sweep()).wrote


@pytest.mark.parametrize(
    ("case", "withheld"),
    [
        # beta alone exports `solo`: withholding it would leave the Service no endpoint.
        ("sole exporter", {"web-beta"}),
        # gamma's `api` slice has no endpoint: it is no alternative to beta's.
        ("others without endpoints", {"web-beta"}),
        # alpha exports `api` with endpoints: beta's goes.
        ("another with endpoints", {"web-beta", "api-beta"}),
        # gamma's `pay` endpoints are all `ready: false` (a crash-looping Deployment):
        # it does not serve, so beta's, the only ready ones, stay.
        ("others not ready", {"web-beta"}),
        # ... but an endpoint whose readiness is unset counts as ready, as Kubernetes
        # reads it.
        ("others of unknown readiness", {"web-beta", "pay-beta"}),
    ],
)
async def test_fail_open_per_service(store: Store, case: str, withheld: set[str]) -> None:
    if case == "sole exporter":
        await export(store, "beta", "solo")
    elif case == "others without endpoints":
        await export(store, "beta", "api")
        await export(store, "gamma", "api", endpoints=False)
    elif case == "others not ready":
        await export(store, "beta", "pay")
        await export(store, "gamma", "pay", ready=False)
    elif case == "others of unknown readiness":
        await export(store, "beta", "pay")
        await export(store, "gamma", "pay", ready=None)
    else:
        await export(store, "beta", "api")
        await export(store, "alpha", "api")
    start = await store.import_feed.current_revision()
    await age(store, "beta")
    await store.withdrawals.sweep()
    assert {name for _, _, name in await events_after(store, start)} == withheld


async def test_every_exporter_stale_withholds_nothing_of_the_service(store: Store) -> None:
    await age(store, "alpha", "beta")  # gamma and delta are heard: no panic (2 of 4)
    start = await store.import_feed.current_revision()
    result = await store.withdrawals.sweep()
    assert not result.fleet.panic
    assert {n for _, _, n in await events_after(store, start)} == {"web-alpha", "web-beta"}
    await age(store, "gamma")  # 3 of 4 Stale: panic, everything comes back
    mid = await store.import_feed.current_revision()
    panic = await store.withdrawals.sweep()
    assert panic.fleet.panic
    assert sorted(await events_after(store, mid)) == [
        ("ADDED", "EndpointSliceExport", "web-alpha"),
        ("ADDED", "EndpointSliceExport", "web-beta"),
    ]
    assert await imported_slices(store) == {"web-alpha", "web-beta", "web-gamma"}
    summary = await store.withdrawals.summary()
    assert (summary.panic, summary.stale_clusters, summary.clusters_withdrawn) == (True, 3, 0)


@pytest.mark.parametrize(
    ("fraction", "stale", "panic"),
    [
        (0.5, ("beta",), False),  # 1 of 4
        (0.5, ("alpha", "beta"), False),  # 2 of 4 is not more than half
        (0.5, ("alpha", "beta", "gamma"), True),
        (0.25, ("alpha", "beta"), True),
        (1.0, ("alpha", "beta", "gamma", "delta"), False),  # never above 1
    ],
)
async def test_panic_threshold(
    database_url: str, fraction: float, stale: tuple[str, ...], panic: bool
) -> None:
    s = await open_store(database_url, stale_panic_fraction=fraction)
    try:
        await register(s, "alpha", "beta", "gamma", "delta", "quiet")  # quiet: never heard
        await beat(s, "alpha", "beta", "gamma", "delta")
        await age(s, *stale)
        result = await s.withdrawals.sweep()
        assert result.fleet.panic is panic
        assert (await s.withdrawals.summary()).panic is panic
    finally:
        await s.close()


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.01, float("nan")])
def test_the_panic_fraction_must_be_in_zero_one(fraction: float) -> None:
    with pytest.raises(ValueError, match="stale_panic_fraction"):
        check_panic_fraction(fraction)


async def test_writes_while_withheld_stay_out_of_the_feed(store: Store) -> None:
    await age(store, "beta")
    await store.withdrawals.sweep()
    start = await store.import_feed.current_revision()
    # A slice written while withheld is recorded as gone, not added.
    await store.endpointslices.put(
        "beta", make_slice("web-beta", service="web", addresses=("10.9.9.9",))
    )
    assert await events_after(store, start) == [("DELETED", "EndpointSliceExport", "web-beta")]
    assert "web-beta" not in await imported_slices(store)
    # A port change of the key re-sends the others' slices, never the withheld one.
    mid = await store.import_feed.current_revision()
    await store.exports.put(
        "alpha",
        make_export(
            "alpha",
            ports=[
                {"name": "http", "protocol": "TCP", "port": 80},
                {"name": "admin", "protocol": "TCP", "port": 81},
            ],
        ),
    )
    assert all(name != "web-beta" for _, _, name in await events_after(store, mid))
    # It comes back with its newest content.
    back = await store.import_feed.current_revision()
    await beat(store, "beta")
    (event,) = [row.event() for row in await store.import_feed.imports_since(back, 100)]
    assert event.type == "ADDED"
    assert isinstance(event.object, EndpointSliceExport)
    assert event.object.spec.endpoints[0].addresses == ["10.9.9.9"]


async def test_an_export_withdrawn_while_withheld_takes_its_row_along(store: Store) -> None:
    await age(store, "beta")
    await store.withdrawals.sweep()
    assert await withheld_count(store) == 1
    await store.exports.delete("beta", "demo", "web")
    assert await withheld_count(store) == 0
    start = await store.import_feed.current_revision()
    await beat(store, "beta")
    assert await events_after(store, start) == []
    await age(store, "beta")
    await store.clusters.delete("gamma")  # a deregistration also takes its rows along
    assert await withheld_count(store) == 0


async def test_the_withdrawal_hold_and_its_one_shot_allowance(store: Store) -> None:
    hold = WithdrawalHold(would_withdraw=12, exports=20, since=utcnow())
    outcome = await store.clusters.beat("beta", agent_version=AGENT, withdrawal_held=hold)
    assert not outcome.withdrawal_allowed
    (condition,) = (await store.clusters.get("beta")).status.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "WithdrawalHeld",
        "True",
        "MassWithdrawal",
    )
    assert "12 of the cluster's 20" in condition.message
    assert "mcsync clusters allow-withdrawal beta" in condition.message

    allowed = await store.clusters.allow_withdrawal("beta")
    assert allowed.status.withdrawal_allowed  # shown while armed
    assert "an admin allowed it" in allowed.status.conditions[0].message
    answers = [
        (
            await store.clusters.beat("beta", agent_version=AGENT, withdrawal_held=hold)
        ).withdrawal_allowed
        for _ in range(2)
    ]
    assert answers == [True, False]  # one-shot
    assert not (await store.clusters.get("beta")).status.withdrawal_allowed

    # Given for the hold current then: it lapses when that hold clears, and a later hold
    # is not let through by it.
    await store.clusters.allow_withdrawal("beta")
    assert not (await store.clusters.beat("beta", agent_version=AGENT)).withdrawal_allowed
    cleared = await store.clusters.get("beta")
    assert cleared.status.conditions == [] and not cleared.status.withdrawal_allowed
    later = await store.clusters.beat("beta", agent_version=AGENT, withdrawal_held=hold)
    assert not later.withdrawal_allowed
    await store.clusters.beat("beta", agent_version=AGENT)

    # Nothing held: nothing to allow.
    with pytest.raises(Conflict, match="holds no mass withdrawal"):
        await store.clusters.allow_withdrawal("beta")
    with pytest.raises(NotFound, match="'nowhere'"):
        await store.clusters.allow_withdrawal("nowhere")


async def test_two_replicas_record_one_transition_once(database_url: str) -> None:
    first = await open_store(database_url)
    second = await Store.open(database_url)
    try:
        await register(first, "alpha", "beta", "gamma")
        await beat(first, "alpha", "beta", "gamma")
        for cluster in ("alpha", "beta", "gamma"):
            for service in ("web", "api", "db"):
                await export(first, cluster, service)
        start = await first.import_feed.current_revision()
        await age(first, "beta")
        results = await asyncio.gather(
            *(s.withdrawals.sweep() for _ in range(4) for s in (first, second))
        )
        assert sum(r.applied.withheld for r in results) == 3
        assert sorted(await events_after(first, start)) == [
            ("DELETED", "EndpointSliceExport", f"{service}-beta")
            for service in ("api", "db", "web")
        ]
        # The heartbeat on one replica racing sweeps on both: given back once, never lost.
        mid = await first.import_feed.current_revision()
        await asyncio.gather(
            second.clusters.beat("beta", agent_version=AGENT),
            first.withdrawals.sweep(),
            second.withdrawals.sweep(),
        )
        assert sorted(await events_after(first, mid)) == [
            ("ADDED", "EndpointSliceExport", f"{service}-beta") for service in ("api", "db", "web")
        ]
        assert await withheld_count(first) == 0
    finally:
        await second.close()
        await first.close()
