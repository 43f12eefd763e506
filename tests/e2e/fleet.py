"""A whole fleet as real processes: one hub, three emulated member clusters, three agents.

What an operator runs, on loopback ports: `python -m hub serve` over a fresh database
(SQLite file or PostgreSQL database, `tests/conftest.py`), one `python -m sandbox.emulator`
per member cluster, and one `python -m member` per cluster pointed at its emulator's
kubeconfig and at the hub. Tests talk to each part the way its users do: the Kubernetes REST
API of the member clusters (`KubeApi`), the hub's REST API with the reader token
(`Fleet.hub.request`), and the `mcsync` CLI as a subprocess (`Fleet.cli`).

Starting a fleet costs seconds, so `fleet` is module-scoped (one per back end) and the
scenarios share it; each scenario works on Services of its own, and one that stops a
process starts it again before it ends, so no scenario sees another's leftovers.

The parts are the project's existing test helpers, composed: `HubProcess`, `new_agent`
and `wait_for` from `tests/member/agent_support.py`, `start_emulator_process` from
`tests/kube/fixtures.py`, `run_cli` from `tests/cli/conftest.py`.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.constants import ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION, MCS_GROUP
from shared.metrics import EXPORT_DURATION_LABEL, EXPORT_DURATION_METRIC
from tests.cli.conftest import run_cli
from tests.conftest import BACKENDS, dispose_database_url, make_database_url
from tests.kube.fixtures import FIXTURE_NAMESPACES, EmulatorProcess, start_emulator_process
from tests.member import agent_support
from tests.member.agent_support import AgentProcess, HubProcess, new_agent

NAMESPACE = "shop"
# Alphabetical order is the opposite of the order the scenarios export in (west first), so
# a winner chosen by cluster id instead of by age would show.
CLUSTERS = ("west", "north", "east")
# Short enough that scenario 6 waits seconds, not the default 90 s; heartbeats every second
# keep live clusters well inside it even on a loaded machine.
CLUSTER_TTL_SECONDS = 5
HEARTBEAT_SECONDS = 1


class KubeApi:
    """The Kubernetes REST calls a team makes in its member cluster, over real HTTP."""

    SE_PATH = f"/apis/{MCS_GROUP}/v1beta1/namespaces/{{ns}}/serviceexports"

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=10)

    def _answer(self, response: httpx.Response) -> dict[str, Any]:
        if not response.is_success:
            raise AssertionError(f"{response.request.method} {response.request.url}: "
                                 f"{response.status_code} {response.text}")
        body: dict[str, Any] = response.json()
        return body

    def create_service(self, name: str, *, ports: list[dict[str, Any]],
                       headless: bool = False) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": "ClusterIP", "ports": ports}
        if headless:
            spec["clusterIP"] = "None"
        body = {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
        return self._answer(
            self.client.post(f"/api/v1/namespaces/{NAMESPACE}/services", json=body)
        )

    def patch_service(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._answer(self.client.patch(
            f"/api/v1/namespaces/{NAMESPACE}/services/{name}", json=patch,
            headers={"Content-Type": "application/merge-patch+json"},
        ))

    def delete_service(self, name: str) -> None:
        self._answer(self.client.delete(f"/api/v1/namespaces/{NAMESPACE}/services/{name}"))

    def service(self, name: str) -> dict[str, Any] | None:
        answer = self.client.get(f"/api/v1/namespaces/{NAMESPACE}/services/{name}")
        return None if answer.status_code == 404 else self._answer(answer)

    def create_export(self, name: str) -> dict[str, Any]:
        body = {"apiVersion": f"{MCS_GROUP}/v1beta1", "kind": "ServiceExport",
                "metadata": {"name": name, "namespace": NAMESPACE}}
        return self._answer(self.client.post(self.SE_PATH.format(ns=NAMESPACE), json=body))

    def delete_export(self, name: str) -> None:
        self._answer(self.client.delete(f"{self.SE_PATH.format(ns=NAMESPACE)}/{name}"))

    def export(self, name: str) -> dict[str, Any] | None:
        answer = self.client.get(f"{self.SE_PATH.format(ns=NAMESPACE)}/{name}")
        return None if answer.status_code == 404 else self._answer(answer)

    def export_names(self) -> list[str]:
        listing = self._answer(self.client.get(self.SE_PATH.format(ns=NAMESPACE)))
        return [item["metadata"]["name"] for item in listing["items"]]

    def events(self, name: str) -> list[dict[str, Any]]:
        """Events about the ServiceExport `name`."""
        listing = self._answer(self.client.get(f"/api/v1/namespaces/{NAMESPACE}/events"))
        return [e for e in listing["items"]
                if e.get("involvedObject", {}).get("kind") == "ServiceExport"
                and e["involvedObject"].get("name") == name]

    # Any object by its REST path (namespaces, EndpointSlices, ServiceImports, …), for the
    # scenarios that work outside namespace `shop` (tests/e2e/conformance.py).

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._answer(self.client.post(path, json=body))

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._answer(self.client.put(path, json=body))

    def read(self, path: str) -> dict[str, Any] | None:
        """The object at `path`, or None when it does not exist (404)."""
        answer = self.client.get(path)
        return None if answer.status_code == 404 else self._answer(answer)

    def items(self, path: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._answer(self.client.get(path))["items"]
        return items

    def remove(self, path: str) -> None:
        self._answer(self.client.delete(path))

    def close(self) -> None:
        self.client.close()


@dataclass
class Member:
    """One member cluster: its emulated API server, its agent and its hub token."""

    name: str
    emulator: EmulatorProcess
    kube: KubeApi
    token: str
    agent: AgentProcess

    def conditions(self, service: str) -> dict[str, tuple[str, str]]:
        """{type: (status, reason)} of the ServiceExport's status conditions."""
        return agent_support.conditions_of(self.kube.export(service))

    def condition(self, service: str, type_: str) -> dict[str, Any] | None:
        return agent_support.condition(self.kube.export(service), type_)

    def histogram_count(self) -> float:
        """Data points of the export-duration histogram in the *current* agent process."""
        value = self.agent.metric(f"{EXPORT_DURATION_METRIC}_count",
                                  {EXPORT_DURATION_LABEL: self.name})
        return value or 0.0


@dataclass
class Fleet:
    """The hub and the member clusters by name (`fleet["west"]`)."""

    hub: HubProcess
    members: dict[str, Member] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Member:
        return self.members[name]

    def read(self, path: str, **params: str) -> Any:
        """GET a hub path with the reader token; the JSON body, or None on 404."""
        answer = self.hub.request("GET", path, token=self.hub.reader_token, params=params)
        if answer.status_code == 404:
            return None
        assert answer.status_code == 200, f"GET {path}: {answer.status_code} {answer.text}"
        return answer.json()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`mcsync ARGS` with the hub URL and the reader token from the environment."""
        return run_cli(*args, env={"MCSYNC_HUB_URL": self.hub.url,
                                   "MCSYNC_TOKEN": self.hub.reader_token})

    def export(self, *services: tuple[str, dict[str, Any]], order: tuple[str, ...],
               stagger: bool = True) -> None:
        """Create each Service (`(name, KubeApi.create_service kwargs)`) and its
        ServiceExport in the clusters of `order`. With `stagger`, each cluster's
        ServiceExports are created in a later second than the one's before (creation
        timestamps have second resolution), so `order[0]` holds the oldest export."""
        for position, cluster in enumerate(order):
            if position and stagger:
                next_second()
            for name, spec in services:
                self[cluster].kube.create_service(name, **spec)
                self[cluster].kube.create_export(name)

    def observed(self, cluster: str, service: str, *, resource_version: str | None = None
                 ) -> bool:
        """The hub's record carries the dedupe annotation of docs/reference.md#export-path for the
        Service version it holds (or for `resource_version`): that version's data point is taken."""
        record = self.hub.export(cluster, NAMESPACE, service)
        if record is None:
            return False
        rv = resource_version or record["spec"]["serviceReference"]["resourceVersion"]
        annotations = record["metadata"].get("annotations") or {}
        return bool(annotations.get(ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION) == rv)

    def wait_quiet(self, cluster: str, *, seconds: float = 1.0) -> None:
        """Wait until the hub's records of `cluster` stay the same for `seconds`."""
        last = [self.hub.exports(cluster)]

        def unchanged() -> bool:
            time.sleep(seconds)
            last.append(self.hub.exports(cluster))
            return last[-1] == last[-2]

        agent_support.wait_for(unchanged, what=f"the hub's records of {cluster} settled",
                               interval=0)


def next_second() -> None:
    """Sleep into the next wall-clock second, so a later object gets a later timestamp."""
    now = datetime.now(UTC)
    boundary = now.replace(microsecond=0) + timedelta(seconds=1, milliseconds=20)
    time.sleep((boundary - now).total_seconds())


def new_member(name: str, *, directory: Path, hub: HubProcess,
               emulator: EmulatorProcess) -> Member:
    """Register cluster `name` on the hub; its agent is made, not started."""
    token = hub.register(name)
    agent = new_agent(
        name, directory=directory, kubeconfig=emulator.kubeconfig, hub=hub, cluster_id=name,
        token=token, start=False,
        extra=["--heartbeat-interval", str(HEARTBEAT_SECONDS), "--log-level", "INFO"],
    )
    return Member(name=name, emulator=emulator, kube=KubeApi(emulator.url), token=token,
                  agent=agent)


@pytest.fixture(scope="module", params=BACKENDS)
def fleet(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Hub + three member clusters with their agents, on one back end (`sqlite`, `postgresql`)."""
    directory = tmp_path_factory.mktemp(f"fleet-{request.param}")
    database = make_database_url(str(request.param), directory)
    hub = HubProcess(directory=directory, database=database,
                     extra_args=["--cluster-ttl", str(CLUSTER_TTL_SECONDS)])
    fleet = Fleet(hub=hub)
    emulators: list[EmulatorProcess] = []
    try:
        hub.start()
        for name in CLUSTERS:
            emulators.append(start_emulator_process(
                directory, name, namespaces=(*FIXTURE_NAMESPACES, NAMESPACE)))
            fleet.members[name] = new_member(name, directory=directory, hub=hub,
                                             emulator=emulators[-1])
        for member in fleet.members.values():  # all at once: they start in parallel
            member.agent.start(wait_ready=False)
        for member in fleet.members.values():
            agent_support.wait_for(member.agent.ready, what=f"agent {member.name} /readyz")
        yield fleet
    finally:
        for member in fleet.members.values():
            member.agent.kill()
            member.kube.close()
        for emulator in emulators:
            emulator.stop()
        hub.stop()
        agent_support.forget_logs()
        dispose_database_url(database)
