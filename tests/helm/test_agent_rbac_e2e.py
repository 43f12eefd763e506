"""The chart's RBAC allows every request the agent really makes, import side included.

The unit tests of `test_agent_chart.py` pin the rules; this one checks them against the
program. A real agent process, started with the flags the chart renders, talks to an
emulated cluster through a recording proxy while it exports a Service, imports it (the
exporter imports too), follows an endpoint change, repairs a deleted mirrored slice and
unexports. Each recorded request is then authorised as the Kubernetes API server would:
its RequestInfo (verb, API group, resource, subresource, namespace, name, with a
`metadata.name` field selector naming the object of a list or watch) against the rendered
ClusterRoles, Roles and their bindings. A verb the agent needs and the chart lacks would
be a 403 on a real cluster; here it fails the test, naming the request.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from member.imports.importspec import derived_service_name, mirrored_slice_name
from tests.helm.conftest import AGENT_CHART, NAMESPACE, Rendered, container_named, render
from tests.kube.fixtures import (  # noqa: F401
    FIXTURE_NAMESPACES,
    KubeCluster,
    kube_cluster_factory,
)
from tests.member.agent_support import (  # noqa: F401
    AgentFactory,
    HubProcess,
    agent_factory,
    hub_process,
    service_body,
    service_export_body,
    source_slice_body,
    wait_for,
)

pytestmark = pytest.mark.e2e

NS = "shop"
DERIVED = derived_service_name("web")
MIRRORED = mirrored_slice_name("web", "east", "web-abc")
BASE: dict[str, Any] = {
    "hubUrl": "https://mcsync.example.com",
    "clusterId": "east",
    "token": {"value": "unused-the-test-registers-its-own"},
    "replicaCount": 2,  # leader election: the Lease requests are checked too
}
# Flags of the chart's command line the test keeps (the agent factory sets the hub URL,
# token file, kubeconfig and metrics port of a local process).
KEPT_FLAGS = (
    "--namespace",
    "--deny-namespace",
    "--leader-elect",
    "--lease-namespace",
    "--lease-duration",
    "--no-import",
)
DISCOVERY_PREFIXES = ("/api", "/apis", "/version", "/openapi")


# -- a recording proxy -----------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]

    def __str__(self) -> str:
        query = "&".join(f"{k}={v[0]}" for k, v in sorted(self.query.items()))
        return f"{self.method} {self.path}{'?' + query if query else ''}"


class RecordingProxy:
    """HTTP/1.1 pass-through to one upstream, streaming (watches), recording each request."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.requests: list[Request] = []
        lock = threading.Lock()
        record = self.requests

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _forward(self) -> None:
                url = urlsplit(self.path)
                with lock:
                    record.append(Request(self.command, url.path, parse_qs(url.query)))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in {"host", "connection", "content-length"}
                }
                conn = http.client.HTTPConnection(
                    parts.hostname or "127.0.0.1", parts.port, timeout=600
                )
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    self.send_response(answer.status, answer.reason)
                    for key, value in answer.getheaders():
                        if key.lower() not in {"transfer-encoding", "content-length", "connection"}:
                            self.send_header(key, value)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    while chunk := answer.read1(65536):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (ConnectionError, TimeoutError):
                    self.close_connection = True
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> RecordingProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# -- the API server's authorisation, as far as the agent's requests go -------------------------


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str
    resource: str  # with "/subresource"
    namespace: str
    name: str


def request_info(request: Request) -> Attributes | None:
    """k8s.io/apiserver RequestInfo of a resource request; None for discovery paths
    (`/api`, `/apis/<group>/<version>`, ...), which every authenticated user may read."""
    parts = [p for p in request.path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        rest = []
    if not rest:
        assert request.path.startswith(DISCOVERY_PREFIXES), request
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        # namespaces/<ns>/<resource>...; namespaces/<ns>[/status|/finalize] is the Namespace.
        if len(rest) > 2 and rest[2] not in {"status", "finalize"}:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        request.method, "get"
    )
    if request.method == "GET" and not name:
        watch = request.query.get("watch", ["false"])[0] in {"true", "1"}
        verb = "watch" if watch else "list"
        selector = request.query.get("fieldSelector", [""])[0]
        if selector.startswith("metadata.name=") and "," not in selector:
            name = selector.removeprefix("metadata.name=")
    if request.method == "DELETE" and not name:
        verb = "deletecollection"
    return Attributes(verb, group, resource, namespace, name)


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    names = rule.get("resourceNames") or []
    return (
        attrs.group in rule["apiGroups"]
        and attrs.resource in rule["resources"]
        and attrs.verb in rule["verbs"]
        and (not names or attrs.name in names)
    )


def allowed(rendered: Rendered, attrs: Attributes) -> bool:
    """RBAC: a ClusterRole bound by a ClusterRoleBinding anywhere; a Role (or ClusterRole)
    bound by a RoleBinding only in the RoleBinding's namespace."""
    roles = {
        (r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"]): r
        for r in rendered.of_kind("ClusterRole") + rendered.of_kind("Role")
    }
    for binding in rendered.of_kind("ClusterRoleBinding"):
        role = roles[("ClusterRole", None, binding["roleRef"]["name"])]
        if any(rule_allows(rule, attrs) for rule in role["rules"]):
            return True
    for binding in rendered.of_kind("RoleBinding"):
        where = binding["metadata"]["namespace"]
        if attrs.namespace != where:
            continue
        ref = binding["roleRef"]
        role = roles[(ref["kind"], where if ref["kind"] == "Role" else None, ref["name"])]
        if any(rule_allows(rule, attrs) for rule in role["rules"]):
            return True
    return False


# -- the walk ----------------------------------------------------------------------------------


@pytest.fixture
def kube_namespaces() -> tuple[str, ...]:
    return (*FIXTURE_NAMESPACES, NS)


def source_slice(ip: str) -> dict[str, Any]:
    return source_slice_body(ip, NS)


def chart_flags(rendered: Rendered) -> list[str]:
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    args = [str(a) for a in container_named(pod, "agent")["args"]]
    return [a for a in args if a.split("=", 1)[0] in KEPT_FLAGS]


@pytest.fixture
def proxy_for() -> Iterator[Any]:
    proxies: list[RecordingProxy] = []

    def start(kube: KubeCluster, directory: Path) -> tuple[RecordingProxy, Path]:
        proxy = RecordingProxy(kube.url).start()
        proxies.append(proxy)
        config = yaml.safe_load(kube.kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = proxy.url
        path = directory / f"{kube.name}-via-proxy.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return proxy, path

    yield start
    for proxy in proxies:
        proxy.stop()


def mirrored_addresses(kube: KubeCluster) -> list[str] | None:
    found = kube.state.get("endpointslices", NS, MIRRORED)
    return found["endpoints"][0]["addresses"] if found else None


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="all namespaces"),
        pytest.param({"watchNamespaces": [NS]}, id="watchNamespaces"),
        pytest.param({"import": {"enabled": False}}, id="import.enabled=false"),
    ],
)
def test_every_request_of_the_agent_is_allowed_by_the_chart(
    values: dict[str, Any],
    tmp_path: Path,
    kube_cluster_factory: Any,  # noqa: F811 (the fixture imported above)
    hub_process: HubProcess,  # noqa: F811 (the fixture imported above)
    agent_factory: AgentFactory,  # noqa: F811 (the fixture imported above)
    proxy_for: Any,
) -> None:
    rendered = render(AGENT_CHART, {**BASE, **values})
    importing = values.get("import", {}).get("enabled", True)
    # With the About API: the agent reads and creates its ClusterProperty
    # (docs/reference.md#export-path).
    east = kube_cluster_factory("east", about_api=True)
    proxy, kubeconfig = proxy_for(east, tmp_path)
    east.state.create("services", NS, service_body("web", NS, ipFamilies=["IPv4"]))
    east.state.create("endpointslices", NS, source_slice("10.0.0.1"))
    agent = agent_factory(
        "east",
        kubeconfig=kubeconfig,
        hub=hub_process,
        cluster_id="east",
        token=hub_process.register("east"),
        extra=chart_flags(rendered),
    )
    assert ("--lease-namespace=" + NAMESPACE) in agent.args
    east.state.create("serviceexports", NS, service_export_body("web", NS))
    wait_for(lambda: hub_process.exports("east"), what="the export on the hub")
    if importing:
        wait_for(lambda: mirrored_addresses(east) == ["10.0.0.1"], what="the import in east")
        changed = dict(east.state.get("endpointslices", NS, "web-abc") or {})
        changed["endpoints"] = [{"addresses": ["10.0.0.2"], "conditions": {"ready": True}}]
        east.state.update("endpointslices", NS, changed)
        wait_for(lambda: mirrored_addresses(east) == ["10.0.0.2"], what="the change mirrored")
        east.state.delete("endpointslices", NS, MIRRORED)  # a user's deletion is repaired
        wait_for(lambda: mirrored_addresses(east) == ["10.0.0.2"], what="the slice repaired")
        # The source slice goes: the agent deletes its mirror itself. (When the whole import
        # goes below, the garbage collector may reach the mirror before the agent does, so
        # that step alone would not always show the agent's delete.)
        east.state.delete("endpointslices", NS, "web-abc")
        wait_for(
            lambda: mirrored_addresses(east) is None,
            what="the mirror of the deleted source slice deleted",
        )
    east.state.delete("serviceexports", NS, "web")
    wait_for(lambda: not hub_process.exports("east"), what="the export withdrawn")
    if importing:
        wait_for(
            lambda: (
                east.state.get("serviceimports", NS, "web") is None
                and east.state.get("services", NS, DERIVED) is None
            ),
            what="the import deleted",
        )
    agent.stop()

    seen = [(r, request_info(r)) for r in list(proxy.requests)]
    refused = [str(r) for r, attrs in seen if attrs is not None and not allowed(rendered, attrs)]
    assert refused == [], "requests the chart's RBAC would refuse (403)"
    done = {(a.verb, a.resource) for _, a in seen if a is not None}
    # Not vacuous: the walk made the writes the chart grants for.
    assert done & {("create", "leases"), ("update", "leases")}
    assert done & {("update", "serviceexports/status"), ("patch", "serviceexports/status")}
    import_writes = {
        (verb, resource)
        for verb in ("create", "update", "delete")
        for resource in ("serviceimports", "services", "endpointslices")
    } | {("update", "serviceimports/status"), ("watch", "namespaces")}
    if importing:
        assert import_writes - {("update", "services"), ("update", "endpointslices")} <= done
        assert ("update", "endpointslices") in done
    else:
        assert not import_writes & done
        assert not any(a.resource.startswith("serviceimports") for _, a in seen if a)
