"""The CLI's commands in-process against a fake hub (tests/cli/fakehub.py): what an
operator sees, what reaches the hub, which files are written, and the exit codes."""

from __future__ import annotations

import io
import json
import stat
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from cli.__main__ import main
from shared.models import EndpointSliceExportList, MemberCluster, to_wire
from tests.cli.fakehub import FakeHub
from tests.cli.samples import cluster, endpoint_slice

HUB = "http://hub.test:8080"


@dataclass
class Result:
    code: int
    out: str
    err: str


class Terminal(io.StringIO):
    """A stdin that says it is a terminal, with the operator's answer already typed."""

    def isatty(self) -> bool:
        return True


def mcsync(
    hub: FakeHub, *argv: str, env: dict[str, str] | None = None, stdin: io.StringIO | None = None
) -> Result:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        list(argv),
        environ={"MCSYNC_HUB_URL": HUB, "MCSYNC_TOKEN": "admin-secret", **(env or {})},
        transport=hub.transport(), stdin=stdin or io.StringIO(""), out=out, err=err,
    )
    return Result(code, out.getvalue(), err.getvalue())


def rows(text: str) -> list[dict[str, str]]:
    lines = text.splitlines()
    headers = lines[0].split()
    return [dict(zip(headers, line.split(), strict=True)) for line in lines[1:]]


# --- endpoints --------------------------------------------------------------------------


@pytest.fixture
def fleet_slices() -> FakeHub:
    return FakeHub(slices=[
        endpoint_slice(cluster="east", addresses=["10.0.0.1", "10.0.0.2", "10.0.0.3"],
                       not_ready=1, ports=[(8080, "TCP"), (53, "UDP")]),
        endpoint_slice(cluster="west", name="web-xyz89", address_type="IPv6",
                       addresses=["fd00::1"]),
        endpoint_slice(cluster="east", service="api", addresses=[], ports=[(None, "TCP")]),
        endpoint_slice(cluster="east", namespace="shop", service="web"),
    ])


def test_endpoints_table(fleet_slices: FakeHub) -> None:
    result = mcsync(fleet_slices, "endpoints")
    assert result.code == 0, result.err
    table = rows(result.out)
    assert list(table[0]) == ["NAMESPACE", "SERVICE", "CLUSTER", "SLICE", "ADDRESSTYPE",
                              "ENDPOINTS", "PORTS", "AGE"]
    by_slice = {(r["CLUSTER"], r["NAMESPACE"], r["SLICE"]): r for r in table}
    east = by_slice[("east", "demo", "web-abc12")]
    assert (east["SERVICE"], east["ADDRESSTYPE"], east["ENDPOINTS"], east["PORTS"]) == (
        "web", "IPv4", "2/3", "8080/TCP,53/UDP"
    )
    assert by_slice[("west", "demo", "web-xyz89")]["ADDRESSTYPE"] == "IPv6"
    assert by_slice[("east", "demo", "api-abc12")]["ENDPOINTS"] == "0/0"
    assert by_slice[("east", "demo", "api-abc12")]["PORTS"] == "<unset>/TCP"


def test_endpoints_filters_reach_the_hub_and_paging_is_followed(fleet_slices: FakeHub) -> None:
    result = mcsync(fleet_slices, "endpoints", "demo/web", "--cluster", "east",
                    "--page-size", "1", "-o", "json")
    assert result.code == 0, result.err
    listing = EndpointSliceExportList.model_validate_json(result.out)
    assert [(s.spec.cluster_id, s.metadata.name) for s in listing.items] == [
        ("east", "web-abc12")
    ]
    query = fleet_slices.requests[0].url.params
    assert (query["namespace"], query["name"], query["cluster"], query["limit"]) == (
        "demo", "web", "east", "1"
    )
    every = mcsync(fleet_slices, "endpoints", "--page-size", "1", "-o", "yaml")
    assert len(EndpointSliceExportList.model_validate(yaml.safe_load(every.out)).items) == 4
    assert "continue" in str(fleet_slices.requests[-1].url)


def test_endpoints_name_and_jsonpath_and_no_headers(fleet_slices: FakeHub) -> None:
    names = mcsync(fleet_slices, "endpoints", "-n", "shop", "-o", "name")
    assert names.out == "endpointslice/east/shop/web-abc12\n"
    path = mcsync(fleet_slices, "endpoints", "web", "-o",
                  "jsonpath={range .items[*]}{.spec.clusterId} {.metadata.name}{\"\\n\"}{end}")
    assert path.out.splitlines() == ["east web-abc12", "west web-xyz89", "east web-abc12"]
    bare = mcsync(fleet_slices, "endpoints", "--no-headers", "-n", "shop")
    assert bare.out.split()[:4] == ["shop", "web", "east", "web-abc12"]
    missing = mcsync(fleet_slices, "endpoints", "-o", "jsonpath={.items[0].nope}")
    assert missing.code == 1 and "'nope' is not found" in missing.err


def test_endpoints_empty_and_watch_without_an_import_feed(fleet_slices: FakeHub) -> None:
    empty = mcsync(fleet_slices, "endpoints", "-n", "nowhere")
    assert (empty.code, empty.out, empty.err) == (0, "", "No resources found.\n")
    # no cluster registered: no import feed to follow
    watched = mcsync(fleet_slices, "endpoints", "-n", "shop", "--watch")
    assert watched.code == 1
    assert "web-abc12" in watched.out  # the list is printed first
    assert watched.err.startswith("error: endpoints --watch is not supported: ")
    assert "no cluster is registered" in watched.err and watched.err.count("\n") == 1
    # a hub whose import route answers a plain list has no such feed
    fleet_slices.clusters["east"] = cluster("east")
    old_hub = mcsync(fleet_slices, "endpoints", "-n", "shop", "--watch", "-o", "json")
    assert old_hub.code == 1
    assert json.loads(old_hub.out.splitlines()[0])["type"] == "ADDED"
    assert "does not offer a watch of /api/v1/clusters/east/imports" in old_hub.err
    from_env = mcsync(fleet_slices, "endpoints", "-n", "shop", env={"MCSYNC_WATCH": "true"})
    assert from_env.code == 0 and "web-abc12" in from_env.out
    assert from_env.err.startswith("warning: MCSYNC_WATCH ignored: endpoints cannot watch")


def test_endpoints_watch_follows_the_import_feed() -> None:
    """A feed event names a slice; the watch shows it as its source sent it (re-read, not
    the feed's copy with its ports cut), and leaves out what the filters exclude and the
    ServiceImport events."""
    kept = endpoint_slice(cluster="east", name="web-abc12", addresses=["10.0.0.1"])
    hub = FakeHub(clusters={"east": cluster("east")}, slices=[kept])
    grown = endpoint_slice(cluster="east", name="web-abc12",
                           addresses=["10.0.0.1", "10.0.0.2"])
    grown.metadata.resource_version = "12"
    added = endpoint_slice(cluster="west", name="web-new01", addresses=["10.9.0.1"])
    other = endpoint_slice(cluster="west", service="api", name="api-zzz99")
    cut = to_wire(grown)
    cut["spec"]["ports"] = []  # the feed's copy: ports cut to the import's
    hub.import_lines = [
        {"type": "MODIFIED", "object": cut},
        {"type": "ADDED", "object": to_wire(added)},
        {"type": "ADDED", "object": to_wire(other)},  # another Service: not shown
        {"type": "ADDED", "object": {"kind": "ServiceImport", "apiVersion":
         "mcsync.io/v1alpha1", "metadata": {"name": "web", "namespace": "demo"},
         "spec": {"ports": []}}},
        {"type": "DELETED", "object": to_wire(kept)},
    ]
    original = hub.handle

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("watch") == "true":
            hub.slices = [grown, added, other]  # what the hub stores once the changes are in
        return original(request)

    hub.handle = handle  # type: ignore[method-assign]
    result = mcsync(hub, "endpoints", "demo/web", "--watch")
    assert result.code == 0, result.err
    lines = [line.split() for line in result.out.splitlines()]
    assert lines[0][:4] == ["EVENT", "NAMESPACE", "SERVICE", "CLUSTER"]
    assert [(row[0], row[3], row[4], row[6], row[7]) for row in lines[1:]] == [
        ("ADDED", "east", "web-abc12", "1/1", "8080/TCP"),
        ("MODIFIED", "east", "web-abc12", "2/2", "8080/TCP"),  # as stored, ports kept
        ("ADDED", "west", "web-new01", "1/1", "8080/TCP"),
        ("DELETED", "east", "web-abc12", "2/2", "8080/TCP"),
    ]
    watch = next(r for r in hub.requests if r.url.params.get("watch") == "true")
    assert watch.url.path == "/api/v1/clusters/east/imports"
    assert watch.url.params["resourceVersion"] == "42"


# --- clusters register / deregister ---------------------------------------------------


def test_register_writes_the_token_0600_and_never_prints_it(tmp_path: Path) -> None:
    hub = FakeHub()
    target = tmp_path / "east.token"
    result = mcsync(hub, "clusters", "register", "east", "--label", "env=prod",
                    "--token-file", str(target))
    assert result.code == 0, result.err
    (token,) = hub.issued_tokens
    assert target.read_text() == token + "\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert token not in result.out + result.err
    assert result.out == f"cluster/east registered; its token is in {target} (mode 0600)\n"
    assert hub.clusters["east"].metadata.labels == {"env": "prod"}
    post = hub.requests[-1]
    assert post.headers["Authorization"] == "Bearer admin-secret"
    assert json.loads(post.content) == {"metadata": {"name": "east", "labels": {"env": "prod"}}}
    assert [p.name for p in tmp_path.iterdir()] == ["east.token"]  # no temporary file left

    named = mcsync(hub, "clusters", "register", "north", "--token-file",
                   str(tmp_path / "north.token"), "-o", "name")
    assert (named.code, named.out) == (0, "cluster/north\n")
    as_json = mcsync(hub, "clusters", "register", "west", "--token-file",
                     str(tmp_path / "west.token"), "-o", "json")
    assert MemberCluster.model_validate_json(as_json.out).metadata.name == "west"
    assert "token" not in json.loads(as_json.out)


def test_register_twice_says_so_and_leaves_the_token_file_alone(tmp_path: Path) -> None:
    """A 409 prints no KeyError and leaves the working token as it was."""
    hub = FakeHub()
    target = tmp_path / "east.token"
    assert mcsync(hub, "clusters", "register", "east", "--token-file", str(target)).code == 0
    working = target.read_text()
    again = mcsync(hub, "clusters", "register", "east", "--token-file", str(target),
                   "--overwrite")
    assert again.code == 1
    assert again.err.startswith("error: cluster east is already registered")
    assert again.err.count("\n") == 1 and "Traceback" not in again.err
    assert target.read_text() == working
    assert sorted(p.name for p in tmp_path.iterdir()) == ["east.token"]


def test_register_never_overwrites_an_existing_file_unless_asked(tmp_path: Path) -> None:
    hub = FakeHub()
    target = tmp_path / "east.token"
    target.write_text("precious\n")
    refused = mcsync(hub, "clusters", "register", "east", "--token-file", str(target))
    assert refused.code == 1 and "--overwrite" in refused.err
    assert target.read_text() == "precious\n"
    assert hub.clusters == {} and hub.requests == []  # refused before asking the hub
    replaced = mcsync(hub, "clusters", "register", "east", "--token-file", str(target),
                      "--overwrite")
    assert replaced.code == 0, replaced.err
    assert target.read_text() == hub.issued_tokens[0] + "\n"


def test_register_into_a_missing_directory_fails_before_registering(tmp_path: Path) -> None:
    hub = FakeHub()
    result = mcsync(hub, "clusters", "register", "east",
                    "--token-file", str(tmp_path / "no" / "such" / "east.token"))
    assert result.code == 1 and "--token-file: cannot write in" in result.err
    assert hub.clusters == {}


def test_deregister_asks_unless_yes() -> None:
    hub = FakeHub(clusters={"east": cluster("east", exports=3)})
    no_tty = mcsync(hub, "clusters", "deregister", "east")
    assert no_tty.code == 2
    assert "stdin is not a terminal; pass --yes" in no_tty.err and no_tty.err.count("\n") == 1
    assert "east" in hub.clusters
    declined = mcsync(hub, "clusters", "deregister", "east", stdin=Terminal("n\n"))
    assert declined.code == 1 and "withdraws its 3 exports" in declined.err
    assert "east" in hub.clusters
    accepted = mcsync(hub, "clusters", "deregister", "east", stdin=Terminal("y\n"))
    assert accepted.code == 0 and accepted.out == (
        "cluster/east deregistered; 3 exports withdrawn\n"
    )
    assert hub.clusters == {}
    hub.clusters["west"] = cluster("west")
    assert mcsync(hub, "clusters", "deregister", "west", "--yes").code == 0
    assert hub.clusters == {}
    gone = mcsync(hub, "clusters", "deregister", "west", "--yes")
    assert gone.code == 1 and gone.err == "error: cluster 'west' is not registered\n"


# --- clusters -l, version, -v -----------------------------------------------------------


def test_clusters_label_selector() -> None:
    hub = FakeHub(clusters={
        "east": cluster("east", labels={"env": "prod", "region": "eu"}),
        "west": cluster("west", labels={"env": "prod", "region": "us"}),
        "lab": cluster("lab", labels={"env": "dev"}),
    })
    picked = mcsync(hub, "clusters", "-l", "env=prod,region notin (us)", "-o", "name")
    assert picked.out == "cluster/east\n"
    assert rows(mcsync(hub, "clusters", "-l", "env!=prod").out)[0]["NAME"] == "lab"


def test_version_shows_client_and_hub() -> None:
    result = mcsync(FakeHub(), "version")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].startswith("Client Version: ") and "Hub Version: 9.8.7" in lines
    as_json = json.loads(mcsync(FakeHub(), "version", "-o", "json").out)
    assert as_json["server"]["hubVersion"] == "9.8.7" and as_json["clientVersion"]
    client_only = FakeHub()
    assert mcsync(client_only, "version", "--client").out.startswith("Client Version:")
    assert client_only.requests == []


def test_verbose_traces_requests_without_the_token(fleet_slices: FakeHub) -> None:
    result = mcsync(fleet_slices, "-v", "endpoints", "--page-size", "2")
    assert result.code == 0
    traces = [line for line in result.err.splitlines() if line.startswith("GET ")]
    assert len(traces) == 2  # two pages
    assert traces[0].startswith(f"GET {HUB}/api/v1/endpointslices?limit=2 200 OK in ")
    assert traces[0].endswith(" ms")
    assert "admin-secret" not in result.err


def test_describe_cluster() -> None:
    hub = FakeHub(clusters={"east": cluster("east", exports=2, labels={"env": "prod"})})
    page = mcsync(hub, "describe", "cluster", "east")
    assert page.code == 0, page.err
    fields = dict(line.split(":", 1) for line in page.out.splitlines())
    assert fields["Name"].strip() == "east" and fields["Exports"].strip() == "2"
    assert fields["Labels"].strip() == "env=prod" and fields["Age"].strip() != "<none>"
    as_json = mcsync(hub, "get", "cluster", "east", "-o", "json")
    assert MemberCluster.model_validate_json(as_json.out).metadata.name == "east"
    listed = mcsync(hub, "get", "clusters", "-o", "name")
    assert listed.out == "cluster/east\n"
    assert mcsync(hub, "get", "cluster", "east", "-o", "name").out == "cluster/east\n"
    missing = mcsync(hub, "describe", "cluster", "nope")
    assert missing.code == 1 and missing.err == "error: cluster 'nope' is not registered\n"


def test_clusters_watch_lists_once_per_burst_and_at_bookmarks() -> None:
    """Clusters have no feed: the watch re-lists them when exports change (a burst costs
    one listing) and at each BOOKMARK (heartbeats, Ready/Stale); only real changes print."""
    from tests.cli.samples import export

    hub = FakeHub(clusters={"east": cluster("east", exports=1)})
    events: list[dict[str, object]] = [
        {"type": "ADDED", "object": to_wire(export(cluster="east", name=f"s{i}",
                                                   resource_version=str(50 + i)))}
        for i in range(5)
    ]
    events.append({"type": "BOOKMARK", "object": {"kind": "Bookmark", "apiVersion":
                   "mcsync.io/v1alpha1", "metadata": {"resourceVersion": "60"}}})
    hub.watch_lines = events

    original = hub.handle

    def handle(request: httpx.Request) -> httpx.Response:
        # the counts move once the burst has landed
        if request.url.path == "/api/v1/clusters" and any(
            r.url.path == "/api/v1/clusters" for r in hub.requests
        ):
            hub.clusters["east"] = cluster("east", exports=6)
        return original(request)

    hub.handle = handle  # type: ignore[method-assign]
    result = mcsync(hub, "clusters", "--watch", "-o", "json")
    assert result.code == 0, result.err
    listings = [r for r in hub.requests if r.url.path == "/api/v1/clusters"]
    assert len(listings) == 3  # the list, the burst's first event, the BOOKMARK
    lines = [json.loads(line) for line in result.out.splitlines()]
    assert [(e["type"], e["object"]["status"]["exportCount"]) for e in lines] == [
        ("ADDED", 1), ("MODIFIED", 6),
    ]
    watch = next(r for r in hub.requests if r.url.params.get("watch") == "true")
    assert watch.url.params["resourceVersion"] == "42"  # from where the list was taken


def test_describe_cluster_shows_its_properties() -> None:
    """docs/reference.md#cluster-properties: one `name=value` a line, by name; a value
    with a control character is shown quoted, never sent to the terminal as it is."""
    from datetime import UTC, datetime

    from cli import render

    now = datetime(2026, 11, 28, tzinfo=UTC)
    item = cluster("east")
    assert "Properties:" in render.describe_cluster(item, now=now)
    assert "<not reported yet>" in render.describe_cluster(item, now=now)
    item.status.properties = {
        "zone.topology.mcsync.io": "eu-1",
        "region.topology.mcsync.io": "eu",
        "note.example.com": "a\x1b[2Jb",
    }
    page = render.describe_cluster(item, now=now)
    block = page[page.index("Properties:"):].splitlines()
    assert block == [
        "Properties:",
        '  note.example.com="a\\u001b[2Jb"',
        "  region.topology.mcsync.io=eu",
        "  zone.topology.mcsync.io=eu-1",
    ]
