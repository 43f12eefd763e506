"""The three cluster-selection annotations are refused or accepted by one set of rules
(docs/reference.md#cluster-selection), so the agent's `InvalidClusterSelector` and the
hub's 422 never disagree; and a property selector matches as a Kubernetes label selector
does, with `@SameAsImporter@` read from the importing cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from shared.clusterselection import (
    ANNOTATION_CLUSTER_SELECTION,
    ANNOTATION_CLUSTER_SELECTORS,
    ANNOTATION_IMPORT_CLUSTERS,
    ClusterSelectionPolicy,
    ClusterSelector,
    ClusterSelectors,
    ImportClustersSelector,
    InvalidClusterSelector,
    PropertySelector,
    matches,
    parse_selection_annotations,
    tiers_of,
)
from shared.models import to_wire

EU = {"propertySelector": {"matchProperties": {"region": "eu"}}}
SAME = {"propertySelector": {"matchProperties": {"region": "@SameAsImporter@"}}}


def selectors(*items: Any) -> dict[str, str]:
    return {ANNOTATION_CLUSTER_SELECTORS: json.dumps(list(items))}


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    term: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        term["values"] = list(values)
    return {"propertySelector": {"matchExpressions": [term]}}


# --- accepted -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "annotations",
    [
        pytest.param(selectors(EU), id="one matchProperties selector"),
        pytest.param(selectors(SAME, {"propertySelector": {"matchExpressions": [
            {"key": "region", "operator": "Exists"}]}}), id="two tiers, SameAsImporter"),
        pytest.param(selectors(*[EU] * 16), id="sixteen selectors"),
        pytest.param(selectors(expression("zone", "In", "a", "@SameAsImporter@")),
                     id="In with SameAsImporter"),
        pytest.param(selectors(expression("zone", "NotIn", "@SameAsImporter@")),
                     id="NotIn with SameAsImporter"),
        pytest.param(selectors(expression("topology.example.com", "DoesNotExist")),
                     id="DoesNotExist, dotted key"),
        pytest.param({ANNOTATION_CLUSTER_SELECTION: "{}"}, id="empty policy: defaults"),
        pytest.param({ANNOTATION_CLUSTER_SELECTION: json.dumps({
            "minReadyEndpoints": 10000, "minReadyPercent": 100,
            "failbackDelaySeconds": 3600, "fallback": "None"})}, id="policy at its bounds"),
        pytest.param({ANNOTATION_IMPORT_CLUSTERS: json.dumps(
            {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]})},
            id="import-clusters"),
        pytest.param({"unrelated": "x"}, id="no selection annotations"),
    ],
)
def test_valid_annotations_parse(annotations: dict[str, str]) -> None:
    parse_selection_annotations(annotations)


def test_absent_annotations_are_none_and_defaults_are_the_documented_ones() -> None:
    parsed = parse_selection_annotations({})
    assert (parsed.cluster_selectors, parsed.cluster_selection, parsed.import_clusters) == (
        None, None, None)
    policy = parse_selection_annotations({ANNOTATION_CLUSTER_SELECTION: "{}"}).cluster_selection
    assert policy == ClusterSelectionPolicy(
        min_ready_endpoints=1, min_ready_percent=0, failback_delay_seconds=30,
        fallback="AllClusters")


def test_models_are_camel_case_on_the_wire_and_round_trip() -> None:
    parsed = parse_selection_annotations(
        selectors({"propertySelector": {"matchProperties": {"region": "eu"}, "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}})
        | {ANNOTATION_CLUSTER_SELECTION: json.dumps({"minReadyPercent": 50})}
    )
    assert parsed.cluster_selectors is not None and parsed.cluster_selection is not None
    wire = to_wire(parsed.cluster_selectors[0])
    assert wire == {"propertySelector": {"matchProperties": {"region": "eu"}, "matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}}
    assert ClusterSelector.model_validate(wire) == parsed.cluster_selectors[0]
    assert to_wire(parsed.cluster_selection) == {
        "minReadyEndpoints": 1, "minReadyPercent": 50, "failbackDelaySeconds": 30,
        "fallback": "AllClusters"}


# --- refused: one row per rule ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "named", "problem"),
    [
        ({ANNOTATION_CLUSTER_SELECTORS: "[{"}, ANNOTATION_CLUSTER_SELECTORS, "not valid JSON"),
        ({ANNOTATION_CLUSTER_SELECTORS: json.dumps(EU)}, ANNOTATION_CLUSTER_SELECTORS,
         "must be a JSON list, not an object"),
        (selectors(), ANNOTATION_CLUSTER_SELECTORS, "the list is empty"),
        (selectors(*[EU] * 17), ANNOTATION_CLUSTER_SELECTORS, "17 selectors, at most 16"),
        (selectors("eu"), ANNOTATION_CLUSTER_SELECTORS, "selector 1"),
        (selectors({}), ANNOTATION_CLUSTER_SELECTORS, "exactly one criterion"),
        (selectors(EU, {"propertySelector": {}}), ANNOTATION_CLUSTER_SELECTORS,
         "selector 2: propertySelector: an empty property selector is invalid"),
        (selectors({"propertySelector": {"matchProperties": {}, "matchExpressions": []}}),
         ANNOTATION_CLUSTER_SELECTORS, "empty property selector"),
        (selectors({"propertySelector": {"matchLabels": {"region": "eu"}}}),
         ANNOTATION_CLUSTER_SELECTORS, "matchLabels"),
        (selectors({"clusterSelector": {}}), ANNOTATION_CLUSTER_SELECTORS, "clusterSelector"),
        (selectors({"propertySelector": {"matchProperties": {"Region": "eu"}}}),
         ANNOTATION_CLUSTER_SELECTORS, "'Region' is not a ClusterProperty name"),
        (selectors({"propertySelector": {"matchProperties": {"a/b": "eu"}}}),
         ANNOTATION_CLUSTER_SELECTORS, "not a ClusterProperty name"),
        (selectors({"propertySelector": {"matchProperties": {"region": ""}}}),
         ANNOTATION_CLUSTER_SELECTORS, "may not be empty"),
        (selectors({"propertySelector": {"matchProperties": {"region": "x" * 1025}}}),
         ANNOTATION_CLUSTER_SELECTORS, "at most 1024"),
        (selectors({"propertySelector": {"matchProperties": {"region": 1}}}),
         ANNOTATION_CLUSTER_SELECTORS, "matchProperties.region"),
        (selectors(expression("region", "In")), ANNOTATION_CLUSTER_SELECTORS,
         "operator In needs at least one value"),
        (selectors(expression("region", "NotIn")), ANNOTATION_CLUSTER_SELECTORS,
         "operator NotIn needs at least one value"),
        (selectors(expression("region", "Exists", "eu")), ANNOTATION_CLUSTER_SELECTORS,
         "operator Exists takes no values"),
        (selectors(expression("region", "DoesNotExist", "eu")), ANNOTATION_CLUSTER_SELECTORS,
         "operator DoesNotExist takes no values"),
        (selectors(expression("region", "Gt", "1")), ANNOTATION_CLUSTER_SELECTORS,
         "matchExpressions[0].operator"),
        (selectors(expression("-region", "Exists")), ANNOTATION_CLUSTER_SELECTORS,
         "matchExpressions[0].key"),
        ({ANNOTATION_CLUSTER_SELECTION: "nope"}, ANNOTATION_CLUSTER_SELECTION, "not valid JSON"),
        ({ANNOTATION_CLUSTER_SELECTION: "[]"}, ANNOTATION_CLUSTER_SELECTION,
         "must be a JSON object, not a list"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"minReadyEndpoints": 0}'},
         ANNOTATION_CLUSTER_SELECTION, "minReadyEndpoints"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"minReadyEndpoints": 10001}'},
         ANNOTATION_CLUSTER_SELECTION, "minReadyEndpoints"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"minReadyEndpoints": "3"}'},
         ANNOTATION_CLUSTER_SELECTION, "minReadyEndpoints"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"minReadyPercent": 101}'},
         ANNOTATION_CLUSTER_SELECTION, "minReadyPercent"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"minReadyPercent": -1}'},
         ANNOTATION_CLUSTER_SELECTION, "minReadyPercent"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"minReadyPercent": 50.5}'},
         ANNOTATION_CLUSTER_SELECTION, "minReadyPercent"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"failbackDelaySeconds": 3601}'},
         ANNOTATION_CLUSTER_SELECTION, "failbackDelaySeconds"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"failbackDelaySeconds": -1}'},
         ANNOTATION_CLUSTER_SELECTION, "failbackDelaySeconds"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"fallback": "Local"}'},
         ANNOTATION_CLUSTER_SELECTION, "fallback"),
        ({ANNOTATION_CLUSTER_SELECTION: '{"failback": 5}'},
         ANNOTATION_CLUSTER_SELECTION, "failback"),
        ({ANNOTATION_IMPORT_CLUSTERS: "{"}, ANNOTATION_IMPORT_CLUSTERS, "not valid JSON"),
        ({ANNOTATION_IMPORT_CLUSTERS: json.dumps([{"matchProperties": {"a": "b"}}])},
         ANNOTATION_IMPORT_CLUSTERS, "must be a JSON object, not a list"),
        ({ANNOTATION_IMPORT_CLUSTERS: "{}"}, ANNOTATION_IMPORT_CLUSTERS,
         "empty property selector"),
        ({ANNOTATION_IMPORT_CLUSTERS: json.dumps(EU)}, ANNOTATION_IMPORT_CLUSTERS,
         "propertySelector"),
        ({ANNOTATION_IMPORT_CLUSTERS: json.dumps(
            {"matchProperties": {"region": "@SameAsImporter@"}})}, ANNOTATION_IMPORT_CLUSTERS,
         "@SameAsImporter@ is not allowed in import-clusters"),
        ({ANNOTATION_IMPORT_CLUSTERS: json.dumps({"matchExpressions": [
            {"key": "region", "operator": "NotIn", "values": ["@SameAsImporter@"]}]})},
         ANNOTATION_IMPORT_CLUSTERS, "@SameAsImporter@ is not allowed in import-clusters"),
    ],
)
def test_each_rule_refuses_naming_the_annotation_and_the_problem(
    annotations: dict[str, str], named: str, problem: str
) -> None:
    with pytest.raises(InvalidClusterSelector) as caught:
        parse_selection_annotations(annotations)
    message = str(caught.value)
    assert message.startswith(f"{named}: "), message
    assert problem in message, message
    assert isinstance(caught.value, ValueError)


class _Record(BaseModel):
    """How the hub's record embeds the models: a 422 there must name the field."""

    cluster_selectors: ClusterSelectors | None = None
    import_clusters: ImportClustersSelector | None = None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cluster_selectors": []}, "cluster_selectors"),
        ({"cluster_selectors": [EU] * 17}, "cluster_selectors"),
        ({"cluster_selectors": [{"propertySelector": {}}]}, "cluster_selectors"),
        ({"import_clusters": {"matchProperties": {"region": "@SameAsImporter@"}}},
         "import_clusters"),
    ],
)
def test_the_models_refuse_the_same_when_embedded_naming_the_field(
    body: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        _Record.model_validate(body)
    assert caught.value.errors()[0]["loc"][0] == field


# --- matching -----------------------------------------------------------------------------------

EU_A = {"region": "eu", "zone": "a"}
US = {"region": "us", "zone": "b"}
BARE: dict[str, str] = {}


def sel(**body: Any) -> PropertySelector:
    return PropertySelector.model_validate(body)


@pytest.mark.parametrize(
    ("selector", "properties", "importer", "expected"),
    [
        pytest.param(sel(matchProperties={"region": "eu"}), EU_A, US, True, id="equal"),
        pytest.param(sel(matchProperties={"region": "eu"}), US, US, False, id="different"),
        pytest.param(sel(matchProperties={"region": "eu"}), BARE, US, False, id="absent key"),
        pytest.param(sel(matchProperties={"region": "eu", "zone": "b"}), EU_A, US, False,
                     id="terms are ANDed"),
        pytest.param(sel(matchProperties={"region": "@SameAsImporter@"}), EU_A, EU_A, True,
                     id="same as importer"),
        pytest.param(sel(matchProperties={"region": "@SameAsImporter@"}), US, EU_A, False,
                     id="not same as importer"),
        pytest.param(sel(matchProperties={"region": "@SameAsImporter@"}), EU_A, BARE, False,
                     id="importer lacks the key: matches nothing"),
        pytest.param(sel(matchExpressions=[{"key": "region", "operator": "In",
                                            "values": ["us", "eu"]}]), EU_A, US, True, id="In"),
        pytest.param(sel(matchExpressions=[{"key": "region", "operator": "In",
                                            "values": ["us"]}]), BARE, US, False,
                     id="In, absent key"),
        pytest.param(sel(matchExpressions=[{"key": "region", "operator": "In",
                                            "values": ["@SameAsImporter@", "us"]}]), US, BARE,
                     True, id="In: an unresolved token adds nothing, other values count"),
        pytest.param(sel(matchExpressions=[{"key": "region", "operator": "In",
                                            "values": ["@SameAsImporter@"]}]), EU_A, BARE,
                     False, id="In: importer lacks the key"),
        pytest.param(sel(matchExpressions=[{"key": "region", "operator": "NotIn",
                                            "values": ["eu"]}]), US, US, True, id="NotIn"),
        pytest.param(sel(matchExpressions=[{"key": "region", "operator": "NotIn",
                                            "values": ["eu"]}]), BARE, US, True,
                     id="NotIn, absent key (as Kubernetes)"),
        pytest.param(sel(matchExpressions=[{"key": "region", "operator": "NotIn",
                                            "values": ["@SameAsImporter@"]}]), US, EU_A, True,
                     id="NotIn same as importer: other regions"),
        pytest.param(sel(matchExpressions=[{"key": "region", "operator": "NotIn",
                                            "values": ["@SameAsImporter@"]}]), EU_A, EU_A,
                     False, id="NotIn same as importer: own region"),
        pytest.param(sel(matchExpressions=[{"key": "region", "operator": "NotIn",
                                            "values": ["@SameAsImporter@"]}]), US, BARE, False,
                     id="NotIn: importer lacks the key matches nothing"),
        pytest.param(sel(matchExpressions=[{"key": "zone", "operator": "Exists"}]), EU_A, BARE,
                     True, id="Exists"),
        pytest.param(sel(matchExpressions=[{"key": "gpu", "operator": "Exists"}]), EU_A, BARE,
                     False, id="Exists, absent"),
        pytest.param(sel(matchExpressions=[{"key": "gpu", "operator": "DoesNotExist"}]), EU_A,
                     BARE, True, id="DoesNotExist"),
        pytest.param(sel(matchExpressions=[{"key": "zone", "operator": "DoesNotExist"}]), EU_A,
                     BARE, False, id="DoesNotExist, present"),
        pytest.param(sel(matchProperties={"region": "eu"}, matchExpressions=[
            {"key": "zone", "operator": "In", "values": ["b"]}]), EU_A, BARE, False,
                     id="properties and expressions are ANDed"),
    ],
)
def test_matches(
    selector: PropertySelector, properties: dict[str, str], importer: dict[str, str],
    expected: bool
) -> None:
    assert matches(selector, properties, importer) is expected


def test_tiers_are_sorted_per_selector_and_unknown_properties_are_in_none() -> None:
    parsed = parse_selection_annotations(selectors(SAME, expression("region", "Exists")))
    assert parsed.cluster_selectors is not None
    clusters = {"c2": EU_A, "c1": EU_A, "c3": US, "c4": None}
    assert tiers_of(parsed.cluster_selectors, clusters, {"region": "eu"}) == (
        ("c1", "c2"), ("c1", "c2", "c3"))
