"""The protobuf bodies kubectl's typed commands send, decoded into the JSON they stand for.

The bodies are what kubectl v1.32 sent (captured on the wire): `create namespace`,
`create service clusterip`, `create deployment`.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from sandbox.emulator.protobuf import ProtobufError, decode

NAMESPACE = (b'k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12\x1c\n\x14\n\x04demo\x12\x00\x1a\x00"'
             b'\x00*\x002\x008\x00B\x00\x12\x00\x1a\x02\n\x00\x1a\x00"\x00')
SERVICE = (b'k8s\x00\n\r\n\x02v1\x12\x07Service\x12m\n#\n\x03web\x12\x00\x1a\x04demo"\x00*\x00'
           b'2\x008\x00B\x00Z\n\n\x03app\x12\x03web\x12B\n\x1b\n\x0780-8080\x12\x03TCP\x18P"'
           b'\x07\x08\x00\x10\x90?\x1a\x00(\x00\x12\n\n\x03app\x12\x03web\x1a\x00"\tClusterIP'
           b':\x00B\x00R\x00Z\x00`\x00h\x00\x1a\x02\n\x00\x1a\x00"\x00')
DEPLOYMENT = (
    b'k8s\x00\n\x15\n\x07apps/v1\x12\nDeployment\x12\xaf\x01\n#\n\x03web\x12\x00\x1a\x04demo"'
    b'\x00*\x002\x008\x00B\x00Z\n\n\x03app\x12\x03web\x12z\x08\x01\x12\x0c\n\n\n\x03app\x12'
    b'\x03web\x1a`\n\x1c\n\x00\x12\x00\x1a\x00"\x00*\x002\x008\x00B\x00Z\n\n\x03app\x12\x03'
    b'web\x12@\x12"\n\x05nginx\x12\x05nginx*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\x90'
    b'\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00'
    b'\x9a\x01\x00\xc2\x01\x00"\x02\n\x00(\x008\x00\x1a\x0c\x08\x00\x10\x00\x18\x00 \x00(\x00'
    b'8\x00\x1a\x00"\x00')


@pytest.mark.parametrize(("body", "expected"), [
    (NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}),
    (SERVICE, {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
               "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80,
                                   "targetPort": 8080}],
                        "selector": {"app": "web"}, "type": "ClusterIP"}}),
    (DEPLOYMENT, {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}},
                                        "spec": {"containers": [{"name": "nginx",
                                                                 "image": "nginx"}]}}}}),
])
def test_kubectl_bodies_decode_to_their_json(body: bytes, expected: dict[str, Any]) -> None:
    assert decode(body) == expected


@pytest.mark.parametrize(("body", "message"), [
    (b'{"kind": "Namespace"}', "does not start with the Kubernetes protobuf magic"),
    (b"k8s\x00\n\x0b\n\x02v1\x12\x05Event", "not Event (v1): send JSON instead"),
    (NAMESPACE[:30], "truncated"),
    (b"k8s\x00\x0b", "unsupported wire type 3"),
])
def test_bodies_it_cannot_read_are_refused_with_the_reason(body: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=re.escape(message)):
        decode(body)
