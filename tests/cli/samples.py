"""Shared-model instances for the CLI's unit tests, with a fixed `NOW` so ages are exact."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.models import (
    Condition,
    EndpointSliceExport,
    ImportClusterStatus,
    ImportPortStatus,
    InternalServiceExport,
    InternalServiceExportSpec,
    InternalServiceExportStatus,
    MemberCluster,
    MemberClusterMeta,
    MemberClusterStatus,
    ObjectMeta,
    ServiceImport,
    ServiceImportSpec,
    ServiceImportStatus,
    ServicePort,
    ServiceReference,
)

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def ago(**delta: float) -> datetime:
    return NOW - timedelta(**delta)


def port(number: int, name: str = "", protocol: str = "TCP") -> ServicePort:
    return ServicePort.model_validate({"name": name, "protocol": protocol, "port": number})


def export(
    *,
    cluster: str = "east",
    namespace: str = "demo",
    name: str = "web",
    ports: list[ServicePort] | None = None,
    created: datetime | None = None,
    conflict: tuple[str, str] | None = ("False", "NoConflicts"),
    conflict_since: datetime | None = None,
    resource_version: str = "7",
    cluster_state: str | None = "Ready",
) -> InternalServiceExport:
    created = created or ago(minutes=3)
    conditions = []
    if conflict is not None:
        conditions.append(
            Condition(
                type="Conflict",
                status=conflict[0],  # type: ignore[arg-type]
                reason=conflict[1],
                message="",
                last_transition_time=conflict_since or created,
            )
        )
    return InternalServiceExport(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            resource_version=resource_version,
            creation_timestamp=created,
            annotations={},
        ),
        spec=InternalServiceExportSpec(
            ports=ports if ports is not None else [port(80)],
            service_reference=ServiceReference(
                cluster_id=cluster,
                namespace=namespace,
                name=name,
                uid="uid-1",
                resource_version="100",
                exported_since=created,
                export_creation_timestamp=created,
            ),
        ),
        status=InternalServiceExportStatus(conditions=conditions, cluster_state=cluster_state),
    )


def cluster(
    name: str,
    *,
    state: str = "Ready",
    heartbeat: datetime | None = None,
    exports: int = 0,
    conflicts: int = 0,
    created: datetime | None = None,
    labels: dict[str, str] | None = None,
    agent_version: str | None = "0.1.0",
    imports: tuple[int, int] | None = None,
) -> MemberCluster:
    return MemberCluster(
        metadata=MemberClusterMeta(
            name=name, creation_timestamp=created or ago(days=4), labels=labels
        ),
        status=MemberClusterStatus(
            state=state,  # type: ignore[arg-type]
            last_heartbeat_time=heartbeat,
            agent_version=agent_version,
            export_count=exports,
            conflict_count=conflicts,
            imported_services=imports[0] if imports else None,
            imported_endpoints=imports[1] if imports else None,
        ),
    )


def service_import(
    *,
    namespace: str = "demo",
    name: str = "web",
    clusters: list[str] | None = None,
    conflicts: list[str] | None = None,
    winner: str | None = None,
    ports: list[ServicePort] | None = None,
    created: datetime | None = None,
) -> ServiceImport:
    names = clusters if clusters is not None else ["east", "west"]
    merged = ports if ports is not None else [port(80)]
    return ServiceImport(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            resource_version="9",
            creation_timestamp=created or ago(hours=2),
            annotations={},
        ),
        spec=ServiceImportSpec(ports=merged),
        status=ServiceImportStatus(
            clusters=[ImportClusterStatus(cluster=c, state="Ready") for c in names],
            ports=[
                ImportPortStatus(name=p.name, protocol=p.protocol, port=p.port, clusters=names)
                for p in merged
            ],
            conflicts=conflicts or [],
            winning_cluster=winner,
        ),
    )


def endpoint_slice(
    *,
    cluster: str = "east",
    namespace: str = "demo",
    service: str = "web",
    name: str | None = None,
    address_type: str = "IPv4",
    addresses: list[str] | None = None,
    not_ready: int = 0,
    ports: list[tuple[int | None, str]] | None = None,
    created: datetime | None = None,
) -> EndpointSliceExport:
    """A slice of `service` with one endpoint per address, the first `not_ready` of them
    reporting ready=false (the rest ready=true, or unset for every third, which Kubernetes
    reads as ready)."""
    addresses = addresses if addresses is not None else ["10.0.0.1", "10.0.0.2"]
    endpoints = []
    for index, address in enumerate(addresses):
        ready: bool | None = False if index < not_ready else (None if index % 3 == 2 else True)
        endpoints.append({"addresses": [address], "conditions": {"ready": ready}})
    return EndpointSliceExport.model_validate({
        "metadata": {
            "name": name or f"{service}-abc12",
            "namespace": namespace,
            "resourceVersion": "11",
            "creationTimestamp": (created or ago(minutes=5)).isoformat(),
        },
        "spec": {
            "serviceName": service,
            "clusterId": cluster,
            "addressType": address_type,
            "ports": [{"name": f"p{i}", "protocol": protocol, "port": number}
                      for i, (number, protocol) in enumerate(ports or [(8080, "TCP")])],
            "endpoints": endpoints,
        },
    })
