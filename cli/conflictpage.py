"""`mcsync describe conflict NS/NAME`: what each cluster exports, where they disagree, and
what to change (docs/reference.md#cli).

`mcsync conflicts` says *that* a service conflicts and on what; this page answers the next
question — "whose value is what, and which Service do I edit?". One section per disputed
property: the winner's value, every other cluster's, which differ, and the field of the
Service (or ServiceExport) that sets it (each read off the one table of properties,
`shared.properties`). The hub says which exports differ from the winner
on which decided property (`GET /api/v1/conflicts`, its own judgement, normalisations
included); the exports give every cluster's value; the ServiceImport gives the merged
ports and which clusters serve each (ports and IP families are merged, not decided, so
their section compares each cluster with the union, docs/reference.md#conflicts). Three requests,
whatever the size of the fleet. `gather` fetches, `page` writes, so the page is tested with plain
data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cli import render
from cli.client import HubClient
from cli.commands import Context, print_object
from shared import properties
from shared.models import (
    ExportConflict,
    ExportConflictList,
    InternalServiceExport,
    ServiceImport,
    ServicePort,
)


@dataclass(frozen=True)
class ConflictFacts:
    """What the hub said about one service key."""

    item: ServiceImport
    exports: list[InternalServiceExport]
    disputes: list[ExportConflict]


def gather(client: HubClient, *, namespace: str, name: str, page_size: int) -> ConflictFacts:
    return ConflictFacts(
        item=client.get_import(namespace, name),
        exports=client.list_exports(namespace=namespace, name=name, page_size=page_size).items,
        disputes=client.list_conflicts(namespace=namespace, name=name, page_size=page_size).items,
    )


def _precedence(export: InternalServiceExport) -> tuple[Any, str]:
    ref = export.spec.service_reference
    return ref.export_creation_timestamp, ref.cluster_id


def _value(value: Any) -> str:
    if value is None or value == {} or value == []:
        return "<unset>"
    if hasattr(value, "model_dump"):
        value = value.model_dump(by_alias=True, exclude_none=True)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _port(port: ServicePort | Any) -> str:
    text = f"{port.port}/{port.protocol}"
    if port.app_protocol:
        text += f" ({port.app_protocol})"
    return f"{port.name}:{text}" if port.name else text


def _port_key(port: ServicePort | Any) -> tuple[str, str, int, str | None]:
    return port.name, port.protocol, port.port, port.app_protocol


def _table(rows: Sequence[tuple[str, ...]], headers: tuple[str, ...]) -> list[str]:
    table = render.Table(headers, tuple(rows))
    return ["  " + line for line in render.format_table(table).splitlines()]


def _decided_section(field: str, reason: str, facts: ConflictFacts,
                     ordered: list[InternalServiceExport], winner: str) -> list[str]:
    prop = properties.by_name(field)
    differing = {d.cluster: p for d in facts.disputes for p in d.properties if p.field == field}
    decided = next(iter(differing.values())).decided_value if differing else None
    rows = []
    for export in ordered:
        cluster = export.spec.service_reference.cluster_id
        if cluster in differing:
            rows.append((cluster, _value(differing[cluster].value), "differs"))
        else:
            own = prop.value(export.spec)
            rows.append((cluster, _value(own if cluster != winner or decided is None
                                         else decided),
                         "winner, decides" if cluster == winner else "agrees"))
    losers = sorted(differing)
    winner_value = _value(decided) if differing else rows[0][1]
    change = (
        f"recreate the Service in {', '.join(losers)} (delete it, then create it again) as "
        f"the winner's {winner_value}: {prop.setter} cannot be changed on an existing "
        "Service"
        if prop.recreate
        else f"set {prop.setter} in {', '.join(losers)} to the winner's {winner_value}"
    )
    return [
        f"{field} ({reason}): the winner's {winner_value} is the service's",
        *_table(rows, ("CLUSTER", "VALUE", "")),
        f"  To settle it: {change}; "
        f"or, if {_value(differing[losers[0]].value) if losers else 'another value'} is the "
        f"one you want, change it in {winner} and every cluster that agrees with it — the "
        "oldest export decides.",
    ]


def _ports_section(facts: ConflictFacts, ordered: list[InternalServiceExport]) -> list[str]:
    served = {_port_key(p): set(p.clusters) for p in facts.item.status.ports}
    union = list(facts.item.spec.ports)
    rows = []
    short: list[str] = []
    for export in ordered:
        cluster = export.spec.service_reference.cluster_id
        own = export.spec.ports
        missing = [p for p in union if cluster not in served.get(_port_key(p), set())]
        left_out = [p for p in own if _port_key(p) not in served]
        if missing or left_out:
            short.append(cluster)
        rows.append((cluster, ", ".join(_port(p) for p in own) or render.NONE,
                     ", ".join(_port(p) for p in missing) or "-",
                     ", ".join(_port(p) for p in left_out) or "-"))
    return [
        f"ports (PortConflict): the import serves the union, "
        f"{', '.join(_port(p) for p in union) or render.NONE}; each port's traffic goes only "
        "to the clusters that declare it",
        *_table(rows, ("CLUSTER", "DECLARES", "MISSING", "LEFT-OUT (CLASHES)")),
        "  To settle it: declare the same ports (name, protocol, port, appProtocol) in every "
        f"cluster's Service spec.ports{'; now differing: ' + ', '.join(short) if short else ''}"
        ". A port left out clashes with an older export's port of the same name or number.",
    ]


def _families_section(facts: ConflictFacts, ordered: list[InternalServiceExport]) -> list[str]:
    common = facts.item.spec.ip_families
    rows = []
    for export in ordered:
        families = export.spec.ip_families
        fits = not families or any(f in common for f in families)
        rows.append((export.spec.service_reference.cluster_id,
                     ",".join(families) or "<any>", "agrees" if fits else "differs"))
    return [
        f"ipFamilies (IPFamilyConflict): the import's families are "
        f"{','.join(common) or render.NONE}, those every cluster stating families shares",
        *_table(rows, ("CLUSTER", "IP-FAMILIES", "")),
        "  To settle it: give the differing clusters' Services a family in common with the "
        "others (spec.ipFamilies and spec.ipFamilyPolicy).",
    ]


def page(facts: ConflictFacts) -> str:
    item = facts.item
    key = f"{item.metadata.namespace}/{item.metadata.name}"
    ordered = sorted(facts.exports, key=_precedence)
    reasons = item.status.conflicts
    if not ordered:
        return f"{key}: no cluster exports it any more.\n"
    winner_export = ordered[0]
    winner = winner_export.spec.service_reference.cluster_id
    head = [
        f"Service:    {key}",
        f"Exported:   by {', '.join(e.spec.service_reference.cluster_id for e in ordered)}",
        f"Winner:     {winner}, the oldest export (created "
        f"{render.timestamp(winner_export.spec.service_reference.export_creation_timestamp)}"
        "): its values decide every property but the ports and IP families, which are merged",
        f"Conflicts:  {', '.join(reasons) or render.NONE}",
    ]
    if not reasons:
        return "\n".join([*head, "", f"{key} is not in conflict: every cluster's export "
                          "agrees with the winner's."]) + "\n"
    sections: list[list[str]] = []
    by_field = {p.field: p.reason for d in facts.disputes for p in d.properties}
    for prop in properties.DECIDED:
        if prop.name in by_field:
            sections.append(
                _decided_section(prop.name, by_field[prop.name], facts, ordered, winner)
            )
    if properties.by_name("ports").reason in reasons:
        sections.append(_ports_section(facts, ordered))
    if properties.by_name("ipFamilies").reason in reasons:
        sections.append(_families_section(facts, ordered))
    lines = head
    for section in sections:
        lines += ["", *section]
    return "\n".join(lines) + "\n"


def describe(ctx: Context) -> int:
    """The page; with -o json, yaml or jsonpath the hub's ExportConflictList of the key."""
    opts = ctx.options
    assert opts.namespace is not None and opts.name is not None  # args.parse_args sees to it
    facts = gather(ctx.client, namespace=opts.namespace, name=opts.name,
                   page_size=opts.page_size)
    if print_object(ctx, ExportConflictList(items=facts.disputes)):
        return 0
    ctx.out.write(page(facts))
    return 0
