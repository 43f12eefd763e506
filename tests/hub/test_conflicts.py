"""Case-by-case tests of the pure conflict judge (hub/conflicts.py, SPEC §3).

Table-driven, the way fleet-networking tests its conflict rules: plain export specs in,
verdicts out. Each case names the exports (cluster, age, the fields that differ from a
default spec) and the verdicts users rely on: who wins, the key's reasons, each export's
own reasons and overridden fields, and the ServiceImport the key produces. Hypothesis
properties at the end check the rules that must hold for every set of exports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.conflicts import ExportVerdict, KeyJudgement, judge, precedence_key
from shared import conditions
from shared.models import Condition, InternalServiceExportSpec

T0 = datetime(2026, 3, 1, 9, 30, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def port(
    number: int, name: str = "", protocol: str = "TCP", app: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "protocol": protocol, "port": number}
    if app is not None:
        body["appProtocol"] = app
    return body


HTTP = port(80, "http")


def spec(
    cluster: str,
    *,
    created: datetime = T0,
    ports: list[dict[str, Any]] | None = None,
    namespace: str = "demo",
    name: str = "web",
    **fields: Any,
) -> InternalServiceExportSpec:
    """An export spec of `cluster` for demo/web; `fields` are wire-named spec fields."""
    return InternalServiceExportSpec.model_validate(
        {
            "ports": [HTTP] if ports is None else ports,
            "serviceReference": {
                "clusterId": cluster,
                "namespace": namespace,
                "name": name,
                "uid": f"uid-{cluster}",
                "resourceVersion": "1",
                "generation": 3,
                "exportedSince": created.isoformat(),
                "exportCreationTimestamp": created.isoformat(),
            },
            **fields,
        }
    )


def ordered(*specs: InternalServiceExportSpec) -> list[InternalServiceExportSpec]:
    """The exports in precedence order, as the store's SQL hands them to the judge."""
    return sorted(specs, key=precedence_key)


# --- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    exports: list[InternalServiceExportSpec]
    winner: str
    reasons: tuple[str, ...]
    # cluster -> its own reasons; clusters not listed have none
    own: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # cluster -> overridden fields; clusters not listed have none
    overridden: dict[str, tuple[str, ...]] = field(default_factory=dict)


CASES = [
    Case("single export", [spec("a", type="Headless", ipFamilies=["IPv6"])], "a", ()),
    Case(
        "identical specs from three clusters",
        [spec("a", created=at(0)), spec("b", created=at(1)), spec("c", created=at(2))],
        "a",
        (),
    ),
    Case(
        "type",
        [spec("a", created=at(0)), spec("b", created=at(1), type="Headless")],
        "a",
        ("TypeConflict",),
        own={"b": ("TypeConflict",)},
        overridden={"b": ("type",)},
    ),
    Case(
        "port: same name, another number",
        [spec("a", created=at(0)), spec("b", created=at(1), ports=[port(8080, "http")])],
        "a",
        ("PortConflict",),
        own={"b": ("PortConflict",)},
        overridden={"b": ("ports",)},
    ),
    Case(
        "sessionAffinity",
        [spec("a", created=at(0)), spec("b", created=at(1), sessionAffinity="ClientIP")],
        "a",
        ("SessionAffinityConflict",),
        own={"b": ("SessionAffinityConflict",)},
        overridden={"b": ("sessionAffinity",)},
    ),
    Case(
        "sessionAffinityConfig timeouts differ",
        [
            spec("a", created=at(0), sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}}),
            spec("b", created=at(1), sessionAffinityConfig={"clientIP": {"timeoutSeconds": 90}}),
        ],
        "a",
        ("SessionAffinityConfigConflict",),
        own={"b": ("SessionAffinityConfigConflict",)},
        overridden={"b": ("sessionAffinityConfig",)},
    ),
    Case(
        "sessionAffinityConfig present vs absent",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), sessionAffinityConfig={"clientIP": {"timeoutSeconds": 90}}),
        ],
        "a",
        ("SessionAffinityConfigConflict",),
        own={"b": ("SessionAffinityConfigConflict",)},
        overridden={"b": ("sessionAffinityConfig",)},
    ),
    Case(
        "sessionAffinityConfig without a value equals none",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), sessionAffinityConfig={}),
            spec("c", created=at(2), sessionAffinityConfig={"clientIP": {}}),
        ],
        "a",
        (),
    ),
    Case(
        "internalTrafficPolicy",
        [
            spec("a", created=at(0), internalTrafficPolicy="Cluster"),
            spec("b", created=at(1), internalTrafficPolicy="Local"),
        ],
        "a",
        ("InternalTrafficPolicyConflict",),
        own={"b": ("InternalTrafficPolicyConflict",)},
        overridden={"b": ("internalTrafficPolicy",)},
    ),
    Case(
        "trafficDistribution",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), trafficDistribution="PreferClose"),
        ],
        "a",
        ("TrafficDistributionConflict",),
        own={"b": ("TrafficDistributionConflict",)},
        overridden={"b": ("trafficDistribution",)},
    ),
    Case(
        "ipFamilies with nothing in common",
        [
            spec("a", created=at(0), ipFamilies=["IPv4"]),
            spec("b", created=at(1), ipFamilies=["IPv6"]),
        ],
        "a",
        ("IPFamilyConflict",),
        own={"b": ("IPFamilyConflict",)},
        overridden={"b": ("ipFamilies",)},
    ),
    Case(
        "exportedLabels",
        [
            spec("a", created=at(0), exportedLabels={"tier": "web"}),
            spec("b", created=at(1), exportedLabels={"tier": "api"}),
        ],
        "a",
        ("LabelsConflict",),
        own={"b": ("LabelsConflict",)},
        overridden={"b": ("exportedLabels",)},
    ),
    Case(
        "exportedAnnotations",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), exportedAnnotations={"team": "payments"}),
        ],
        "a",
        ("AnnotationsConflict",),
        own={"b": ("AnnotationsConflict",)},
        overridden={"b": ("exportedAnnotations",)},
    ),
    Case(
        "port and type from one cluster",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), type="Headless", ports=[port(81, "http")]),
        ],
        "a",
        ("PortConflict", "TypeConflict"),
        own={"b": ("PortConflict", "TypeConflict")},
        overridden={"b": ("ports", "type")},
    ),
    Case(
        "reasons from different clusters are unioned in fixed order",
        [
            spec("a", created=at(0), exportedLabels={"x": "1"}),
            spec("b", created=at(1), exportedLabels={"x": "1"}, type="Headless"),
            spec("c", created=at(2), exportedLabels={"x": "2"}),
            spec("d", created=at(3), exportedLabels={"x": "1"}, ports=[port(443, "http")]),
        ],
        "a",
        ("LabelsConflict", "PortConflict", "TypeConflict"),
        own={
            "b": ("TypeConflict",),
            "c": ("LabelsConflict",),
            "d": ("PortConflict",),
        },
        overridden={"b": ("type",), "c": ("exportedLabels",), "d": ("ports",)},
    ),
    Case(
        "port: same number under another name",
        [spec("a", created=at(0)), spec("b", created=at(1), ports=[port(80, "web")])],
        "a",
        ("PortConflict",),
        own={"b": ("PortConflict",)},
        overridden={"b": ("ports",)},
    ),
    Case(
        "port: two unnamed ports with different numbers clash on the empty name",
        [
            spec("a", created=at(0), ports=[port(80)]),
            spec("b", created=at(1), ports=[port(81)]),
        ],
        "a",
        ("PortConflict",),
        own={"b": ("PortConflict",)},
        overridden={"b": ("ports",)},
    ),
    Case(
        "port: appProtocol differs",
        [
            spec("a", created=at(0), ports=[port(80, "http", app="http")]),
            spec("b", created=at(1), ports=[port(80, "http", app="kubernetes.io/h2c")]),
        ],
        "a",
        ("PortConflict",),
        own={"b": ("PortConflict",)},
        overridden={"b": ("ports",)},
    ),
    Case(
        "port: same number on another protocol is a different port",
        [
            spec("a", created=at(0), ports=[port(53, "dns")]),
            spec("b", created=at(1), ports=[port(53, "dns"), port(53, "dns-udp", "UDP")]),
        ],
        "a",
        (),
    ),
    Case(
        "port: disjoint ports merge into a union",
        [
            spec("a", created=at(0), ports=[port(80, "http")]),
            spec("b", created=at(1), ports=[port(443, "https")]),
        ],
        "a",
        (),
    ),
    Case(
        "port clash with an older non-winner's port",
        [
            spec("a", created=at(0), ports=[port(80, "http")]),
            spec("b", created=at(1), ports=[port(80, "http"), port(443, "https")]),
            spec("c", created=at(2), ports=[port(80, "http"), port(443, "tls")]),
        ],
        "a",
        ("PortConflict",),
        own={"c": ("PortConflict",)},
        overridden={"c": ("ports",)},
    ),
    Case(
        "timestamp tie broken by cluster id in string order",
        [
            spec("cluster-9", created=at(0), type="Headless"),
            spec("cluster-10", created=at(0)),
        ],
        "cluster-10",
        ("TypeConflict",),
        own={"cluster-9": ("TypeConflict",)},
        overridden={"cluster-9": ("type",)},
    ),
    Case(
        "timestamps in other offsets compare in UTC",
        [
            # 10:00+02:00 is 08:00Z, an hour and a half older than T0 (09:30Z)
            spec("z", created=datetime(2026, 3, 1, 10, 0, tzinfo=timezone(timedelta(hours=2)))),
            spec("a", created=T0, type="Headless"),
        ],
        "z",
        ("TypeConflict",),
        own={"a": ("TypeConflict",)},
        overridden={"a": ("type",)},
    ),
    Case(
        "ipFamilies: an empty list places no constraint",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), ipFamilies=["IPv6", "IPv4"]),
            spec("c", created=at(2), ipFamilies=["IPv4"]),
        ],
        "a",
        (),
    ),
    Case(
        "ipFamilies: the export sharing nothing with the running intersection loses",
        [
            spec("a", created=at(0), ipFamilies=["IPv4", "IPv6"]),
            spec("b", created=at(1), ipFamilies=["IPv4"]),
            spec("c", created=at(2), ipFamilies=["IPv6"]),
        ],
        "a",
        ("IPFamilyConflict",),
        own={"c": ("IPFamilyConflict",)},
        overridden={"c": ("ipFamilies",)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_verdicts(case: Case) -> None:
    exports = ordered(*case.exports)
    result = judge(exports)
    clusters = tuple(e.service_reference.cluster_id for e in exports)

    assert result.winner == case.winner
    assert result.clusters == clusters
    assert result.reasons == case.reasons
    assert set(result.verdicts) == set(clusters)
    for cluster in clusters:
        verdict = result.verdicts[cluster]
        assert verdict.cluster_id == cluster
        # all or nothing: every export of a conflicting key is in conflict, winner included
        assert verdict.conflict is bool(case.reasons)
        assert verdict.reasons == case.own.get(cluster, ())
        assert verdict.overridden_fields == case.overridden.get(cluster, ())
    assert result.verdicts[case.winner].reasons == ()


# --- the ServiceImport ----------------------------------------------------------------------


def test_identical_specs_list_every_cluster_on_the_merged_port() -> None:
    result = judge([spec(c, created=at(i)) for i, c in enumerate(["a", "b", "c"])])
    assert [p.model_dump() for p in result.port_clusters] == [
        {
            "name": "http",
            "protocol": "TCP",
            "port": 80,
            "appProtocol": None,
            "clusters": ["a", "b", "c"],
        }
    ]
    assert [(p.name, p.port) for p in result.import_spec.ports] == [("http", 80)]


def test_port_union_keeps_first_seen_order_and_leaves_clashing_ports_out() -> None:
    result = judge(
        [
            spec("a", created=at(0), ports=[port(80, "http"), port(9090, "metrics")]),
            spec("b", created=at(1), ports=[port(443, "https"), port(80, "http")]),
            # "metrics" is taken by 9090; 443 is taken by "https"; 8443 is new
            spec(
                "c",
                created=at(2),
                ports=[port(9091, "metrics"), port(443, "tls"), port(8443, "alt")],
            ),
        ]
    )
    assert [(p.name, p.port, p.clusters) for p in result.port_clusters] == [
        ("http", 80, ["a", "b"]),
        ("metrics", 9090, ["a"]),
        ("https", 443, ["b"]),
        ("alt", 8443, ["c"]),
    ]
    assert [p.name for p in result.import_spec.ports] == ["http", "metrics", "https", "alt"]
    assert result.reasons == ("PortConflict",)
    assert result.verdicts["c"].reasons == ("PortConflict",)
    assert result.verdicts["b"].reasons == ()


def test_import_takes_the_winners_decided_properties() -> None:
    decided: dict[str, Any] = {
        "type": "Headless",
        "sessionAffinity": "ClientIP",
        "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 300}},
        "internalTrafficPolicy": "Local",
        "trafficDistribution": "PreferClose",
        "exportedAnnotations": {"team": "edge"},
    }
    winner = spec(
        "b", created=at(0), ipFamilies=["IPv6", "IPv4"], exportedLabels={"tier": "web"}, **decided
    )
    # the loser agrees on everything but its labels, and narrows the families
    loser = spec("a", created=at(5), ipFamilies=["IPv4"], exportedLabels={"tier": "api"}, **decided)
    result = judge([winner, loser])
    imported = result.import_spec
    assert result.winner == "b"
    assert imported.type == "Headless"
    assert imported.session_affinity == "ClientIP"
    assert imported.session_affinity_config is not None
    assert imported.session_affinity_config.client_ip is not None
    assert imported.session_affinity_config.client_ip.timeout_seconds == 300
    assert imported.internal_traffic_policy == "Local"
    assert imported.traffic_distribution == "PreferClose"
    assert imported.labels == {"tier": "web"}
    assert imported.annotations == {"team": "edge"}
    # families: the winner's that every constraining export shares
    assert imported.ip_families == ["IPv4"]
    assert result.reasons == ("LabelsConflict",)


@pytest.mark.parametrize(
    ("families", "expected", "losers"),
    [
        ([["IPv6", "IPv4"], ["IPv4", "IPv6"]], ["IPv6", "IPv4"], []),
        ([["IPv6", "IPv4"], ["IPv4"]], ["IPv4"], []),
        ([[], ["IPv6", "IPv4"], ["IPv4"]], ["IPv4"], []),
        ([[], []], [], []),
        ([["IPv4"], ["IPv6"], ["IPv4"]], ["IPv4"], ["b"]),
        ([[], ["IPv6"], ["IPv4"]], ["IPv6"], ["c"]),
    ],
)
def test_ip_families_of_the_import(
    families: list[list[str]], expected: list[str], losers: list[str]
) -> None:
    exports = [
        spec(cluster, created=at(i), ipFamilies=fams)
        for i, (cluster, fams) in enumerate(zip("abc", families, strict=False))
    ]
    result = judge(exports)
    assert result.import_spec.ip_families == expected
    assert [c for c, v in result.verdicts.items() if "ipFamilies" in v.overridden_fields] == losers
    assert result.reasons == (("IPFamilyConflict",) if losers else ())


# --- the verdict as a function of the set ---------------------------------------------------


def test_winner_withdrawal_makes_the_next_oldest_win() -> None:
    a = spec("a", created=at(0), type="Headless")
    b = spec("b", created=at(5))
    c = spec("c", created=at(9))
    before = judge([a, b, c])
    assert before.winner == "a"
    assert before.reasons == ("TypeConflict",)
    assert before.verdicts["b"].overridden_fields == ("type",)

    after = judge([b, c])
    assert after.winner == "b"
    assert after.reasons == ()
    assert after.import_spec.type == "ClusterSetIP"
    for cluster in ("b", "c"):
        assert after.verdicts[cluster].conflict is False
        assert after.verdicts[cluster].message != before.verdicts[cluster].message
        assert "b's export is the oldest" in after.verdicts[cluster].message


def test_verdict_flips_to_no_conflict_when_specs_converge() -> None:
    diverged = judge([spec("a", created=at(0)), spec("b", created=at(1), type="Headless")])
    converged = judge([spec("a", created=at(0)), spec("b", created=at(1))])
    assert all(v.conflict for v in diverged.verdicts.values())
    assert not any(v.conflict for v in converged.verdicts.values())
    assert converged.reasons == ()


def test_a_matching_cluster_joining_does_not_change_the_others_messages() -> None:
    # The store rewrites a record only when its message changes: agreement must be quiet.
    two = judge([spec("a", created=at(0)), spec("b", created=at(1))])
    three = judge([spec("a", created=at(0)), spec("b", created=at(1)), spec("c", created=at(2))])
    assert two.verdicts["a"].message == three.verdicts["a"].message
    assert two.verdicts["b"].message == three.verdicts["b"].message


# --- messages -------------------------------------------------------------------------------


def conflict_key() -> KeyJudgement:
    return judge(
        [
            spec("alpha", created=at(0)),
            spec("beta", created=at(60), type="Headless", ports=[port(8080, "http")]),
            spec("gamma", created=at(120)),
        ]
    )


def test_conflict_message_of_an_overridden_export() -> None:
    message = conflict_key().verdicts["beta"].message
    assert message == (
        "Clusters disagree on ports, type: alpha wins as the oldest export, created "
        "2026-03-01T09:30:00.000Z. This cluster's type was overridden by the winner's; its "
        "port http (8080/TCP) clashes with ports of older exports and was left out of the "
        "import."
    )


def test_conflict_message_of_the_winner_says_its_values_stand() -> None:
    message = conflict_key().verdicts["alpha"].message
    assert message.startswith("Clusters disagree on ports, type: alpha wins as the oldest")
    assert message.endswith("This cluster is the winner; its values stand.")


def test_conflict_message_of_a_matching_export_says_it_was_not_overridden() -> None:
    message = conflict_key().verdicts["gamma"].message
    assert "alpha wins as the oldest export, created 2026-03-01T09:30:00.000Z" in message
    assert "compatible with the winner's" in message
    assert "overridden" not in message


def test_conflict_message_names_every_overridden_decided_field() -> None:
    result = judge(
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), sessionAffinity="ClientIP", exportedLabels={"x": "y"}),
        ]
    )
    assert (
        "This cluster's sessionAffinity, exportedLabels were overridden by the winner's."
        in result.verdicts["b"].message
    )


def test_conflict_message_says_a_tie_was_broken_by_cluster_id() -> None:
    result = judge([spec("cluster-10", created=at(0)), spec("cluster-9", type="Headless")])
    message = result.verdicts["cluster-9"].message
    assert "cluster-10 wins as the oldest export, created 2026-03-01T09:30:00.000Z" in message
    assert "tied with cluster-9; the tie was broken by cluster id" in message
    untied = judge([spec("a", created=at(0)), spec("b", created=at(1), type="Headless")])
    assert "tie" not in untied.verdicts["b"].message


def test_message_keeps_sub_millisecond_precision_instead_of_showing_a_false_tie() -> None:
    result = judge(
        [
            spec("b", created=T0 + timedelta(microseconds=1)),
            spec("a", created=T0 + timedelta(microseconds=2), type="Headless"),
        ]
    )
    assert result.winner == "b"
    assert "created 2026-03-01T09:30:00.000001Z" in result.verdicts["a"].message
    assert "tie" not in result.verdicts["a"].message


def test_no_conflict_message() -> None:
    result = judge([spec("a", created=at(0)), spec("b", created=at(1))])
    expected = (
        "No conflicts: every exporting cluster's spec is compatible; a's export is the "
        "oldest, created 2026-03-01T09:30:00.000Z."
    )
    assert [v.message for v in result.verdicts.values()] == [expected, expected]


def test_many_rejected_ports_are_counted_not_all_named() -> None:
    theirs = [port(1000 + i, f"p{i}") for i in range(8)]
    mine = [port(2000 + i, f"p{i}") for i in range(8)]
    result = judge([spec("a", created=at(0), ports=theirs), spec("b", created=at(1), ports=mine)])
    message = result.verdicts["b"].message
    assert "ports p0 (2000/TCP), p1 (2001/TCP), p2 (2002/TCP), p3 (2003/TCP), p4 (2004/TCP)" in (
        message
    )
    assert "and 3 more clash with ports of older exports" in message
    assert "p5 (" not in message


# --- condition() ----------------------------------------------------------------------------

NOW = datetime(2026, 3, 2, tzinfo=UTC)
EARLIER = datetime(2026, 2, 1, tzinfo=UTC)


def test_condition_of_a_conflicting_key_joins_the_key_reasons() -> None:
    result = judge(
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), type="Headless"),
            spec("c", created=at(2), ports=[port(81, "http")]),
        ]
    )
    # b's own reason is only TypeConflict; its condition carries the whole key's
    condition = result.verdicts["b"].condition(
        key_reasons=result.reasons, observed_generation=7, now=NOW, previous=None
    )
    assert condition.type == "Conflict"
    assert condition.status == "True"
    assert condition.reason == "PortConflict,TypeConflict"
    assert condition.message == result.verdicts["b"].message
    assert condition.observed_generation == 7
    assert condition.last_transition_time == NOW


def test_condition_without_conflict() -> None:
    result = judge([spec("a")])
    condition = result.verdicts["a"].condition(
        key_reasons=(), observed_generation=None, now=NOW, previous=None
    )
    assert (condition.status, condition.reason) == ("False", "NoConflicts")
    assert condition.observed_generation is None


def test_condition_keeps_transition_time_while_status_is_unchanged() -> None:
    verdict = judge([spec("a", created=at(0)), spec("b", created=at(1), type="Headless")]).verdicts[
        "b"
    ]
    previous = Condition(
        type="Conflict",
        status="True",
        reason="PortConflict",
        message="an older message",
        last_transition_time=EARLIER,
    )
    kept = verdict.condition(
        key_reasons=("TypeConflict",), observed_generation=3, now=NOW, previous=previous
    )
    assert kept.last_transition_time == EARLIER
    assert kept.reason == "TypeConflict"

    flipped_from = previous.model_copy(update={"status": "False", "reason": "NoConflicts"})
    moved = verdict.condition(
        key_reasons=("TypeConflict",), observed_generation=3, now=NOW, previous=flipped_from
    )
    assert moved.last_transition_time == NOW


def test_condition_refuses_reasons_that_contradict_the_verdict() -> None:
    verdict = judge([spec("a")]).verdicts["a"]
    with pytest.raises(ValueError, match="conflict=False"):
        verdict.condition(
            key_reasons=("TypeConflict",), observed_generation=1, now=NOW, previous=None
        )


# --- input checks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exports", "match"),
    [
        ([], "at least one export"),
        ([spec("b", created=at(1)), spec("a", created=at(0))], "precedence order"),
        ([spec("b", created=at(0)), spec("a", created=at(0))], "precedence order"),
        ([spec("a"), spec("b", name="api")], "one service key"),
        ([spec("a"), spec("b", namespace="other")], "one service key"),
        ([spec("a", created=at(0)), spec("a", created=at(1))], "exports twice"),
    ],
    ids=["empty", "older after newer", "tie out of id order", "name", "namespace", "twice"],
)
def test_judge_rejects_bad_input(exports: list[InternalServiceExportSpec], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        judge(exports)


def test_precedence_key_normalises_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    key = precedence_key(spec("a", created=datetime(2026, 3, 1, 11, 30, tzinfo=plus_two)))
    assert key == (T0, "a")
    assert key[0].utcoffset() == timedelta(0)


# --- properties -----------------------------------------------------------------------------

CLUSTERS = ["a", "b", "c", "cluster-1", "cluster-10", "cluster-9"]

port_names = st.sampled_from(["", "http", "https", "grpc"])
ports_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "name": port_names,
            "protocol": st.sampled_from(["TCP", "UDP"]),
            "port": st.sampled_from([53, 80, 443]),
        }
    ),
    max_size=3,
).filter(
    # the wire model's own rules: unique names and numbers; several ports must be named
    lambda ps: (
        len({p["name"] for p in ps}) == len(ps)
        and len({(p["protocol"], p["port"]) for p in ps}) == len(ps)
        and (len(ps) <= 1 or all(p["name"] for p in ps))
    )
)

fields_strategy = st.fixed_dictionaries(
    {
        "ports": ports_strategy,
        "type": st.sampled_from(["ClusterSetIP", "Headless"]),
        "sessionAffinity": st.sampled_from(["None", "ClientIP"]),
        "sessionAffinityConfig": st.sampled_from(
            [None, {}, {"clientIP": {"timeoutSeconds": 10800}}]
        ),
        "internalTrafficPolicy": st.sampled_from([None, "Cluster", "Local"]),
        "trafficDistribution": st.sampled_from([None, "PreferClose"]),
        "ipFamilies": st.sampled_from([[], ["IPv4"], ["IPv6"], ["IPv4", "IPv6"]]),
        "exportedLabels": st.sampled_from([{}, {"tier": "web"}]),
        "exportedAnnotations": st.sampled_from([{}, {"team": "edge"}]),
    }
)


@st.composite
def key_exports(draw: st.DrawFn) -> list[InternalServiceExportSpec]:
    """A key's exports in precedence order: distinct clusters, often tied timestamps."""
    clusters = draw(st.lists(st.sampled_from(CLUSTERS), min_size=1, max_size=5, unique=True))
    specs = []
    for cluster in clusters:
        fields: dict[str, Any] = draw(fields_strategy)
        specs.append(spec(cluster, created=at(draw(st.integers(0, 3))), **fields))
    return ordered(*specs)


def verdict_table(result: KeyJudgement) -> dict[str, ExportVerdict]:
    return dict(result.verdicts)


@settings(max_examples=200, deadline=None)
@given(key_exports())
def test_property_judging_is_deterministic(exports: list[InternalServiceExportSpec]) -> None:
    first = judge(exports)
    copies = [InternalServiceExportSpec.model_validate(e.model_dump()) for e in exports]
    second = judge(copies)
    assert verdict_table(first) == verdict_table(second)
    assert first.reasons == second.reasons
    assert first.import_spec == second.import_spec
    assert first.port_clusters == second.port_clusters


@settings(max_examples=200, deadline=None)
@given(key_exports())
def test_property_conflict_is_all_or_nothing(exports: list[InternalServiceExportSpec]) -> None:
    result = judge(exports)
    flags = {v.conflict for v in result.verdicts.values()}
    assert len(flags) == 1
    assert flags == {bool(result.reasons)}
    own = {r for v in result.verdicts.values() for r in v.reasons}
    assert set(result.reasons) == own
    assert list(result.reasons) == [r for r in conditions.CONFLICT_REASONS if r in own]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(CLUSTERS), min_size=1, max_size=6, unique=True),
    fields_strategy,
    st.data(),
)
def test_property_identical_specs_never_conflict(
    clusters: list[str], fields: dict[str, Any], data: st.DataObject
) -> None:
    exports = ordered(
        *(spec(c, created=at(data.draw(st.integers(0, 3))), **fields) for c in clusters)
    )
    result = judge(exports)
    assert result.reasons == ()
    assert all(not v.conflict and not v.overridden_fields for v in result.verdicts.values())
    for merged in result.port_clusters:
        assert merged.clusters == list(result.clusters)


@settings(max_examples=200, deadline=None)
@given(key_exports())
def test_property_winner_is_the_minimum_by_precedence(
    exports: list[InternalServiceExportSpec],
) -> None:
    result = judge(exports)
    assert result.winner == min(exports, key=precedence_key).service_reference.cluster_id
    assert result.verdicts[result.winner].overridden_fields == ()
    # the import's decided properties are the winner's own
    winner = exports[0]
    assert result.import_spec.type == winner.type
    assert result.import_spec.labels == winner.exported_labels
    # withdrawing the winner hands the key to the next oldest
    if len(exports) > 1:
        assert judge(exports[1:]).winner == exports[1].service_reference.cluster_id
