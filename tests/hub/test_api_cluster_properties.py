"""Cluster properties (docs/reference.md#cluster-properties): a member reports its
cluster's ClusterProperty objects, the hub keeps them per cluster (`status.properties`),
refuses too many or too long ones with a 422 naming the field, writes nothing for an
unchanged report, and every member reads the fleet's as a list and a watch, in which a
change is one event and a deregistered cluster's properties are DELETED. On SQLite and
PostgreSQL."""

from __future__ import annotations

from typing import Any

from tests.hub.test_api_support import ADMIN, READER, running_hub, watch_events

PROPS = "/api/v1/clusters/{}/properties"
FLEET = "/api/v1/clusters/{}/fleetproperties"
EAST = {"region.topology.mcsync.io": "eu", "zone.topology.mcsync.io": "eu-1"}


async def test_reported_properties_are_stored_listed_and_watched(database_url: str) -> None:
    async with running_hub(database_url) as hub:
        members = await hub.register("east", "west")
        cluster = (await hub.client.get("/api/v1/clusters/east", headers=READER)).json()
        assert "properties" not in cluster["status"]  # never reported

        listed = (await hub.client.get(FLEET.format("west"), headers=members["west"])).json()
        assert listed["items"] == []
        start = listed["metadata"]["resourceVersion"]

        answer = await hub.client.put(
            PROPS.format("east"), json={"properties": EAST}, headers=members["east"]
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"]["properties"] == EAST
        got = (await hub.client.get("/api/v1/clusters/east", headers=READER)).json()
        assert got["status"]["properties"] == EAST
        clusters = (await hub.client.get("/api/v1/clusters", headers=READER)).json()
        assert [c["status"].get("properties") for c in clusters["items"]] == [EAST, None]

        # The same report again writes nothing: no second event.
        again = await hub.client.put(
            PROPS.format("east"), json={"properties": EAST}, headers=members["east"]
        )
        assert again.status_code == 200
        moved = {**EAST, "zone.topology.mcsync.io": "eu-2"}
        await hub.client.put(PROPS.format("east"), json={"properties": moved},
                             headers=members["east"])
        await hub.client.put(PROPS.format("west"), json={"properties": {}},
                             headers=members["west"])
        assert (await hub.client.delete("/api/v1/clusters/east", headers=ADMIN)).status_code == 200

        watched = await hub.client.get(
            FLEET.format("west") + f"?watch=true&resourceVersion={start}&timeoutSeconds=1",
            headers=members["west"],
        )
        events = [
            (e["type"], e["object"]["metadata"]["name"], e["object"]["spec"]["properties"])
            for e in watch_events(watched.text)
            if e["type"] != "BOOKMARK"
        ]
        assert events == [
            ("ADDED", "east", EAST),
            ("MODIFIED", "east", moved),
            ("ADDED", "west", {}),
            ("DELETED", "east", moved),
        ]
        listed = (await hub.client.get(FLEET.format("west"), headers=READER)).json()
        assert [(i["metadata"]["name"], i["spec"]["properties"]) for i in listed["items"]] == [
            ("west", {})
        ]


async def test_bad_reports_are_refused_naming_the_field(database_url: str) -> None:
    async with running_hub(database_url) as hub:
        members = await hub.register("east", "west")

        async def put(properties: Any, cluster: str = "east") -> Any:
            return await hub.client.put(
                PROPS.format(cluster), json={"properties": properties}, headers=members["east"]
            )

        too_many = {f"p{i}.example.com": "x" for i in range(65)}
        for bad, words in (
            (too_many, "65 ClusterProperty objects, at most 64"),
            ({"zone.example.com": "x" * 1025}, "1025 characters long, at most 1024"),
            ({"Not_A_Name": "x"}, "not a DNS-1123 subdomain"),
            ({"zone.example.com": ""}, "empty"),
        ):
            answer = await put(bad)
            assert answer.status_code == 422, answer.text
            body = answer.json()
            assert "properties" in body["message"] and words in body["message"], body
        assert (await put({"a.example.com": "b"}, cluster="west")).status_code == 403
        # Nothing refused was stored.
        got = (await hub.client.get("/api/v1/clusters/east", headers=READER)).json()
        assert "properties" not in got["status"]
        exactly = {f"p{i}.example.com": "v" * 1024 for i in range(64)}
        assert (await put(exactly)).status_code == 200
