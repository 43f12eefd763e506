"""Cluster selection across a fleet (docs/failover-order.md): failover, failback, the writes
of a switch and a property change, with a real hub process and real agent processes.

    python -m bench.selection_fleet [--clusters 50] [--services 20] [--endpoints 10]
                                    [--importers 4] [--delay 5] [--rounds 3]
                                    [--backend postgresql] [--smoke]

**The fleet.** A real hub process (`bench.support.HubProcess`) on a fresh database.
`--clusters` clusters in two regions (`region` = `eu` or `us`, alternating):

* `--importers` of them are real: an emulated member cluster (an emulator thread of this
  process serving the About API, its `ClusterProperty` `region` set) and one
  `python -m member` agent process each, which imports every Service of the fleet and
  reports its region to the hub;
* the others export, simulated over HTTP as an agent sends (`PUT` of its ServiceExports,
  its EndpointSlices and its properties): exporters are paired, one eu and one us, and
  each pair exports `--services` Services (namespace `sel`), so every exporter has
  `--services` Services of `--endpoints` endpoints, all ready. Each ServiceExport carries
  `mcsync.io/cluster-selectors` [the importer's region, any region] and
  `mcsync.io/cluster-selection` `{"failbackDelaySeconds": DELAY}`.

Every importing cluster therefore uses, per Service, its own region's exporter (tier 1) and
masks the other's slice (`ready: false`).

**Rounds.** `--rounds` times, on Service `svc-<round>-0` of pair `round`:

* (i) failover: the eu exporter's slice is PUT with no ready endpoint; for each eu importer,
  seconds from that PUT being sent until its mirrored slice of the us exporter has ready
  endpoints (tier 2 active);
* (iii) the kube writes of that switch in each importer, from the emulator's request
  counters (every create/update/patch/delete over the window, by resource), beside what a
  switch needs: one slice update for the source slice's own change, one for the slice
  whose readiness the switch flips (plus the ServiceImport's `mcsync.io/active-clusters`
  annotation);
* (ii) failback: the slice is PUT ready again; for each eu importer, seconds from that PUT
  until the us exporter's slice is masked again, beside `--delay`;
* (iv) property change: the us exporter of the pair reports `region: eu`; for each eu
  importer, seconds until its ServiceImport of the pair's Services lists that exporter in
  tier 1 (`mcsync.io/cluster-selector-results`) — the re-evaluation; then it reports `us`
  again (not timed).

Targets: (i) p99 < 1 s; (ii) failback within `--delay` ± 1 s; (iii) one write per slice
whose readiness changes, nothing else; (iv) p99 < 2 s. (v), the agent's CPU per
re-evaluation of 10,000 imports, is `bench.selection`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.fleet import Agent, Cluster, wait_until
from bench.slices import slice_wire
from bench.support import (
    HubProcess,
    base_parser,
    fresh_database_sync,
    percentiles,
    write_result,
)
from bench.support import export_wire as base_export_wire
from member.imports.importspec import mirrored_slice_name
from sandbox.emulator import EmulatorServer, EmulatorState
from sandbox.emulator.kubeconfig import write_kubeconfig

NAME = "selection_fleet"
NS = "sel"
REGION = "region"
SELECTORS = [
    {"propertySelector": {"matchProperties": {REGION: "@SameAsImporter@"}}},
    {"propertySelector": {"matchExpressions": [{"key": REGION, "operator": "Exists"}]}},
]
WRITES = ("create", "update", "patch", "delete")
TARGET_FAILOVER_P99 = 1.0
TARGET_PROPERTY_P99 = 2.0


def region_of(index: int) -> str:
    return "eu" if index % 2 == 0 else "us"


@dataclass
class Layout:
    clusters: int
    services: int
    endpoints: int
    importers: int
    delay: int

    @property
    def importer_names(self) -> list[str]:
        return [f"imp-{i}" for i in range(self.importers)]

    @property
    def pairs(self) -> int:
        return (self.clusters - self.importers) // 2

    def exporter(self, pair: int, region: str) -> str:
        return f"exp-{region}-{pair}"

    def services_of(self, pair: int) -> list[str]:
        return [f"svc-{pair}-{j}" for j in range(self.services)]

    def slice_body(self, pair: int, region: str, service: str, *, ready: bool) -> dict[str, Any]:
        octet = 2 * pair + (0 if region == "eu" else 1)
        slot = int(service.rsplit("-", 1)[1])
        body = slice_wire(NS, service, addresses=[
            f"10.{octet % 250}.{slot % 250}.{e + 1}" for e in range(self.endpoints)])
        for endpoint in body["spec"]["endpoints"]:
            endpoint["conditions"] = {"ready": ready, "serving": ready, "terminating": False}
        return body

    def export_body(self, cluster: str, service: str) -> dict[str, Any]:
        body = base_export_wire(cluster, NS, service)
        body["spec"]["clusterSelectors"] = SELECTORS
        body["spec"]["clusterSelection"] = {"failbackDelaySeconds": self.delay}
        return body


@dataclass
class Importer:
    """A real importing cluster: an emulator thread and a `python -m member` process."""

    name: str
    region: str
    cluster: Cluster
    agent: Agent | None = None

    @property
    def state(self) -> EmulatorState:
        return self.cluster.state

    def slice_ready(self, service: str, exporter: str) -> bool | None:
        """Whether the mirrored slice of `exporter`'s slice of `service` has a ready
        endpoint here; None while there is none."""
        name = mirrored_slice_name(service, exporter, f"{service}-abcde")
        obj = self.state.get("endpointslices", NS, name)
        if obj is None:
            return None
        return any((e.get("conditions") or {}).get("ready", True) for e in obj["endpoints"])

    def tiers(self, service: str) -> list[list[str]] | None:
        si = self.state.get("serviceimports", NS, service) or {}
        text = ((si.get("metadata") or {}).get("annotations") or {}).get(
            "mcsync.io/cluster-selector-results")
        return [t["clusters"] for t in json.loads(text)] if text else None

    def writes(self) -> dict[str, int]:
        return {f"{verb} {resource}": n
                for (verb, resource), n in self.state.request_counts().items()
                if verb in WRITES}


def start_importer(name: str, region: str, directory: Path, hub: HubProcess,
                   token: str) -> Importer:
    state = EmulatorState(history=50_000, about_api=True, namespaces=(NS, "mcsync-system"))
    state.create("clusterproperties", None,
                 {"metadata": {"name": REGION}, "spec": {"value": region}})
    cluster = Cluster(name=name, directory=directory / name)
    cluster.directory.mkdir(parents=True, exist_ok=True)
    cluster.server = EmulatorServer(state).start()
    cluster.kubeconfig = write_kubeconfig(cluster.directory / "kubeconfig", name=name,
                                          url=cluster.server.url)
    cluster.token_file = cluster.directory / "token"
    cluster.token_file.write_text(token)
    importer = Importer(name, region, cluster)
    importer.agent = Agent(cluster, hub.url, workers=4).start()
    return importer


@dataclass
class Exporters:
    """The simulated exporting clusters: what their agents would PUT."""

    hub: HubProcess
    layout: Layout
    tokens: dict[str, str] = field(default_factory=dict)
    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=60))

    def _put(self, cluster: str, path: str, body: Any) -> None:
        headers = {"Authorization": f"Bearer {self.tokens[cluster]}"}
        url = f"{self.hub.url}/api/v1/clusters/{cluster}/{path}"
        for _ in range(30):
            answer = self.client.put(url, json=body, headers=headers)
            if answer.status_code == 200:
                return
            if answer.status_code != 503:
                raise RuntimeError(f"PUT {url}: {answer.status_code} {answer.text[:300]}")
            time.sleep(1)
        raise RuntimeError(f"PUT {url}: 503 30 times")

    def properties(self, cluster: str, region: str) -> None:
        self._put(cluster, "properties", {"properties": {REGION: region}})

    def fill(self) -> None:
        layout = self.layout
        for pair in range(layout.pairs):
            for region in ("eu", "us"):
                cluster = layout.exporter(pair, region)
                self.properties(cluster, region)
                services = layout.services_of(pair)
                self._put(cluster, "serviceexports", {
                    "apiVersion": "mcsync.io/v1alpha1", "kind": "InternalServiceExportList",
                    "metadata": {}, "items": [layout.export_body(cluster, s) for s in services]})
                self._put(cluster, "endpointslices", {
                    "apiVersion": "mcsync.io/v1alpha1", "kind": "EndpointSliceExportList",
                    "metadata": {}, "items": [layout.slice_body(pair, region, s, ready=True)
                                              for s in services]})

    def set_ready(self, pair: int, region: str, service: str, *, ready: bool) -> None:
        cluster = self.layout.exporter(pair, region)
        self._put(cluster, f"endpointslices/{NS}/{service}-abcde",
                  self.layout.slice_body(pair, region, service, ready=ready))


def until_all(importers: list[Importer], done: Callable[[Importer], bool], *,
              timeout: float) -> dict[str, float | None]:
    """For each importer, the perf_counter time `done` first held (polled every 10 ms)."""
    found: dict[str, float | None] = {i.name: None for i in importers}
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline and any(v is None for v in found.values()):
        now = time.perf_counter()
        for importer in importers:
            if found[importer.name] is None and done(importer):
                found[importer.name] = now
        time.sleep(0.01)
    return found


QUIET_SECONDS = 3.0  # no write for this long: the importers are idle (1 s in --smoke)


def quiet(importers: list[Importer], *, timeout: float = 300.0) -> float:
    """Wait until no importer's cluster has been written for `seconds`; answers the wait."""
    started = time.perf_counter()
    last = None
    still_since = started
    while time.perf_counter() - started < timeout:
        total = sum(sum(i.writes().values()) for i in importers)
        if total != last:
            last, still_since = total, time.perf_counter()
        elif time.perf_counter() - still_since >= QUIET_SECONDS:
            break
        time.sleep(0.25)
    return time.perf_counter() - started


def holds_everything(importer: Importer, layout: Layout) -> bool:
    """Every ServiceImport and mirrored slice of the fleet is in `importer`'s cluster."""
    keys = layout.pairs * layout.services
    return (len(importer.state.list("serviceimports", NS)) >= keys
            and len(importer.state.list("endpointslices", NS)) >= 2 * keys)


def since(start: float, times: dict[str, float | None]) -> list[float]:
    return [t - start for t in times.values() if t is not None]


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def fleet(layout: Layout, backend: str, directory: Path) -> Iterator[
        tuple[HubProcess, Exporters, list[Importer]]]:
    with fresh_database_sync(backend) as url:
        hub = HubProcess(database_url=url, directory=directory / "hub")
        importers: list[Importer] = []
        exporters: Exporters | None = None
        try:
            hub.start()
            names = [layout.exporter(p, r) for p in range(layout.pairs) for r in ("eu", "us")]
            tokens = hub.register_all([*names, *layout.importer_names])
            exporters = Exporters(hub, layout, tokens=tokens)
            exporters.fill()
            for index, name in enumerate(layout.importer_names):
                importers.append(start_importer(name, region_of(index), directory, hub,
                                                tokens[name]))
            yield hub, exporters, importers
        finally:
            for importer in importers:
                if importer.agent is not None:
                    importer.agent.stop()
                importer.cluster.stop()
            if exporters is not None:
                exporters.client.close()
            hub.stop()


def main() -> None:
    parser = base_parser(__doc__ or NAME)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--services", type=int, default=20)
    parser.add_argument("--endpoints", type=int, default=10)
    parser.add_argument("--importers", type=int, default=4)
    parser.add_argument("--delay", type=int, default=5, help="failbackDelaySeconds")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.smoke:
        global QUIET_SECONDS
        QUIET_SECONDS = 1.0
        args.clusters, args.services, args.endpoints = 5, 2, 3
        args.importers, args.delay, args.rounds = 1, 2, 1
    layout = Layout(args.clusters, args.services, args.endpoints, args.importers, args.delay)
    rounds = min(args.rounds, layout.pairs)
    load_before = load_average()
    failover: list[float] = []
    failback: list[float] = []
    properties: list[float] = []
    writes: list[dict[str, Any]] = []
    missed: dict[str, int] = {"failover": 0, "failback": 0, "property": 0}

    with tempfile.TemporaryDirectory(prefix="mcsync-selection-fleet-") as tmp, \
            fleet(layout, args.backend, Path(tmp)) as (_hub, exporters, importers):
        eu = [i for i in importers if i.region == "eu"]
        settle = wait_until(lambda: all(holds_everything(i, layout) for i in importers),
                            what="every importer holding every Service", timeout=900,
                            interval=0.25)
        settle += quiet(importers)
        for round_ in range(rounds):
            service = layout.services_of(round_)[0]
            us_exporter = layout.exporter(round_, "us")
            wait_until(lambda: all(i.slice_ready(service, us_exporter) is False  # noqa: B023
                                   for i in eu), what="tier 1 active", timeout=120)
            quiet(importers)
            before = {i.name: i.writes() for i in eu}
            sent = time.perf_counter()
            exporters.set_ready(round_, "eu", service, ready=False)
            done = until_all(eu, lambda i: i.slice_ready(service, us_exporter) is True,  # noqa: B023
                             timeout=60)
            failover += since(sent, done)
            missed["failover"] += sum(t is None for t in done.values())
            time.sleep(1.0)  # let the ServiceImport's annotation write land in the window
            for importer in eu:
                after, earlier = importer.writes(), before[importer.name]
                writes.append({k: n - earlier.get(k, 0) for k, n in after.items()
                               if n != earlier.get(k, 0)})
            sent = time.perf_counter()
            exporters.set_ready(round_, "eu", service, ready=True)
            done = until_all(eu, lambda i: i.slice_ready(service, us_exporter) is False,  # noqa: B023
                             timeout=layout.delay + 60)
            failback += since(sent, done)
            missed["failback"] += sum(t is None for t in done.values())
            # (iv) the us exporter moves to eu: it joins tier 1 of every eu importer.
            sent = time.perf_counter()
            exporters.properties(us_exporter, "eu")
            done = until_all(eu, lambda i: us_exporter in ((i.tiers(service) or [[]])[0]),  # noqa: B023
                             timeout=60)
            properties += since(sent, done)
            missed["property"] += sum(t is None for t in done.values())
            exporters.properties(us_exporter, "us")
            wait_until(lambda: all(us_exporter not in ((i.tiers(service) or [[]])[0])  # noqa: B023
                                   for i in eu), what="the exporter back in us", timeout=120)
        load_after = load_average()
        real = {"hub": 1, "agents": len(importers),
                "simulated_exporters": 2 * layout.pairs}

    failback_error = [abs(x - layout.delay) for x in failback]
    met = bool(failover and failback and properties) and not any(missed.values()) and (
        max(failover) < TARGET_FAILOVER_P99
        and max(failback_error) <= 1.0
        and max(properties) < TARGET_PROPERTY_P99
        and all(w.get("update endpointslices") == 2 and sum(w.values()) == 4 for w in writes)
    )
    write_result(NAME, args, {
        "clusters": layout.importers + 2 * layout.pairs,
        "services_per_exporter": layout.services,
        "endpoints_per_slice": layout.endpoints,
        "service_keys": layout.pairs * layout.services,
        "what_was_real": real,
        "importers": {"eu": len([i for i in range(layout.importers) if region_of(i) == "eu"]),
                      "us": len([i for i in range(layout.importers) if region_of(i) == "us"])},
        "failback_delay_seconds": layout.delay,
        "rounds": rounds,
        "settle_seconds": round(settle, 1),
        "failover_seconds": percentiles(failover),
        "failback_seconds": percentiles(failback),
        "failback_error_seconds_max": round(max(failback_error), 3) if failback_error else None,
        "property_change_seconds": percentiles(properties),
        "writes_per_switch_per_importer": writes,
        "missed": missed,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "target": {
            "failover_p99_below_s": TARGET_FAILOVER_P99,
            "failback_within_delay_plus_minus_s": 1.0,
            "property_change_p99_below_s": TARGET_PROPERTY_P99,
            "writes_per_switch": "2 slice updates, 1 ServiceImport update, 1 Event",
            "met": met,
        },
    })


if __name__ == "__main__":
    main()
