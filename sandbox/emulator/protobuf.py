"""Decode the Kubernetes protobuf request bodies kubectl's typed commands send, into JSON.

`kubectl create namespace` (and `create service`, `create deployment`) go through
client-go's typed clients, which send `Content-Type: application/vnd.kubernetes.protobuf`
and never fall back to JSON on a 415. The emulator speaks JSON only, so it reads such a
body here: the `k8s\\x00` envelope (a `runtime.Unknown` holding apiVersion, kind and the raw
message) and then the message, field by field, against a small schema of the kinds those
commands create. Field numbers come from `k8s.io/api/*/generated.proto`.

Only what those commands set is decoded; an unknown field is skipped, as protobuf readers
do. Gogo-generated messages write every non-pointer field, empty ones included, so empty
strings, zero numbers, false and empty messages are dropped here: that is what the same
object's JSON (with `omitempty`) would hold. Answers stay JSON: client-go decodes an answer
by its Content-Type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """The body is not a Kubernetes protobuf message the emulator can read."""


@dataclass(frozen=True)
class Field:
    """One message field: its JSON name and what it holds.

    `kind` is "string", "int", "bool", "map" (map<string, string>), "intorstr" or "message"
    (then `schema` is the message's fields); `repeated` makes it a list.
    """

    name: str
    kind: str
    repeated: bool = False
    schema: Mapping[int, Field] | None = None


Schema = Mapping[int, Field]

TYPE_META: Schema = {1: Field("apiVersion", "string"), 2: Field("kind", "string")}
UNKNOWN: Schema = {1: Field("typeMeta", "message", schema=TYPE_META),
                   2: Field("raw", "bytes"),
                   3: Field("contentEncoding", "string"),
                   4: Field("contentType", "string")}
OBJECT_META: Schema = {
    1: Field("name", "string"), 2: Field("generateName", "string"),
    3: Field("namespace", "string"), 5: Field("uid", "string"),
    6: Field("resourceVersion", "string"), 11: Field("labels", "map"),
    12: Field("annotations", "map"), 14: Field("finalizers", "string", repeated=True),
}
LABEL_SELECTOR: Schema = {1: Field("matchLabels", "map")}
NAMESPACE: Schema = {
    1: Field("metadata", "message", schema=OBJECT_META),
    2: Field("spec", "message", schema={1: Field("finalizers", "string", repeated=True)}),
}
SERVICE_PORT: Schema = {
    1: Field("name", "string"), 2: Field("protocol", "string"), 3: Field("port", "int"),
    4: Field("targetPort", "intorstr"), 5: Field("nodePort", "int"),
    6: Field("appProtocol", "string"),
}
SERVICE: Schema = {
    1: Field("metadata", "message", schema=OBJECT_META),
    2: Field("spec", "message", schema={
        1: Field("ports", "message", repeated=True, schema=SERVICE_PORT),
        2: Field("selector", "map"), 3: Field("clusterIP", "string"),
        4: Field("type", "string"), 5: Field("externalIPs", "string", repeated=True),
        7: Field("sessionAffinity", "string"), 10: Field("externalName", "string"),
        17: Field("ipFamilyPolicy", "string"), 18: Field("clusterIPs", "string", repeated=True),
        19: Field("ipFamilies", "string", repeated=True),
    }),
}
CONTAINER: Schema = {
    1: Field("name", "string"), 2: Field("image", "string"),
    3: Field("command", "string", repeated=True), 4: Field("args", "string", repeated=True),
    6: Field("ports", "message", repeated=True, schema={
        1: Field("name", "string"), 3: Field("containerPort", "int"),
        4: Field("protocol", "string")}),
}
DEPLOYMENT: Schema = {
    1: Field("metadata", "message", schema=OBJECT_META),
    2: Field("spec", "message", schema={
        1: Field("replicas", "int"),
        2: Field("selector", "message", schema=LABEL_SELECTOR),
        3: Field("template", "message", schema={
            1: Field("metadata", "message", schema=OBJECT_META),
            2: Field("spec", "message", schema={
                2: Field("containers", "message", repeated=True, schema=CONTAINER)}),
        }),
    }),
}
# (apiVersion, kind) -> schema of the kinds kubectl's typed `create` commands send.
KINDS: dict[tuple[str, str], Schema] = {
    ("v1", "Namespace"): NAMESPACE,
    ("v1", "Service"): SERVICE,
    ("apps/v1", "Deployment"): DEPLOYMENT,
}
_MAP_ENTRY: Schema = {1: Field("key", "string"), 2: Field("value", "string")}
_INT_OR_STRING: Schema = {1: Field("type", "int"), 2: Field("intVal", "int"),
                          3: Field("strVal", "string")}


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a `k8s\\x00`-enveloped protobuf object of a kind in `KINDS`."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf magic")
    envelope = _message(body[len(MAGIC):], UNKNOWN)
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    schema = KINDS.get((api_version, kind))
    if schema is None:
        raise ProtobufError(f"the emulator reads protobuf bodies of {_kinds()} only, "
                            f"not {kind or '?'} ({api_version or '?'}): send JSON instead")
    obj = _message(envelope.get("raw", b""), schema)
    return {"apiVersion": api_version, "kind": kind, **obj}


def _kinds() -> str:
    return ", ".join(kind for _, kind in KINDS)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs in order: an int for varints, bytes for the rest."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("truncated length-delimited field")
            out.append((number, data[pos:pos + length]))
            pos += length
        elif wire in (1, 5):  # fixed64 / fixed32: none in the schemas, skipped
            pos += 8 if wire == 1 else 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def _message(data: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, raw in _fields(data):
        spec = schema.get(number)
        if spec is None:
            continue
        value = _value(spec, raw)
        if spec.kind == "map":
            if value[0]:
                out.setdefault(spec.name, {})[value[0]] = value[1]
        elif spec.repeated:
            out.setdefault(spec.name, []).append(value)
        elif value not in ("", 0, False, {}, b""):  # what omitempty leaves out
            out[spec.name] = value
    return out


def _value(spec: Field, raw: int | bytes) -> Any:
    if spec.kind in ("int", "bool"):
        if not isinstance(raw, int):
            raise ProtobufError(f"{spec.name}: expected a varint")
        if spec.kind == "bool":
            return bool(raw)
        return raw - (1 << 64) if raw >= 1 << 63 else raw  # two's complement int32/int64
    if not isinstance(raw, bytes):
        raise ProtobufError(f"{spec.name}: expected a length-delimited field")
    if spec.kind == "bytes":
        return raw
    if spec.kind == "string":
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise ProtobufError(f"{spec.name}: not UTF-8") from exc
    if spec.kind == "map":
        entry = _message(raw, _MAP_ENTRY)
        return entry.get("key", ""), entry.get("value", "")
    if spec.kind == "intorstr":
        parts = _message(raw, _INT_OR_STRING)
        return parts.get("strVal", "") if parts.get("type") == 1 else parts.get("intVal", 0)
    assert spec.schema is not None, spec
    return _message(raw, spec.schema)
