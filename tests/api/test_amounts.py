"""GET /tally/v1/amounts: every provider's inventories with what is used of them, in
one answer, equal to what `.../inventories` and `.../usages` say one provider at a
time; admin only."""

from __future__ import annotations

from tests.api.test_candidates import Cloud


def test_every_provider_in_one_answer_as_the_per_provider_reads_say(api):
    cloud = Cloud(api())
    cloud.provider("cn1", inventory={"VCPU": 8, "MEMORY_MB": 4096})
    cloud.provider("numa0", "cn1", {"VCPU": 4})
    cloud.provider("bare")  # no inventory: not in the answer
    cloud.allocate("cn1", VCPU=3)
    cloud.allocate("numa0", VCPU=1)
    client = api()
    client.simulate_put(
        f"/resource_providers/{cloud.uuids['numa0']}/inventories",
        json={
            "resource_provider_generation": 2,
            "inventories": {"VCPU": {"total": 4, "reserved": 1, "allocation_ratio": 2.0}},
        },
    )
    answer = client.simulate_get("/tally/v1/amounts")
    assert answer.status_code == 200, answer.text
    found = answer.json["providers"]
    assert set(found) == {cloud.uuids["cn1"], cloud.uuids["numa0"]}
    for uuid, per_class in found.items():
        inventories = client.simulate_get(f"/resource_providers/{uuid}/inventories").json
        usages = client.simulate_get(f"/resource_providers/{uuid}/usages").json["usages"]
        assert set(per_class) == set(inventories["inventories"])
        for rc, amounts in per_class.items():
            record = inventories["inventories"][rc]
            assert amounts["used"] == usages[rc]
            for field in ("total", "reserved", "allocation_ratio"):
                assert amounts[field] == record[field]
            ratio = record["allocation_ratio"]
            assert amounts["capacity"] == int((record["total"] - record["reserved"]) * ratio)
    assert found[cloud.uuids["numa0"]]["VCPU"] == {
        "total": 4,
        "reserved": 1,
        "allocation_ratio": 2.0,
        "capacity": 6,
        "used": 1,
    }


def test_admin_only_and_no_parameters(api):
    client = api()
    bad = client.simulate_get("/tally/v1/amounts", query_string="limit=3")
    assert bad.status_code == 400
    assert bad.json["errors"][0]["code"] == "placement.undefined_code"
    member = {"x-auth-token": "user", "x-roles": "member", "x-project-id": "p"}
    user = client.simulate_get("/tally/v1/amounts", headers=member)
    assert user.status_code == 403, user.text
    assert "tally:amounts:list" in user.json["errors"][0]["detail"]
