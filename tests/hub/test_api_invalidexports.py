"""`GET /api/v1/invalidexports` (docs/reference.md#cli, `mcsync exports --invalid`): the
`Valid=False` ServiceExports each agent reports in its heartbeat, kept beside its cluster, replaced
by each beat that carries a list, left as they are by a beat that carries none, gone with the
cluster; never an export, so never in conflicts or imports. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hub.test_api_support import ADMIN, READER, running_hub

HEARTBEAT = "/api/v1/clusters/{}/heartbeat"
INVALID = "/api/v1/invalidexports"


def report(*items: tuple[str, str, str], total: int | None = None) -> dict[str, Any]:
    return {
        "items": [
            {"namespace": ns, "name": name, "reason": reason, "message": f"{name}: {reason}"}
            for ns, name, reason in items
        ],
        "total": len(items) if total is None else total,
    }


def rows(answer: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(i["cluster"], i["namespace"], i["name"], i["reason"]) for i in answer["items"]]


async def test_reports_are_kept_replaced_and_filtered(database_url: str) -> None:
    async with running_hub(database_url) as hub:
        members = await hub.register("east", "west")

        async def beat(cluster: str, invalid: dict[str, Any] | None) -> None:
            body: dict[str, Any] = {"agentVersion": "0.1.0"}
            if invalid is not None:
                body["invalidExports"] = invalid
            answer = await hub.client.post(
                HEARTBEAT.format(cluster), json=body, headers=members[cluster]
            )
            assert answer.status_code == 200, answer.text

        async def listed(query: str = "") -> dict[str, Any]:
            answer = await hub.client.get(INVALID + query, headers=READER)
            assert answer.status_code == 200, answer.text
            body: dict[str, Any] = answer.json()
            return body

        assert rows(await listed()) == []
        await beat(
            "east", report(("shop", "cart", "NoService"), ("web", "www", "InvalidServiceType"))
        )
        await beat("west", report(("shop", "pay", "NamespaceNotAllowed")))
        assert rows(await listed()) == [
            ("east", "shop", "cart", "NoService"),
            ("east", "web", "www", "InvalidServiceType"),
            ("west", "shop", "pay", "NamespaceNotAllowed"),
        ]
        assert (await listed())["items"][0]["message"] == "cart: NoService"
        assert rows(await listed("?namespace=shop")) == [
            ("east", "shop", "cart", "NoService"),
            ("west", "shop", "pay", "NamespaceNotAllowed"),
        ]
        assert rows(await listed("?cluster=west")) == [
            ("west", "shop", "pay", "NamespaceNotAllowed")
        ]

        # A beat without a list changes nothing; one with a list replaces the cluster's.
        await beat("east", None)
        assert len((await listed("?cluster=east"))["items"]) == 2
        await beat("east", report(("web", "www", "InvalidServiceType")))
        assert rows(await listed("?cluster=east")) == [("east", "web", "www", "InvalidServiceType")]
        await beat("east", report())
        assert rows(await listed("?cluster=east")) == []

        # More than an agent lists: the answer says how many the cluster has.
        await beat("east", report(("web", "www", "NoService"), total=1500))
        assert (await listed())["truncated"] == {"east": 1500}

        # Never an export: no conflict, no import, nothing in the export lists.
        exports = await hub.client.get("/api/v1/serviceexports", headers=READER)
        assert exports.json()["items"] == []
        imports = await hub.client.get("/api/v1/serviceimports", headers=READER)
        assert imports.json()["items"] == []

        # Deregistered: its reports go with it.
        gone = await hub.client.delete("/api/v1/clusters/west", headers=ADMIN)
        assert gone.status_code == 200, gone.text
        assert [r[0] for r in rows(await listed())] == ["east"]


async def test_who_may_read_and_what_a_beat_may_carry(database_url: str) -> None:
    async with running_hub(database_url) as hub:
        members = await hub.register("east")
        assert (await hub.client.get(INVALID, headers=ADMIN)).status_code == 200
        assert (await hub.client.get(INVALID, headers=members["east"])).status_code == 403
        assert (await hub.client.get(INVALID)).status_code == 401
        before = await hub.client.get(INVALID, headers=READER)
        for bad, field in [
            (report(("shop", "cart", "no service")), "reason"),
            (report(("Shop", "cart", "NoService")), "namespace"),
            (report(("shop", "cart", "NoService"), total=0), "total"),
            ({"items": [], "total": "3"}, "total"),
        ]:
            answer = await hub.client.post(
                HEARTBEAT.format("east"),
                json={"agentVersion": "0.1.0", "invalidExports": bad},
                headers=members["east"],
            )
            assert answer.status_code == 422, (bad, answer.text)
            assert field in answer.text, (field, answer.text)
        assert (await hub.client.get(INVALID, headers=READER)).json() == before.json()


@pytest.mark.parametrize("query", ["?namespace=Not_A_Namespace", "?cluster=-x"])
async def test_bad_filters_are_422(database_url: str, query: str) -> None:
    async with running_hub(database_url) as hub:
        answer = await hub.client.get(INVALID + query, headers=READER)
        assert answer.status_code == 422, answer.text
