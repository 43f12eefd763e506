"""The exporting agent reads the three cluster-selection annotations of each ServiceExport
(docs/reference.md#cluster-selection): a malformed one makes the export `Valid=False` with
reason `InvalidClusterSelector` and the parser's message, and it never reaches the hub; a
well-formed one is sent in the export record, in its canonical wire form."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from member.export.exportspec import derive_export, validate
from shared import conditions as c
from shared.clusterselection import (
    ANNOTATION_CLUSTER_SELECTION,
    ANNOTATION_CLUSTER_SELECTORS,
    ANNOTATION_IMPORT_CLUSTERS,
)
from shared.models import to_wire
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentFactory,
    HubProcess,
    condition,
    service_body,
    service_export_body,
    wait_for,
)
from tests.member.test_agent_export import EXPORTED, start_agent, wait_conditions
from tests.member.test_exportspec import SINCE, service, service_export

EU = {"propertySelector": {"matchProperties": {"region": "eu"}}}


def annotated(**annotations: str) -> dict[str, Any]:
    se = service_export()
    se["metadata"]["annotations"] = annotations
    return se


@pytest.mark.parametrize(
    ("annotations", "named"),
    [
        ({ANNOTATION_CLUSTER_SELECTORS: "not json"}, ANNOTATION_CLUSTER_SELECTORS),
        ({ANNOTATION_CLUSTER_SELECTORS: "[]"}, ANNOTATION_CLUSTER_SELECTORS),
        ({ANNOTATION_CLUSTER_SELECTION: '{"minReadyPercent": 200}'}, ANNOTATION_CLUSTER_SELECTION),
        ({ANNOTATION_IMPORT_CLUSTERS: '{"matchProperties": {"r": "@SameAsImporter@"}}'},
         ANNOTATION_IMPORT_CLUSTERS),
    ],
    ids=["not-json", "empty", "percent", "importer"],
)
def test_a_malformed_annotation_is_invalid_naming_it(
    annotations: dict[str, str], named: str
) -> None:
    validity = validate(namespace="shop", name="web", service=service(), deny_namespaces=(),
                        service_export=annotated(**annotations))
    assert (validity.valid, validity.reason) == (False, c.REASON_INVALID_CLUSTER_SELECTOR)
    assert named in validity.message and "ServiceExport shop/web" in validity.message


def test_the_earlier_checks_come_first() -> None:
    se = annotated(**{ANNOTATION_CLUSTER_SELECTORS: "not json"})
    assert validate(namespace="shop", name="web", service=None, deny_namespaces=(),
                    service_export=se).reason == c.REASON_NO_SERVICE


def test_well_formed_annotations_are_sent_in_canonical_form() -> None:
    se = annotated(**{
        ANNOTATION_CLUSTER_SELECTORS: json.dumps([EU]),
        ANNOTATION_CLUSTER_SELECTION: '{"fallback": "None"}',
        ANNOTATION_IMPORT_CLUSTERS: '{"matchExpressions": [{"key": "tier", "operator": "Exists"}]}',
        "mcsync.io/unrelated": "x",
    })
    assert validate(namespace="shop", name="web", service=service(), deny_namespaces=(),
                    service_export=se).valid
    wire = to_wire(derive_export(cluster_id="member-1", service=service(), service_export=se,
                                 exported_since=SINCE).spec)
    assert wire["clusterSelectors"] == [
        {"propertySelector": {"matchExpressions": [], "matchProperties": {"region": "eu"}}}
    ]
    assert wire["clusterSelection"] == {"failbackDelaySeconds": 30, "fallback": "None",
                                        "minReadyEndpoints": 1, "minReadyPercent": 0}
    assert wire["importClusters"] == {
        "matchExpressions": [{"key": "tier", "operator": "Exists", "values": []}],
        "matchProperties": {},
    }


def test_without_annotations_nothing_is_sent() -> None:
    wire = to_wire(derive_export(cluster_id="member-1", service=service(),
                                 service_export=service_export(), exported_since=SINCE).spec)
    assert not {"clusterSelectors", "clusterSelection", "importClusters"} & set(wire)


@pytest.mark.e2e
def test_the_agent_refuses_a_malformed_selector_and_exports_a_fixed_one(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    state.create("services", "shop", service_body("web", "shop"))
    body = service_export_body("web", "shop")
    body["metadata"]["annotations"] = {ANNOTATION_CLUSTER_SELECTORS: '[{"propertySelector": {}}]'}
    state.create("serviceexports", "shop", body)
    start_agent(kube_cluster, hub_process, agent_factory)

    se = wait_conditions(
        kube_cluster, "web",
        {c.VALID: (c.FALSE, c.REASON_INVALID_CLUSTER_SELECTOR),
         c.READY: (c.FALSE, c.REASON_PENDING)},
    )
    message = condition(se, c.VALID)["message"]  # type: ignore[index]
    assert ANNOTATION_CLUSTER_SELECTORS in message and "empty property selector" in message
    assert hub_process.export("member-1", "shop", "web") is None

    fixed = copy.deepcopy(se)
    fixed["metadata"]["annotations"][ANNOTATION_CLUSTER_SELECTORS] = json.dumps([EU])
    state.update("serviceexports", "shop", fixed)
    wait_conditions(kube_cluster, "web", EXPORTED)
    record = wait_for(lambda: hub_process.export("member-1", "shop", "web"),
                      what="the export on the hub")
    assert record["spec"]["clusterSelectors"] == [
        {"propertySelector": {"matchExpressions": [], "matchProperties": {"region": "eu"}}}
    ]
