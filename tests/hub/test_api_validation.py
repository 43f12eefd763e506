"""Refused input (docs/reference.md#scope-and-limits): 413 for big bodies, 422 naming the field,
nothing stored changes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.hub.test_api_support import (
    ADMIN,
    Hub,
    export_body,
    export_path,
    port,
    running_hub,
)

LIMIT = 4096


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url, max_body_bytes=LIMIT) as running:
        yield running


async def _seeded(hub: Hub) -> tuple[dict[str, str], Any]:
    east = (await hub.register("east"))["east"]
    assert (await hub.put("east", east)).status_code == 201
    return east, await hub.snapshot()


def _big_body() -> dict[str, Any]:
    return export_body("east", annotations={"big": "x" * (LIMIT * 2)})


async def test_oversized_body_is_413_with_content_length(hub: Hub) -> None:
    east, before = await _seeded(hub)
    answer = await hub.client.put(export_path("east"), json=_big_body(), headers=east)
    assert answer.status_code == 413
    assert answer.json()["reason"] == "RequestEntityTooLarge"
    assert str(LIMIT) in answer.json()["message"]
    assert await hub.snapshot() == before


async def test_oversized_chunked_body_without_content_length_is_413(hub: Hub) -> None:
    east, before = await _seeded(hub)
    payload = json.dumps(_big_body()).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(payload), 1000):
            yield payload[start : start + 1000]

    answer = await hub.client.put(
        export_path("east"),
        content=chunks(),
        headers={**east, "Content-Type": "application/json"},
    )
    assert "content-length" not in {k.lower() for k in answer.request.headers}
    assert answer.status_code == 413
    assert await hub.snapshot() == before

    # A chunked body within the limit goes through.
    small = json.dumps(export_body("east", ports=[port(81, "http")])).encode()

    async def small_chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(small), 100):
            yield small[start : start + 100]

    accepted = await hub.client.put(
        export_path("east"),
        content=small_chunks(),
        headers={**east, "Content-Type": "application/json"},
    )
    assert accepted.status_code == 200, accepted.text


def _with(body: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    target: Any = body
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return body


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: _with(b, ("spec", "ports", 0, "port"), 70000), "spec.ports[0].port"),
        (
            lambda b: _with(b, ("spec", "ports"), [port(80, "a"), port(0, "b")]),
            "spec.ports[1].port",
        ),
        (lambda b: _with(b, ("spec", "type"), "LoadBalancer"), "spec.type"),
        (lambda b: _with(b, ("spec", "ports", 0, "protocol"), "HTTP"), "spec.ports[0].protocol"),
        (lambda b: _with(b, ("spec", "sessionAfinity"), "None"), "spec.sessionAfinity"),
        (
            lambda b: _with(b, ("spec", "serviceReference", "clusterId"), "west"),
            "spec.serviceReference.clusterId",
        ),
        (
            lambda b: _with(b, ("spec", "serviceReference", "exportCreationTimestamp"), "soon"),
            "spec.serviceReference.exportCreationTimestamp",
        ),
    ],
    ids=[
        "port-out-of-range",
        "second-port-zero",
        "unknown-type",
        "unknown-protocol",
        "misspelt-field",
        "cluster-mismatch",
        "bad-timestamp",
    ],
)
async def test_invalid_export_is_422_naming_the_field(hub: Hub, mutate: Any, field: str) -> None:
    east, before = await _seeded(hub)
    body = mutate(export_body("east", ports=[port(8080, "http")]))
    answer = await hub.client.put(export_path("east"), json=body, headers=east)
    assert answer.status_code == 422, answer.text
    status = answer.json()
    assert status["kind"] == "Status"
    assert status["reason"] == "Invalid"
    assert field in [c.get("field") for c in status["details"]["causes"]]
    assert field in status["message"]
    assert await hub.snapshot() == before


async def test_path_names_are_validated_and_must_agree_with_the_body(hub: Hub) -> None:
    east, before = await _seeded(hub)

    bad_namespace = await hub.client.put(
        "/api/v1/clusters/east/serviceexports/Bad_NS/web", json=export_body("east"), headers=east
    )
    assert bad_namespace.status_code == 422
    assert "namespace" in bad_namespace.json()["message"]
    assert "DNS-1123" in bad_namespace.json()["message"]

    bad_name = await hub.client.get("/api/v1/clusters/east/serviceexports/demo/9web", headers=east)
    assert bad_name.status_code == 422
    assert "DNS-1035" in bad_name.json()["message"]

    other_name = await hub.client.put(
        export_path("east", name="api"), json=export_body("east"), headers=east
    )
    assert other_name.status_code == 422
    assert other_name.json()["details"]["causes"][0]["field"] == "metadata.name"

    other_ns = await hub.client.put(
        export_path("east", namespace="prod"), json=export_body("east"), headers=east
    )
    assert other_ns.status_code == 422
    assert other_ns.json()["details"]["causes"][0]["field"] == ("spec.serviceReference.namespace")

    bad_cluster = await hub.client.get("/api/v1/clusters/East/serviceexports", headers=ADMIN)
    assert bad_cluster.status_code == 422
    assert "cluster" in bad_cluster.json()["message"]
    assert await hub.snapshot() == before


async def test_malformed_json_and_bad_queries_are_named(hub: Hub) -> None:
    east, before = await _seeded(hub)
    answer = await hub.client.put(
        export_path("east"),
        content=b'{"metadata": {"name": "web",',
        headers={**east, "Content-Type": "application/json"},
    )
    assert answer.status_code == 422
    assert "malformed JSON" in answer.json()["message"]

    not_object = await hub.client.put(export_path("east"), json=[1, 2], headers=east)
    assert not_object.status_code == 422

    patch = await hub.client.patch(
        export_path("east"),
        json={"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}},
        headers=east,
    )
    assert patch.status_code == 422
    assert "metadata.labels" in patch.json()["message"]

    for query, field in (
        ("limit=0", "limit"),
        ("conflict=maybe", "conflict"),
        ("watch=true&resourceVersion=abc", "resourceVersion"),
    ):
        bad = await hub.client.get(f"/api/v1/serviceexports?{query}", headers=ADMIN)
        assert bad.status_code == 422, query
        assert field in bad.json()["message"]

    registration = await hub.client.post(
        "/api/v1/clusters", json={"metadata": {"name": "Not A Name"}}, headers=ADMIN
    )
    assert registration.status_code == 422
    assert "metadata.name" in registration.json()["message"]
    assert await hub.snapshot() == before


async def test_unknown_path_and_method_answer_status(hub: Hub) -> None:
    missing = await hub.client.get("/api/v1/nothing", headers=ADMIN)
    assert missing.status_code == 404
    assert missing.json()["kind"] == "Status"
    wrong_method = await hub.client.post("/healthz")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["reason"] == "MethodNotAllowed"


# --- hostile bodies (issue: reliability and security under hostile input) -----------------

DEEP_OBJECT = '{"a":' * 50_000 + "1" + "}" * 50_000
JSON = {"Content-Type": "application/json"}


def _raw_export(annotation_json: bytes) -> bytes:
    """An otherwise valid export body whose one annotation value is `annotation_json`."""
    text = json.dumps(export_body("east", annotations={"a": "PLACEHOLDER"})).encode()
    return text.replace(b'"PLACEHOLDER"', annotation_json)


@pytest.mark.reliability
@pytest.mark.parametrize(
    ("content", "in_message"),
    [
        (DEEP_OBJECT.encode(), "nested too deeply"),
        (_raw_export(b"[" * 20_000 + b"]" * 20_000), "nested too deeply"),
        (_raw_export(b'"\\ud800"'), "lone UTF-16 surrogate"),  # valid JSON, invalid Unicode
        (_raw_export(b'"caf\xe9"'), "UTF-8"),  # latin-1 bytes
    ],
    ids=["deep-object", "deep-array-in-annotation", "lone-surrogate", "not-utf-8"],
)
async def test_hostile_json_is_422_malformed_and_stores_nothing(
    database_url: str, content: bytes, in_message: str
) -> None:
    async with running_hub(database_url) as hub:  # the default 1 MiB limit: deep fits in
        await _hostile_json_refused(hub, content, in_message)


async def _hostile_json_refused(hub: Hub, content: bytes, in_message: str) -> None:
    east, before = await _seeded(hub)
    for method, path in (
        ("PUT", export_path("east")),
        ("PUT", "/api/v1/clusters/east/serviceexports"),
        ("POST", "/api/v1/clusters/east/heartbeat"),
    ):
        answer = await hub.client.request(method, path, content=content, headers={**east, **JSON})
        assert answer.status_code == 422, (method, path, answer.text)
        assert "malformed JSON body" in answer.json()["message"]
        assert in_message in answer.json()["message"]
    assert await hub.snapshot() == before


@pytest.mark.reliability
@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        # An offset that pushes the instant outside years 1..9999 once in UTC (was a 500).
        (
            lambda b: _with(
                b, ("spec", "serviceReference", "exportCreationTimestamp"),
                "0001-01-01T00:00:00+14:00",
            ),
            "spec.serviceReference.exportCreationTimestamp",
        ),
        (
            lambda b: _with(
                b, ("spec", "serviceReference", "exportedSince"), "9999-12-31T23:59:59-14:00"
            ),
            "spec.serviceReference.exportedSince",
        ),
        (lambda b: _with(b, ("spec", "serviceReference", "uid"), "u" * 200_000),
         "spec.serviceReference.uid"),
        (lambda b: _with(b, ("metadata", "annotations"), {"a": "x" * 70_000}),
         "metadata.annotations"),
        (lambda b: _with(b, ("spec", "exportedLabels"), {"k" * 300: "v"}), "spec.exportedLabels"),
        (lambda b: _with(b, ("spec", "ports"), [port(80, "http"), port(81, "http")]),
         "spec.ports"),
        (lambda b: _with(b, ("spec", "ports"), [port(80, "a"), port(80, "b")]), "spec.ports"),
        (lambda b: _with(b, ("spec", "ports", 0, "port"), -1), "spec.ports[0].port"),
        (lambda b: _with(b, ("spec", "sessionAffinity"), "Sticky"), "spec.sessionAffinity"),
        (lambda b: _with(b, ("spec", "ipFamilies"), ["IPv5"]), "spec.ipFamilies[0]"),
        (lambda b: _with(b, ("spec", "internalTrafficPolicy"), "Nowhere"),
         "spec.internalTrafficPolicy"),
        (
            lambda b: _with(b, ("spec", "serviceReference", "name"), "Web_Svc"),
            "spec.serviceReference.name",
        ),
        (lambda b: _with(b, ("metadata", "name"), "x" * 300), "metadata.name"),
    ],
    ids=[
        "timestamp-before-year-1-in-utc",
        "timestamp-after-year-9999-in-utc",
        "huge-uid",
        "huge-annotation",
        "long-label-key",
        "duplicate-port-names",
        "duplicate-port-numbers",
        "negative-port",
        "unknown-session-affinity",
        "unknown-ip-family",
        "unknown-traffic-policy",
        "name-not-dns-1035",
        "name-too-long",
    ],
)
async def test_hostile_export_is_422_naming_the_field(
    database_url: str, mutate: Any, field: str
) -> None:
    async with running_hub(database_url) as hub:  # default limit: huge strings get parsed
        east, before = await _seeded(hub)
        body = mutate(export_body("east"))
        answer = await hub.client.put(export_path("east"), json=body, headers=east)
        assert answer.status_code == 422, answer.text
        fields = [c.get("field") for c in answer.json()["details"]["causes"]]
        assert any(f is not None and f.startswith(field) for f in fields), (field, fields)
        assert await hub.snapshot() == before


@pytest.mark.reliability
async def test_heartbeat_version_must_be_printable(hub: Hub) -> None:
    """PostgreSQL text cannot hold NUL: a version with one was a 500 there."""
    east, _ = await _seeded(hub)
    for version in ("0.1.0\u0000", "", "v" * 65, "0.1.0 beta"):
        answer = await hub.client.post(
            "/api/v1/clusters/east/heartbeat", json={"agentVersion": version}, headers=east
        )
        assert answer.status_code == 422, (version, answer.text)
        assert "agentVersion" in answer.json()["message"]
    ok = await hub.client.post(
        "/api/v1/clusters/east/heartbeat", json={"agentVersion": "0.2.0.dev3+g1a2b3c"},
        headers=east,
    )
    assert ok.status_code == 200, ok.text


@pytest.mark.reliability
async def test_default_body_limit_is_one_mebibyte(database_url: str) -> None:
    async with running_hub(database_url) as hub:  # no max_body_bytes override: the default
        east = (await hub.register("east"))["east"]
        before = await hub.snapshot()
        body = export_body("east", annotations={f"a{i}": "x" * 60_000 for i in range(18)})
        answer = await hub.client.put(export_path("east"), json=body, headers=east)
        assert answer.status_code == 413, answer.status_code
        assert str(1024 * 1024) in answer.json()["message"]
        assert await hub.snapshot() == before


@pytest.mark.reliability
@pytest.mark.parametrize(
    "revision", ["99999999999999999999", "9223372036854775808", "\u00b2", "1\u0663"],
    ids=["above-int64", "int64-max-plus-1", "superscript-two", "arabic-indic-digit"],
)
async def test_watch_revision_outside_int64_or_ascii_is_422(hub: Hub, revision: str) -> None:
    """Both were 500s: the revision query overflowed, or int() refused a Unicode digit."""
    from urllib.parse import quote

    await _seeded(hub)
    answer = await hub.client.get(
        f"/api/v1/clusters/east/serviceexports?watch=true&timeoutSeconds=1"
        f"&resourceVersion={quote(revision)}",
        headers=ADMIN,
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["details"]["causes"][0]["field"] == "resourceVersion"


# --- names ending in a newline -------------------------------------------


@pytest.mark.reliability
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"metadata": {"name": "evil\n"}}, "metadata.name"),
        ({"metadata": {"name": "good", "labels": {"region\n": "eu"}}}, "metadata.labels"),
        ({"metadata": {"name": "good", "annotations": {"a\n": "b"}}}, "metadata.annotations"),
    ],
    ids=["cluster-name", "cluster-label-key", "cluster-annotation-key"],
)
async def test_registration_refuses_a_trailing_newline(
    hub: Hub, body: dict[str, Any], field: str
) -> None:
    """`"evil\\n"` was a 201, and the cluster could then never be deleted (its path is a
    422); `$` in Python's `re` matches before a final newline."""
    _, before = await _seeded(hub)
    answer = await hub.client.post("/api/v1/clusters", json=body, headers=ADMIN)
    assert answer.status_code == 422, answer.text
    assert field in [c.get("field") for c in answer.json()["details"]["causes"]]
    assert await hub.snapshot() == before


@pytest.mark.reliability
@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: _with(b, ("metadata", "name"), "web\n"), "metadata.name"),
        (lambda b: _with(b, ("metadata", "namespace"), "demo\n"), "metadata.namespace"),
        (lambda b: _with(b, ("metadata", "labels"), {"app\n": "x"}), "metadata.labels"),
        (lambda b: _with(b, ("metadata", "annotations"), {"a\n": "x"}), "metadata.annotations"),
        (lambda b: _with(b, ("spec", "exportedLabels"), {"app\n": "x"}), "spec.exportedLabels"),
        (
            lambda b: _with(b, ("spec", "exportedAnnotations"), {"a\n": "x"}),
            "spec.exportedAnnotations",
        ),
        (lambda b: _with(b, ("spec", "ports", 0, "name"), "http\n"), "spec.ports[0].name"),
        (
            lambda b: _with(b, ("spec", "serviceReference", "name"), "web\n"),
            "spec.serviceReference.name",
        ),
    ],
    ids=[
        "name", "namespace", "label-key", "annotation-key", "exported-label-key",
        "exported-annotation-key", "port-name", "reference-name",
    ],
)
async def test_export_refuses_a_trailing_newline(hub: Hub, mutate: Any, field: str) -> None:
    east, before = await _seeded(hub)
    body = mutate(export_body("east"))
    answer = await hub.client.put(export_path("east"), json=body, headers=east)
    assert answer.status_code == 422, answer.text
    fields = [c.get("field") for c in answer.json()["details"]["causes"]]
    assert field in fields, (field, fields)
    patch = await hub.client.patch(
        export_path("east"),
        json={"metadata": {"resourceVersion": "1", "annotations": {"a\n": "x"}}},
        headers=east,
    )
    assert patch.status_code == 422, patch.text
    assert "metadata.annotations" in [c.get("field") for c in patch.json()["details"]["causes"]]
    assert await hub.snapshot() == before


# --- integers past Python's 4,300-digit limit ----------------------------


def _with_raw(body: dict[str, Any], marker: str, raw: str) -> bytes:
    return json.dumps(body).replace(f'"{marker}"', raw).encode()


@pytest.mark.reliability
@pytest.mark.parametrize("digits", [5000, 25, 20])
async def test_a_huge_generation_is_422_naming_the_field(database_url: str, digits: int) -> None:
    """5,000 digits was a 400 "There was an error parsing the body" (json.loads' ValueError);
    25 digits was stored although Kubernetes' generation is an int64."""
    async with running_hub(database_url) as hub:  # the default 1 MiB limit
        await _huge_generation_refused(hub, digits)


async def _huge_generation_refused(hub: Hub, digits: int) -> None:
    east, before = await _seeded(hub)
    body = export_body("east")
    body["spec"]["serviceReference"]["generation"] = "HUGE"
    content = _with_raw(body, "HUGE", "9" * digits)
    for method, path, payload in (
        ("PUT", export_path("east"), content),
        (
            "PUT",
            "/api/v1/clusters/east/serviceexports",
            b'{"items": [' + content + b"]}",
        ),
    ):
        answer = await hub.client.request(method, path, content=payload, headers={**east, **JSON})
        assert answer.status_code == 422, (path, answer.text[:300])
        fields = [c.get("field") for c in answer.json()["details"]["causes"]]
        assert any(f and f.endswith("spec.serviceReference.generation") for f in fields), fields
    heartbeat = await hub.client.post(
        "/api/v1/clusters/east/heartbeat",
        content=b'{"agentVersion": ' + b"1" * digits + b"}",
        headers={**east, **JSON},
    )
    assert heartbeat.status_code == 422, heartbeat.text[:300]
    assert heartbeat.json()["details"]["causes"][0]["field"] == "agentVersion"
    assert await hub.snapshot() == before


# --- revisions that are garbage or from the future; trailing slashes ---


@pytest.mark.reliability
@pytest.mark.parametrize(
    "revision", ["abc", "-1", "1.5", "\u00b2", " 1", "99999999999999999999"],
    ids=["letters", "negative", "decimal", "superscript", "space", "above-int64"],
)
async def test_patch_with_a_garbage_resource_version_is_422(hub: Hub, revision: str) -> None:
    """Was a 409 "resourceVersion 1, not 'abc'", as if the client merely lost a race."""
    east, before = await _seeded(hub)
    answer = await hub.client.patch(
        export_path("east"),
        json={"metadata": {"resourceVersion": revision, "annotations": {"a": "b"}}},
        headers=east,
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    assert await hub.snapshot() == before


@pytest.mark.reliability
async def test_watch_from_a_future_revision_is_504_naming_the_current_one(hub: Hub) -> None:
    """Was a 200 that then skipped every change up to the requested revision. Answered as
    the Kubernetes API answers a too-large resourceVersion: 504 Timeout, cause
    ResourceVersionTooLarge, message "Too large resource version: N, current: M",
    Retry-After."""
    east, _ = await _seeded(hub)
    current = int((await hub.client.get("/api/v1/serviceexports", headers=ADMIN)).json()[
        "metadata"]["resourceVersion"])
    for path, headers in (
        ("/api/v1/clusters/east/serviceexports", east),
        ("/api/v1/serviceexports", ADMIN),
        ("/api/v1/clusters/east/imports", east),
    ):
        for revision in (2**63 - 1, current + 1):
            answer = await hub.client.get(
                f"{path}?watch=true&timeoutSeconds=1&resourceVersion={revision}", headers=headers
            )
            assert answer.status_code == 504, answer.text
            status = answer.json()
            assert status["reason"] == "Timeout"
            assert status["message"] == (
                f"Too large resource version: {revision}, current: {current}"
            )
            assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
            assert status["details"]["causes"][0]["field"] == "resourceVersion"
            assert answer.headers["Retry-After"] == str(status["details"]["retryAfterSeconds"])
        at_current = await hub.client.get(
            f"{path}?watch=true&timeoutSeconds=1&resourceVersion={current}", headers=headers
        )
        assert at_current.status_code == 200, at_current.text


@pytest.mark.reliability
async def test_a_replica_that_has_not_heard_of_a_revision_asks_the_database(hub: Hub) -> None:
    """A watch's resourceVersion at or below what a replica has seen committed is let
    through without a read of the counter; one above it may still have been committed by
    another replica, so that one is judged against the database: a watch from another
    replica's newest revision opens, and one past it is refused naming that revision, not
    the newest one this replica has heard of. (On SQLite a second replica hears nothing
    of the first one's commits; on PostgreSQL it may have heard already.)"""
    async with running_hub(hub.settings.database_url) as other:
        heard = other.store.feed.known_revision()
        east, _ = await _seeded(hub)  # committed on `hub` after `other` started
        current = int((await hub.client.get("/api/v1/serviceexports", headers=ADMIN)).json()[
            "metadata"]["resourceVersion"])
        assert current > heard
        for path, headers in (
            ("/api/v1/clusters/east/serviceexports", east),
            ("/api/v1/serviceexports", ADMIN),
            ("/api/v1/clusters/east/imports", east),
        ):
            query = f"{path}?watch=true&timeoutSeconds=1&resourceVersion="
            ahead = await other.client.get(f"{query}{current + 1}", headers=headers)
            assert ahead.status_code == 504, ahead.text
            assert ahead.json()["message"] == (
                f"Too large resource version: {current + 1}, current: {current}"
            )
            at_newest = await other.client.get(f"{query}{current}", headers=headers)
            assert at_newest.status_code == 200, at_newest.text
            # Every revision up to the newest, on either replica, is a watch's start.
            for replica in (hub, other):
                for revision in (0, heard, current):
                    opened = await replica.client.get(f"{query}{revision}", headers=headers)
                    assert opened.status_code == 200, (revision, opened.text)


@pytest.mark.reliability
@pytest.mark.parametrize(
    "path", ["/api/v1/clusters/", "/api/v1/serviceexports/", "/healthz/", "//evil.example/"]
)
async def test_a_trailing_slash_is_a_404_that_reflects_no_host(hub: Hub, path: str) -> None:
    """Starlette's redirect_slashes answered 307 with `Location: http://<Host header>/…`."""
    answer = await hub.client.get(path, headers={**ADMIN, "Host": "evil.example"})
    assert answer.status_code == 404, (answer.status_code, answer.headers)
    assert "location" not in answer.headers
    assert answer.json()["kind"] == "Status"
    assert "evil.example" not in answer.text.replace(path, "")
