"""Agent CPU per re-evaluation of cluster selection over 10,000 imports with selectors.

A change of this cluster's own properties (its region relabelled, say) re-evaluates every
import with `@SameAsImporter@`: that is the largest burst of selection work an agent does,
so its cost is measured here, in process, on the agent's own code path
(`member.imports.selection.ImportSelections.evaluate`: the held import's selectors, the
exporters' properties, the ready endpoints counted from the import feed's source slices,
the pure core, the remembered state). Each import has two selectors (the importer's region,
then any region), `minReadyPercent` 50, and three exporting clusters with one slice of 10
endpoints each.

Figures: CPU milliseconds (`time.process_time`) of one evaluation of every import: cold
(the first, which also parses each slice's endpoints once), warm (this cluster's region
flips before each round, so every import's tiers are computed again: the burst above) and
with unchanged inputs (a repair or timers), each the median of several rounds, and per
import. Target: a warm re-evaluation of 10,000 imports under 200 ms of CPU.

    python -m bench.selection [--smoke] [--imports N] [--output FILE]
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from prometheus_client import CollectorRegistry

from bench.support import base_parser, write_result
from member.imports.importfeed import ImportView, feed_entry, import_item_key
from member.imports.importspec import HeldImport
from member.imports.selection import ImportSelections, SelectionMetrics, StaticProperties
from member.metrics import AgentMetrics
from shared.models import EndpointSliceExport, ServiceImport

NAME = "selection"
TARGET_MS = 200.0
CLUSTERS = {"eu1": "eu", "eu2": "eu", "us1": "us"}
SELECTORS = [
    {"propertySelector": {"matchProperties": {"region": "@SameAsImporter@"}}},
    {"propertySelector": {"matchExpressions": [{"key": "region", "operator": "Exists"}]}},
]
POLICY = {"minReadyPercent": 50}


class FeedCache:
    """The import feed informer's cache, filled directly (what `ImportView` reads)."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.items.get(key)

    def keys(self) -> list[str]:
        return list(self.items)


def build(imports: int) -> tuple[ImportView, list[tuple[str, HeldImport]]]:
    cache = FeedCache()
    view = ImportView(cache)  # type: ignore[arg-type]
    held: list[tuple[str, HeldImport]] = []
    clusters = list(CLUSTERS)
    for index in range(imports):
        name = f"svc-{index}"
        entry = feed_entry(ServiceImport.model_validate({
            "metadata": {"name": name, "namespace": "bench", "resourceVersion": str(index)},
            "spec": {"type": "ClusterSetIP", "ports": [{"name": "http", "port": 80}],
                     "clusterSelectors": SELECTORS, "clusterSelection": POLICY},
            "status": {"clusters": [{"cluster": c} for c in clusters],
                       "ports": [{"name": "http", "port": 80, "clusters": clusters}]},
        }))
        item = entry["item"]
        cache.items[import_item_key(entry)] = entry
        view.observe(None, entry)
        held.append((f"bench/{name}", item))
        for number, cluster in enumerate(clusters):
            ready = 10 if cluster != "eu2" else 3  # eu: 13 of 20 ready, over 50 %
            source = feed_entry(EndpointSliceExport.model_validate({
                "metadata": {"name": f"{name}-{cluster}", "namespace": "bench",
                             "resourceVersion": str(index)},
                "spec": {
                    "serviceName": name, "clusterId": cluster, "addressType": "IPv4",
                    "ports": [{"name": "http", "port": 8080}],
                    "endpoints": [
                        {"addresses": [f"10.{number}.{index % 250}.{e + 1}"],
                         "conditions": {"ready": e < ready, "serving": e < ready}}
                        for e in range(10)
                    ],
                },
            }))
            cache.items[import_item_key(source)] = source
            view.observe(None, source)
    return view, held


def evaluate_all(selections: ImportSelections, held: list[tuple[str, HeldImport]]) -> float:
    """CPU milliseconds of one evaluation of every import."""
    started = time.process_time()
    for key, imported in held:
        selections.evaluate(key, imported)
    return (time.process_time() - started) * 1000


def main() -> None:
    parser = base_parser(__doc__ or NAME)
    parser.add_argument("--imports", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    imports = 200 if args.smoke else args.imports
    rounds = 2 if args.smoke else args.rounds

    view, held = build(imports)
    properties = StaticProperties({"region": "eu"}, {c: {"region": r} for c, r in CLUSTERS.items()})
    selections = ImportSelections(
        imports=view, properties=properties,
        metrics=SelectionMetrics(AgentMetrics(registry=CollectorRegistry())),
    )
    cold_ms = evaluate_all(selections, held)
    unchanged_ms = statistics.median(evaluate_all(selections, held) for _ in range(rounds))
    # The burst: this cluster's region flips, every import's tiers are computed again.
    warm = []
    for round_ in range(rounds):
        properties.set("self", {"region": "us" if round_ % 2 == 0 else "eu"}, own=True)
        warm.append(evaluate_all(selections, held))
    warm_ms = statistics.median(warm)
    scaled = warm_ms * 10_000 / imports
    chosen = selections.current(held[0][0])
    write_result(NAME, args, {
        "imports": imports,
        "exporting_clusters_per_import": len(CLUSTERS),
        "selectors_per_import": len(SELECTORS),
        "cold_cpu_ms": round(cold_ms, 1),
        "warm_cpu_ms": round(warm_ms, 1),
        "unchanged_inputs_cpu_ms": round(unchanged_ms, 1),
        "warm_cpu_ms_rounds": [round(x, 1) for x in warm],
        "warm_cpu_us_per_import": round(warm_ms * 1000 / imports, 1),
        "warm_cpu_ms_per_10000_imports": round(scaled, 1),
        "active_clusters_of_first_import": list(chosen.active_clusters) if chosen else None,
        "target": {"warm_cpu_ms_per_10000_imports_below": TARGET_MS, "met": scaled < TARGET_MS},
    })


if __name__ == "__main__":
    main()
