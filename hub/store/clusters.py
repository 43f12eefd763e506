"""Member clusters: registration with a member token, heartbeats, state, deregistration.

The member token (docs/reference.md#credentials) is shown once, at registration; only its sha256 is
stored, and `authenticate` looks a presented token up by that hash. A 256-bit random token needs
no salt or slow hash: nobody can guess it, and its hash is useless without it.

State is derived when read (`Pending` / `Ready` / `Stale`, docs/reference.md#failover); the
transition to Stale is also recorded (`clusters.stale`) by the staleness sweep, which withholds the
cluster's endpoints from the import feed (`withdrawals`, docs/reference.md#failover), and a
heartbeat clears it and gives them back in its own transaction. The heartbeat also carries the
agent's held mass withdrawal (the `WithdrawalHeld` condition) and takes an admin's
one-shot allowance for it (`allow_withdrawal`).

Deleting a cluster withdraws its exports batch by batch, re-judging each key, after first
marking the cluster `deleting` so that no new export of it is accepted meanwhile; a
delete interrupted by a crash resumes when asked again.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, case, func, or_, select, update
from sqlalchemy import delete as sql_delete
from sqlalchemy.exc import IntegrityError

from hub.store import codec
from hub.store.clusternamespaces import forget_namespaces
from hub.store.clusterproperties import deleted_change, record_changes, stored_properties
from hub.store.clusterstate import ClusterStates
from hub.store.context import StoreContext
from hub.store.errors import AlreadyExists, Conflict, NotFound
from hub.store.heartbeats import Beat, HeartbeatBatcher, HeartbeatOutcome
from hub.store.importselection import forget_cluster, judge_new_cluster
from hub.store.invalidexports import invalid_total
from hub.store.locks import lock_selection_exclusive
from hub.store.tables import cluster_usage, clusters, endpoint_withdrawals, exports
from hub.store.tokens import TokenLookup, rotate
from hub.store.usage import scope_patterns
from hub.store.writer import Mutation, write_exports
from shared import constants
from shared.models import (
    Condition,
    Heartbeat,
    InvalidExports,
    MemberCluster,
    MemberClusterMeta,
    MemberClusterSpec,
    MemberClusterStatus,
    WithdrawalHold,
)
from shared.timefmt import utcnow

WITHDRAW_BATCH = 500


def _scope_text(patterns: list[str] | None) -> str | None:
    """A scope list as stored: compact JSON, NULL when absent."""
    return None if patterns is None else codec.canonical_json(list(patterns))


def token_hash(token: str) -> str:
    """What the store keeps of a member token: its sha256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def _counts_subquery() -> Any:
    return (
        select(
            exports.c.cluster_id.label("cluster_id"),
            func.count().label("export_count"),
            func.sum(case((exports.c.conflict.is_(True), 1), else_=0))
            .cast(Integer)
            .label("conflict_count"),
        )
        .group_by(exports.c.cluster_id)
        .subquery()
    )


def _withdrawn_subquery() -> Any:
    return (
        select(endpoint_withdrawals.c.cluster_id.label("cluster_id"))
        .group_by(endpoint_withdrawals.c.cluster_id)
        .subquery()
    )


def held_condition(
    hold_text: str | None,
    *,
    cluster: str,
    sync_hold_text: str | None = None,
    allowed: bool = False,
) -> list[Condition]:
    """The MemberCluster's conditions from its stored holds — the agent's (`hold_text`) and
    the hub's own of a full-state sync (`sync_hold_text`, `hub.store.syncguard`):
    `WithdrawalHeld=True` with a message an operator can act on, saying whether an
    allowance is armed, or none."""
    holds: list[tuple[str, WithdrawalHold]] = [
        (who, WithdrawalHold.model_validate_json(text))
        for who, text in (
            ("the agent holds a repair", hold_text),
            ("the hub held a full-state sync", sync_hold_text),
        )
        if text
    ]
    if not holds:
        return []
    said = "; ".join(
        f"{who} that would withdraw {hold.would_withdraw} of the cluster's {hold.exports} "
        "exports at once (more than half)"
        for who, hold in holds
    )
    advice = (
        "an admin allowed it: it goes through once (the agent's repair at its next "
        "heartbeat, or the member's next such sync)"
        if allowed
        else "restore the cluster's ServiceExports, or let the withdrawal through once "
        f"with `mcsync clusters allow-withdrawal {cluster}`"
    )
    return [
        Condition(
            type=constants.CONDITION_WITHDRAWAL_HELD,
            status="True",
            reason=constants.REASON_MASS_WITHDRAWAL,
            message=f"{said}: {advice}",
            last_transition_time=min(hold.since for _, hold in holds),
        )
    ]


class ClusterStore:
    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._tokens = TokenLookup(ctx)
        self._beats = HeartbeatBatcher(ctx)

    def _model(self, row: Mapping[Any, Any], states: ClusterStates | None = None) -> MemberCluster:
        states = states or ClusterStates(self._ctx.cluster_ttl)
        return MemberCluster(
            metadata=MemberClusterMeta(
                name=row["name"],
                labels=json.loads(row["labels"]),
                creation_timestamp=row["created_at"],
            ),
            spec=MemberClusterSpec(
                export_namespaces=scope_patterns(row.get("export_namespaces")),
                import_namespaces=scope_patterns(row.get("import_namespaces")),
            ),
            status=MemberClusterStatus(
                state=states.of_cluster(row["last_heartbeat"]),
                last_heartbeat_time=row["last_heartbeat"],
                agent_version=row["agent_version"],
                imported_services=row.get("imported_services"),
                imported_endpoints=row.get("imported_endpoints"),
                invalid_export_count=invalid_total(row.get("invalid_exports")),
                export_count=int(row.get("export_count") or 0),
                conflict_count=int(row.get("conflict_count") or 0),
                endpoints_withdrawn=row.get("withdrawn_cluster") is not None,
                conditions=held_condition(
                    row.get("withdrawal_held"),
                    cluster=row["name"],
                    sync_hold_text=row.get("sync_withdrawal_held"),
                    allowed=bool(row.get("withdrawal_allowed")),
                ),
                withdrawal_allowed=bool(row.get("withdrawal_allowed")),
                properties=stored_properties(row.get("properties")),
            ),
        )

    def _query(self) -> Any:
        counts = _counts_subquery()
        withdrawn = _withdrawn_subquery()
        return (
            select(
                clusters,
                counts.c.export_count,
                counts.c.conflict_count,
                withdrawn.c.cluster_id.label("withdrawn_cluster"),
            )
            .select_from(
                clusters.outerjoin(counts, counts.c.cluster_id == clusters.c.name).outerjoin(
                    withdrawn, withdrawn.c.cluster_id == clusters.c.name
                )
            )
            .where(clusters.c.deleting.is_(False))
            .order_by(clusters.c.name)
        )

    async def register(
        self, name: str, labels: Mapping[str, str], spec: MemberClusterSpec | None = None
    ) -> tuple[MemberCluster, str]:
        """Register a cluster with its scope (`spec`, docs/reference.md#scope-and-limits; None:
        every namespace); answers it and its member token (shown only now).

        ValueError when the name or a label is invalid; AlreadyExists when taken.
        """
        meta = MemberClusterMeta(name=name, labels=dict(labels))  # validates (ValueError)
        spec = spec or MemberClusterSpec()
        token = secrets.token_urlsafe(32)
        row = {
            "name": meta.name,
            "labels": codec.canonical_json(meta.labels or {}),
            "token_hash": token_hash(token),
            "created_at": utcnow(),
            "last_heartbeat": None,
            "agent_version": None,
            "deleting": False,
            "export_namespaces": _scope_text(spec.export_namespaces),
            "import_namespaces": _scope_text(spec.import_namespaces),
        }
        try:
            async with self._ctx.write() as conn:
                await conn.execute(clusters.insert().values(row))
                # Not reported yet: left out of the keys whose import-clusters needs a
                # property (docs/reference.md#cluster-selection).
                await lock_selection_exclusive(conn, self._ctx)
                await judge_new_cluster(conn, self._ctx, meta.name)
        except IntegrityError:
            raise AlreadyExists(f"cluster {name!r} is already registered") from None
        return self._model(row), token

    async def patch(
        self,
        name: str,
        *,
        labels: Mapping[str, str | None] | None = None,
        spec: Mapping[str, list[str] | None] | None = None,
    ) -> MemberCluster:
        """JSON merge patch of the cluster's labels (a None value removes one) and scope
        (`export_namespaces` / `import_namespaces`: a list, or None for absent; a field
        not given is kept). Takes effect for the next write of the cluster and the next
        import list or watch. NotFound when the cluster is not registered."""
        async with self._ctx.write() as conn:
            # FOR UPDATE: a scope change waits for the cluster's writes in flight, which
            # checked the scope they locked the row with (`locks`, step 1: FOR KEY SHARE).
            query = select(clusters.c.labels).where(
                clusters.c.name == name, clusters.c.deleting.is_(False)
            )
            row = (await conn.execute(self._ctx.locks.exclusive(query, of=clusters))).first()
            if row is None:
                raise NotFound(f"cluster {name!r} is not registered")
            values: dict[str, Any] = {}
            if labels:
                merged = json.loads(row[0])
                for key, value in labels.items():
                    if value is None:
                        merged.pop(key, None)
                    else:
                        merged[key] = value
                values["labels"] = codec.canonical_json(merged)
            for field_name, patterns in (spec or {}).items():
                if field_name not in ("export_namespaces", "import_namespaces"):
                    raise ValueError(f"spec has no field {field_name!r}")
                values[field_name] = _scope_text(patterns)
            if values:
                await conn.execute(update(clusters).where(clusters.c.name == name).values(values))
        return await self.get(name)

    async def import_scope(self, name: str) -> list[str] | None:
        """The cluster's `spec.importNamespaces` (None: absent, or no such cluster): what
        its import list and watch hold (docs/reference.md#scope-and-limits). One read by primary
        key."""
        async with self._ctx.read() as conn:
            row = (
                await conn.execute(
                    select(clusters.c.import_namespaces).where(clusters.c.name == name)
                )
            ).first()
        return None if row is None else scope_patterns(row[0])

    async def get(self, name: str) -> MemberCluster:
        async with self._ctx.read() as conn:
            row = (
                (await conn.execute(self._query().where(clusters.c.name == name)))
                .mappings()
                .first()
            )
        if row is None:
            raise NotFound(f"cluster {name!r} is not registered")
        return self._model(row)

    async def list(self) -> list[MemberCluster]:
        """Every registered cluster with its export and conflict counts (one query)."""
        async with self._ctx.read() as conn:
            rows = (await conn.execute(self._query())).mappings().all()
        states = ClusterStates(self._ctx.cluster_ttl)
        return [self._model(r, states) for r in rows]

    async def heartbeat(
        self,
        name: str,
        *,
        agent_version: str,
        imported_services: int | None = None,
        imported_endpoints: int | None = None,
    ) -> MemberCluster:
        """Record that the cluster's agent is alive (its version, what it imports)."""
        await self.beat(
            name,
            agent_version=agent_version,
            imported_services=imported_services,
            imported_endpoints=imported_endpoints,
        )
        return await self.get(name)

    async def beat(
        self,
        name: str,
        *,
        agent_version: str,
        imported_services: int | None = None,
        imported_endpoints: int | None = None,
        withdrawal_held: WithdrawalHold | None = None,
        invalid_exports: InvalidExports | None = None,
    ) -> HeartbeatOutcome:
        """Record a heartbeat: the agent is alive (its version, what it imports, the mass
        withdrawal it holds, None clearing it); a cluster recorded Stale is Ready again and
        its withheld endpoints come back to the import feed now; a pending allowance is
        handed over (and consumed) when the agent reports a hold. Beats that arrive
        together share one transaction (`hub.store.heartbeats`). NotFound when not
        registered."""
        beat = Heartbeat(
            agent_version=agent_version,
            imported_services=imported_services,
            imported_endpoints=imported_endpoints,
            withdrawal_held=withdrawal_held,
            invalid_exports=invalid_exports,
        )
        outcome = await self._beats.write(Beat(name, beat))
        assert outcome is not None  # an authenticated beat is recorded or NotFound
        return outcome

    async def beat_with_token(
        self, name: str, beat: Heartbeat, *, token: str
    ) -> HeartbeatOutcome | None:
        """Record `beat` if `token` is cluster `name`'s member token, in the same group
        commit as every other beat; None (nothing recorded) when it is not, or the
        cluster is not registered: the caller then authenticates the long way, which
        says why."""
        return await self._beats.write(Beat(name, beat, token_hash=token_hash(token)))

    async def allow_withdrawal(self, name: str) -> MemberCluster:
        """Let the cluster's held mass withdrawal through, once (docs/reference.md#failover):
        the agent's, handed over with its next heartbeat that reports the hold, or the
        hub's own of a full-state sync, taken by the next such sync (`syncguard`).

        The allowance is for the hold current now: Conflict when none is held (an
        allowance waiting for a future hold would let through a withdrawal nobody has
        seen), shown while armed (`status.withdrawalAllowed`, the condition's message),
        and lapsing when that hold clears. NotFound when not registered."""
        async with self._ctx.write() as conn:
            updated = await conn.execute(
                update(clusters)
                .where(
                    clusters.c.name == name,
                    clusters.c.deleting.is_(False),
                    or_(
                        clusters.c.withdrawal_held.is_not(None),
                        clusters.c.sync_withdrawal_held.is_not(None),
                    ),
                )
                .values(withdrawal_allowed=True)
            )
            if updated.rowcount == 0:
                found = await conn.execute(
                    select(clusters.c.name).where(
                        clusters.c.name == name, clusters.c.deleting.is_(False)
                    )
                )
                if found.first() is None:
                    raise NotFound(f"cluster {name!r} is not registered")
                raise Conflict(
                    f"cluster {name!r} holds no mass withdrawal (no WithdrawalHeld): an "
                    "allowance applies to a withdrawal held now, and there is none to allow"
                )
        return await self.get(name)

    async def authenticate(self, token: str) -> str | None:
        """The cluster whose member token this is, or None.

        Concurrent lookups share one query (`tokens.TokenLookup`); none is cached.
        """
        if not token:
            return None
        return await self._tokens.cluster_of(token_hash(token))

    async def rotate_token(self, name: str, *, grace: timedelta) -> tuple[str, datetime | None]:
        """A new member token for `name` (shown only now) and when the one it replaces
        stops being accepted (None: at once); see `tokens.rotate`. NotFound."""
        token = secrets.token_urlsafe(32)
        expires = await rotate(self._ctx, name, new_hash=token_hash(token), grace=grace)
        return token, expires

    async def close(self) -> None:
        await self._beats.close()
        await self._tokens.close()

    async def delete(self, name: str) -> MemberCluster:
        """Deregister a cluster, withdrawing all its exports (re-judging their keys).

        Answers the cluster as it was. NotFound when it is not registered.
        """
        # 1. Mark it deleting. On PostgreSQL this FOR UPDATE waits for every in-flight write
        #    of the cluster (they hold FOR KEY SHARE on its row) and every later write sees
        #    the mark and is refused, so the withdrawal below misses nothing.
        async with self._ctx.write() as conn:
            row = (
                (await conn.execute(self._query_any().where(clusters.c.name == name)))
                .mappings()
                .first()
            )
            if row is None:
                raise NotFound(f"cluster {name!r} is not registered")
            snapshot = self._model(row)
            await conn.execute(
                update(clusters).where(clusters.c.name == name).values(deleting=True)
            )
        # 2. Withdraw its exports, a batch of keys per transaction.
        newest: int | None = None
        while True:
            async with self._ctx.write() as conn:
                keys = (
                    await conn.execute(
                        select(exports.c.namespace, exports.c.name)
                        .where(exports.c.cluster_id == name)
                        .order_by(exports.c.namespace, exports.c.name)
                        .limit(WITHDRAW_BATCH)
                    )
                ).all()
                if not keys:
                    # 3. Nothing left: the registration goes, in the same transaction,
                    #    with its counts (`hub.store.usage`), its reported namespaces
                    #    (`hub.store.clusternamespaces`) and its properties, which
                    #    members are told to forget (`hub.store.clusterproperties`).
                    await conn.execute(sql_delete(clusters).where(clusters.c.name == name))
                    await conn.execute(
                        sql_delete(cluster_usage).where(cluster_usage.c.cluster_id == name)
                    )
                    await forget_cluster(conn, name)
                    await forget_namespaces(conn, name)
                    gone = deleted_change(name, row.get("properties"))
                    newest = await record_changes(conn, self._ctx, [gone] if gone else [])
                    break
                outcome = await write_exports(
                    conn, self._ctx, [Mutation(name, ns, n, None) for ns, n in keys], now=utcnow()
                )
            if outcome.newest_revision is not None:
                self._ctx.notifier.committed(outcome.newest_revision)
        if newest is not None:
            self._ctx.notifier.committed(newest)
        return snapshot

    def _query_any(self) -> Any:
        counts = _counts_subquery()
        query = select(clusters, counts.c.export_count, counts.c.conflict_count).select_from(
            clusters.outerjoin(counts, counts.c.cluster_id == clusters.c.name)
        )
        return self._ctx.locks.exclusive(query, of=clusters)
