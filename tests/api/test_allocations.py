"""Allocations over HTTP: every body form by microversion, consumer generations
and types, the checks of a claim (provider, class, inventory, constraints,
capacity), atomic POST, provider generations, and the read views.

Providers and inventories are built straight in the database
(`tests.builders.provider_with_inventory`),
so these tests depend only on the allocation and usage endpoints.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import transaction
from tally.placement.ledger import allocations as ledger
from tests.builders import provider_with_inventory
from tests.conftest import PlacementClient

PROJECT, USER = "proj-a", "user-a"


def set_total(engine: sa.Engine, rp_uuid: str, rc: str, total: int) -> None:
    """Shrink inventory behind the API's back (as an operator with over_capacity=allow)."""
    with transaction(engine, write=True) as conn:
        rp_id = conn.execute(
            sa.select(t.resource_providers.c.id).where(t.resource_providers.c.uuid == rp_uuid)
        ).scalar_one()
        rc_id = conn.execute(
            sa.select(t.resource_classes.c.id).where(t.resource_classes.c.name == rc)
        ).scalar_one()
        conn.execute(
            t.inventories.update()
            .where(t.inventories.c.resource_provider_id == rp_id)
            .where(t.inventories.c.resource_class_id == rc_id)
            .values(total=total)
        )


def body(allocations: dict, generation: int | None = None, **extra: object) -> dict:
    """A 1.28+ PUT body; `allocations` maps provider uuid -> resources."""
    return {
        "allocations": {rp: {"resources": res} for rp, res in allocations.items()},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": generation,
        **extra,
    }


def detail(result, code: str) -> str:
    """The detail of the answer's error, whose Placement error code must be `code`."""
    error = result.json["errors"][0]
    assert error["code"] == code, error
    return error["detail"]


def usage(client: PlacementClient, rp: str) -> dict:
    return client.simulate_get(f"/resource_providers/{rp}/usages").json["usages"]


def test_list_form_before_1_8_records_the_incomplete_owner(api, engine):
    rp = provider_with_inventory(engine, DISK_GB=100)
    consumer = str(uuid.uuid4())
    put = api("1.7").simulate_put(
        f"/allocations/{consumer}",
        json={"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"DISK_GB": 10}}]},
    )
    assert put.status_code == 204, put.text
    old = api("1.11").simulate_get(f"/allocations/{consumer}").json
    assert old == {"allocations": {rp: {"generation": 1, "resources": {"DISK_GB": 10}}}}
    new = api("1.12").simulate_get(f"/allocations/{consumer}").json
    assert new["project_id"] == new["user_id"] == "00000000-0000-0000-0000-000000000000"
    assert "consumer_generation" not in new


def test_project_and_user_required_from_1_8(api, engine):
    rp = provider_with_inventory(engine, DISK_GB=100)
    payload = {"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"DISK_GB": 1}}]}
    result = api("1.8").simulate_put(f"/allocations/{uuid.uuid4()}", json=payload)
    assert result.status_code == 400
    assert "'project_id' is a required property" in result.json["errors"][0]["detail"]


def test_dict_form_round_trip_at_1_12(api, engine):
    rp = provider_with_inventory(engine, VCPU=8, DISK_GB=100)
    consumer = str(uuid.uuid4())
    client = api("1.12")
    payload = {
        "allocations": {rp: {"resources": {"VCPU": 2, "DISK_GB": 20}}},
        "project_id": PROJECT,
        "user_id": USER,
    }
    assert client.simulate_put(f"/allocations/{consumer}", json=payload).status_code == 204
    got = client.simulate_get(f"/allocations/{consumer}").json
    assert got == {
        "allocations": {rp: {"generation": 1, "resources": {"VCPU": 2, "DISK_GB": 20}}},
        "project_id": PROJECT,
        "user_id": USER,
    }
    # What GET returns (with a provider generation) may be PUT back as it is.
    again = {"allocations": got["allocations"], "project_id": PROJECT, "user_id": USER}
    assert client.simulate_put(f"/allocations/{consumer}", json=again).status_code == 204
    # The list form is refused from 1.12.
    listish = dict(payload, allocations=[{"resource_provider": {"uuid": rp}, "resources": {}}])
    assert client.simulate_put(f"/allocations/{consumer}", json=listish).status_code == 400


def test_consumer_uuid_must_be_a_uuid_and_is_normalized(api, engine):
    rp = provider_with_inventory(engine, VCPU=8)
    client = api("1.28")
    bad = client.simulate_put("/allocations/not-a-uuid", json=body({rp: {"VCPU": 1}}))
    assert bad.status_code == 400
    assert "Malformed consumer_uuid: not-a-uuid" in bad.json["errors"][0]["detail"]
    consumer = uuid.uuid4()
    put = client.simulate_put(f"/allocations/{consumer.hex}", json=body({rp: {"VCPU": 1}}))
    assert put.status_code == 204
    assert client.simulate_get(f"/allocations/{consumer}").json["consumer_generation"] == 1


def test_consumer_generation_from_1_28(api, engine):
    rp = provider_with_inventory(engine, VCPU=8)
    consumer = str(uuid.uuid4())
    client = api("1.28")
    url = f"/allocations/{consumer}"
    missing = dict(body({rp: {"VCPU": 1}}))
    del missing["consumer_generation"]
    assert client.simulate_put(url, json=missing).status_code == 400

    wrong_new = client.simulate_put(url, json=body({rp: {"VCPU": 1}}, 5))
    assert wrong_new.status_code == 409
    error = wrong_new.json["errors"][0]
    assert error["code"] == "placement.concurrent_update"
    assert "consumer generation conflict - expected null but got 5" in error["detail"]

    assert client.simulate_put(url, json=body({rp: {"VCPU": 1}})).status_code == 204
    assert client.simulate_get(url).json["consumer_generation"] == 1
    stale = client.simulate_put(url, json=body({rp: {"VCPU": 2}}))
    assert stale.status_code == 409
    assert "expected 1 but got null" in stale.json["errors"][0]["detail"]
    assert client.simulate_put(url, json=body({rp: {"VCPU": 2}}, 1)).status_code == 204
    assert client.simulate_get(url).json["consumer_generation"] == 2
    assert usage(client, rp) == {"VCPU": 2}

    # Before 1.28 nobody checks, but the generation still moves.
    old = {"allocations": {rp: {"resources": {"VCPU": 3}}}, "project_id": "p", "user_id": "u"}
    assert api("1.27").simulate_put(url, json=old).status_code == 204
    got = client.simulate_get(url).json
    assert (got["consumer_generation"], got["project_id"], got["user_id"]) == (3, "p", "u")


def test_empty_allocations_with_generation_is_a_safe_delete(api, engine):
    rp = provider_with_inventory(engine, VCPU=8)
    consumer = str(uuid.uuid4())
    client = api("1.28")
    url = f"/allocations/{consumer}"
    assert client.simulate_put(url, json=body({rp: {"VCPU": 4}})).status_code == 204
    assert client.simulate_put(url, json=body({}, 7)).status_code == 409
    assert usage(client, rp) == {"VCPU": 4}
    assert client.simulate_put(url, json=body({}, 1)).status_code == 204
    assert client.simulate_get(url).json == {"allocations": {}}
    assert usage(client, rp) == {"VCPU": 0}
    with transaction(engine) as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.consumers)).scalar() == 0
    # The consumer is gone, so it is new again: null is the right generation.
    assert client.simulate_put(url, json=body({rp: {"VCPU": 1}})).status_code == 204
    # Empty allocations are refused before 1.28.
    empty = {"allocations": {}, "project_id": PROJECT, "user_id": USER}
    assert api("1.27").simulate_put(url, json=empty).status_code == 400


def test_claim_checks(api, engine):
    rp = provider_with_inventory(
        engine,
        VCPU={"total": 4, "max_unit": 8},
        DISK_GB={"total": 100, "min_unit": 10, "step_size": 10},
    )
    client = api("1.28")
    url = f"/allocations/{uuid.uuid4()}"

    def claim(allocs: dict) -> tuple[int, str]:
        result = client.simulate_put(url, json=body(allocs))
        return result.status_code, result.json["errors"][0]["detail"] if result.text else ""

    ghost = str(uuid.uuid4())
    status, detail = claim({ghost: {"VCPU": 1}})
    assert status == 400 and f"Allocation for resource provider '{ghost}'" in detail
    status, detail = claim({rp: {"CUSTOM_NOPE": 1}})
    assert status == 400 and "No such resource class CUSTOM_NOPE" in detail
    status, detail = claim({rp: {"MEMORY_MB": 1}})
    assert status == 409 and f"Inventory for 'MEMORY_MB' on resource provider '{rp}'" in detail
    for amount in (5, 15, 110):  # below min_unit, off step_size, above max_unit
        status, detail = claim({rp: {"DISK_GB": amount}})
        assert status == 409 and "would violate inventory constraints" in detail
    status, detail = claim({rp: {"VCPU": 5}})
    assert status == 409 and "The requested amount would exceed the capacity" in detail
    zero = client.simulate_put(url, json=body({rp: {"VCPU": 0}}))
    assert zero.status_code == 400
    assert "0 is less than the minimum of 1" in zero.json["errors"][0]["detail"]
    assert usage(client, rp) == {"VCPU": 0, "DISK_GB": 0}
    assert claim({rp: {"VCPU": 4, "DISK_GB": 100}}) == (204, "")


def test_capacity_counts_reserved_and_allocation_ratio(api, engine):
    rp = provider_with_inventory(engine, VCPU={"total": 4, "reserved": 1, "allocation_ratio": 2.0})
    client = api("1.28")
    first = client.simulate_put(f"/allocations/{uuid.uuid4()}", json=body({rp: {"VCPU": 4}}))
    assert first.status_code == 204
    second = client.simulate_put(f"/allocations/{uuid.uuid4()}", json=body({rp: {"VCPU": 3}}))
    assert second.status_code == 409  # capacity (4 - 1) * 2 = 6
    assert "Unable to allocate inventory" in detail(second, "placement.undefined_code")
    third = client.simulate_put(f"/allocations/{uuid.uuid4()}", json=body({rp: {"VCPU": 2}}))
    assert third.status_code == 204


def test_over_capacity_write_passes_only_if_it_does_not_increase_usage(api, engine):
    rp = provider_with_inventory(engine, VCPU=8)
    client = api("1.28")
    url = f"/allocations/{uuid.uuid4()}"
    assert client.simulate_put(url, json=body({rp: {"VCPU": 6}})).status_code == 204
    set_total(engine, rp, "VCPU", 4)  # now 6 used of 4
    # Down to 4 of 4: fine. Then another consumer may not add anything.
    assert client.simulate_put(url, json=body({rp: {"VCPU": 4}}, 1)).status_code == 204
    other = client.simulate_put(f"/allocations/{uuid.uuid4()}", json=body({rp: {"VCPU": 1}}))
    assert other.status_code == 409
    set_total(engine, rp, "VCPU", 2)  # 4 used of 2
    same = client.simulate_put(url, json=body({rp: {"VCPU": 4}}, 2))
    assert same.status_code == 204  # keeps the overage, does not grow it
    shrink = client.simulate_put(url, json=body({rp: {"VCPU": 3}}, 3))
    assert shrink.status_code == 204  # reduces the overage
    regrow = client.simulate_put(url, json=body({rp: {"VCPU": 4}}, 4))
    assert regrow.status_code == 409
    assert usage(client, rp) == {"VCPU": 3}


def test_post_is_atomic_and_empty_allocations_remove(api, engine):
    rp1, rp2 = provider_with_inventory(engine, VCPU=4), provider_with_inventory(engine, VCPU=4)
    c1, c2, c3 = (str(uuid.uuid4()) for _ in range(3))
    client = api("1.28")

    def post(data: dict) -> int:
        return client.simulate_post("/allocations", json=data).status_code

    def refused(data: dict, code: str) -> str:
        result = client.simulate_post("/allocations", json=data)
        assert result.status_code == 409, result.text
        return detail(result, code)

    assert post({c1: body({rp1: {"VCPU": 2}}), c2: body({rp2: {"VCPU": 2}})}) == 204
    # c3 does not fit: nothing of this request lands, not even c1's change.
    too_big = {c1: body({rp1: {"VCPU": 1}}, 1), c3: body({rp2: {"VCPU": 3}})}
    assert "Unable to allocate inventory" in refused(too_big, "placement.undefined_code")
    assert (usage(client, rp1), usage(client, rp2)) == ({"VCPU": 2}, {"VCPU": 2})
    # Move c1 to rp2 while emptying c2 in one go.
    assert post({c1: body({rp2: {"VCPU": 4}}, 1), c2: body({}, 1)}) == 204
    assert (usage(client, rp1), usage(client, rp2)) == ({"VCPU": 0}, {"VCPU": 4})
    assert client.simulate_get(f"/allocations/{c2}").json == {"allocations": {}}
    # A generation conflict on any consumer refuses the whole request.
    stale = {c1: body({}, 2), c3: body({rp1: {"VCPU": 1}}, 4)}
    assert "consumer generation conflict" in refused(stale, "placement.concurrent_update")
    assert usage(client, rp2) == {"VCPU": 4}


def test_post_microversions(api, engine):
    rp = provider_with_inventory(engine, VCPU=4)
    data = {str(uuid.uuid4()): {"allocations": {rp: {"resources": {"VCPU": 1}}}}}
    early = api("1.12").simulate_post("/allocations", json=data)
    assert early.status_code == 404
    wrong = api("1.13").simulate_get("/allocations")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    for refused in (early, wrong):  # error codes came with 1.23
        assert "code" not in refused.json["errors"][0]
    # 1.13 wants project and user; 1.28 a generation; 1.38 a type.
    unowned = api("1.13").simulate_post("/allocations", json=data)
    assert unowned.status_code == 400
    assert "'project_id' is a required property" in unowned.json["errors"][0]["detail"]
    owned = {c: dict(b, project_id="p", user_id="u") for c, b in data.items()}
    ungenerated = api("1.28").simulate_post("/allocations", json=owned)
    assert ungenerated.status_code == 400
    missing = "'consumer_generation' is a required property"
    assert missing in detail(ungenerated, "placement.undefined_code")
    assert api("1.13").simulate_post("/allocations", json=owned).status_code == 204


def test_delete(api, engine):
    rp = provider_with_inventory(engine, VCPU=4)
    consumer = str(uuid.uuid4())
    client = api("1.28")
    assert (
        client.simulate_put(f"/allocations/{consumer}", json=body({rp: {"VCPU": 2}})).status_code
        == 204
    )
    assert client.simulate_delete(f"/allocations/{consumer}").status_code == 204
    again = client.simulate_delete(f"/allocations/{consumer}")
    assert again.status_code == 404
    assert f"No allocations for consumer '{consumer}'" in again.json["errors"][0]["detail"]
    assert usage(client, rp) == {"VCPU": 0}
    with transaction(engine) as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.consumers)).scalar() == 0


def test_provider_generations(api, engine):
    rp1, rp2 = provider_with_inventory(engine, VCPU=4), provider_with_inventory(engine, VCPU=4)
    client = api("1.28")

    def generation(rp: str) -> int:
        return client.simulate_get(f"/resource_providers/{rp}/usages").json[
            "resource_provider_generation"
        ]

    consumer = str(uuid.uuid4())
    url = f"/allocations/{consumer}"
    assert (
        client.simulate_put(url, json=body({rp1: {"VCPU": 1}, rp2: {"VCPU": 1}})).status_code == 204
    )
    assert (generation(rp1), generation(rp2)) == (1, 1)
    assert client.simulate_put(url, json=body({rp2: {"VCPU": 2}}, 1)).status_code == 204
    assert (generation(rp1), generation(rp2)) == (1, 2)  # as upstream: named providers
    assert client.simulate_put(url, json=body({}, 2)).status_code == 204
    assert generation(rp2) == 3  # emptying touches what the consumer held
    assert client.simulate_put(url, json=body({rp1: {"VCPU": 1}})).status_code == 204
    assert client.simulate_delete(url).status_code == 204
    assert generation(rp1) == 2  # DELETE leaves generations alone, as upstream


def test_provider_allocations_view(api, engine):
    rp = provider_with_inventory(engine, VCPU=8, DISK_GB=100)
    c1, c2 = str(uuid.uuid4()), str(uuid.uuid4())
    client = api("1.28")
    client.simulate_put(f"/allocations/{c1}", json=body({rp: {"VCPU": 2, "DISK_GB": 10}}))
    client.simulate_put(f"/allocations/{c2}", json=body({rp: {"VCPU": 1}}))
    got = client.simulate_get(f"/resource_providers/{rp}/allocations").json
    assert got == {
        "resource_provider_generation": 2,
        "allocations": {
            c1: {"resources": {"VCPU": 2, "DISK_GB": 10}, "consumer_generation": 1},
            c2: {"resources": {"VCPU": 1}, "consumer_generation": 1},
        },
    }
    old = api("1.27").simulate_get(f"/resource_providers/{rp}/allocations")
    assert old.json["allocations"][c2] == {"resources": {"VCPU": 1}}
    assert "last-modified" in old.headers
    assert (
        "last-modified"
        not in api("1.14").simulate_get(f"/resource_providers/{rp}/allocations").headers
    )
    missing = client.simulate_get(f"/resource_providers/{uuid.uuid4()}/allocations")
    assert missing.status_code == 404


def test_consumer_types_from_1_38(api, engine):
    rp = provider_with_inventory(engine, VCPU=8)
    consumer = str(uuid.uuid4())
    url = f"/allocations/{consumer}"
    client = api("1.38")
    untyped = client.simulate_put(url, json=body({rp: {"VCPU": 1}}))
    assert untyped.status_code == 400
    assert "'consumer_type' is a required property" in untyped.json["errors"][0]["detail"]
    lower = client.simulate_put(url, json=body({rp: {"VCPU": 1}}, consumer_type="vm"))
    assert lower.status_code == 400
    assert api("1.37").simulate_put(url, json=body({rp: {"VCPU": 1}})).status_code == 204
    assert client.simulate_get(url).json["consumer_type"] == "unknown"
    typed = body({rp: {"VCPU": 1}}, 1, consumer_type="INSTANCE")
    assert client.simulate_put(url, json=typed).status_code == 204
    assert client.simulate_get(url).json["consumer_type"] == "INSTANCE"
    # A write before 1.38 leaves the type alone.
    assert api("1.37").simulate_put(url, json=body({rp: {"VCPU": 2}}, 2)).status_code == 204
    assert client.simulate_get(url).json["consumer_type"] == "INSTANCE"
    assert "consumer_type" not in api("1.37").simulate_get(url).json


def test_mappings_accepted_from_1_34(api, engine):
    rp = provider_with_inventory(engine, VCPU=8)
    payload = body({rp: {"VCPU": 1}}, mappings={"_CPU": [rp]})
    early = api("1.33").simulate_put(f"/allocations/{uuid.uuid4()}", json=payload)
    assert early.status_code == 400
    assert "'mappings' was unexpected" in detail(early, "placement.undefined_code")
    assert api("1.34").simulate_put(f"/allocations/{uuid.uuid4()}", json=payload).status_code == 204


def test_cache_headers(api, engine):
    rp = provider_with_inventory(engine, VCPU=8)
    consumer = str(uuid.uuid4())
    put = api("1.28").simulate_put(f"/allocations/{consumer}", json=body({rp: {"VCPU": 1}}))
    assert "last-modified" not in put.headers and "cache-control" not in put.headers
    new = api("1.15").simulate_get(f"/allocations/{consumer}")
    assert new.headers["cache-control"] == "no-cache" and new.headers["last-modified"].endswith(
        "GMT"
    )
    assert "last-modified" not in api("1.14").simulate_get(f"/allocations/{consumer}").headers


def test_server_side_races_are_retried_then_reported(monkeypatch, sqlite_engine):
    rp = provider_with_inventory(sqlite_engine, VCPU=8)
    write = ledger.ConsumerWrite(str(uuid.uuid4()), "p", "u", {rp: {"VCPU": 1}})
    real, calls = ledger.replace_in, []

    def flaky(conn, writes, **how):
        calls.append(1)
        if len(calls) < 3:
            raise ledger.provider_bumps.GenerationMoved()
        return real(conn, writes, **how)

    monkeypatch.setattr(ledger, "replace_in", flaky)
    ledger.replace(sqlite_engine, [write], retries=3)
    assert len(calls) == 3
    assert ledger.for_consumer(sqlite_engine, write.uuid).allocations[rp]["resources"] == {
        "VCPU": 1
    }
    calls.clear()
    with pytest.raises(ledger.ConcurrentUpdate):
        ledger.replace(sqlite_engine, [write], retries=2)
    assert len(calls) == 2


# A claim naming its consumer's generation as null is first written as if the consumer
# were new, without looking it up (`replace_in(assume_new=True)`); these are the cases
# where the assumption is wrong, and the answer must be the ordinary write's.


def _orphan_allocation(engine: sa.Engine, consumer: str, rp_uuid: str, vcpu: int) -> None:
    """An allocation without a consumer row, as an upstream database adopted
    before its online migrations made one may hold."""
    with transaction(engine, write=True) as conn:
        rp_id = conn.execute(
            sa.select(t.resource_providers.c.id).where(t.resource_providers.c.uuid == rp_uuid)
        ).scalar_one()
        conn.execute(
            t.allocations.insert().values(
                resource_provider_id=rp_id, consumer_id=consumer, resource_class_id=0, used=vcpu
            )
        )


def test_a_null_generation_claim_replaces_allocations_held_without_a_consumer_row(api, engine):
    rp, other = provider_with_inventory(engine, VCPU=8), provider_with_inventory(engine, VCPU=8)
    consumer = str(uuid.uuid4())
    _orphan_allocation(engine, consumer, rp, 6)
    client = api("1.28", allocation_conflict_retry_count=1)
    # 6 held + 4 asked would not fit: the 6 are released by the rewrite, as before
    put = client.simulate_put(f"/allocations/{consumer}", json=body({rp: {"VCPU": 4}}))
    assert put.status_code == 204, put.text
    assert usage(client, rp) == {"VCPU": 4}  # replaced, not added to
    moved = client.simulate_put(
        f"/allocations/{consumer}", json=body({other: {"VCPU": 1}}, generation=1)
    )
    assert moved.status_code == 204, moved.text
    assert (usage(client, rp), usage(client, other)) == ({"VCPU": 0}, {"VCPU": 1})


@pytest.mark.parametrize("retries", [1, 10])
def test_a_null_generation_for_an_existing_consumer_is_its_conflict_first(api, engine, retries):
    rp = provider_with_inventory(engine, VCPU=8)
    consumer = str(uuid.uuid4())
    # the first try's wrong assumption costs none of the retries the operator allows
    client = api("1.28", allocation_conflict_retry_count=retries)
    assert (
        client.simulate_put(f"/allocations/{consumer}", json=body({rp: {"VCPU": 2}})).status_code
        == 204
    )
    unknown_rp = str(uuid.uuid4())
    for allocations in ({rp: {"VCPU": 1}}, {rp: {"VCPU": 99}}, {unknown_rp: {"VCPU": 1}}):
        again = client.simulate_put(f"/allocations/{consumer}", json=body(allocations))
        assert again.status_code == 409, again.text  # not 204, not the capacity's, not 400
        error = again.json["errors"][0]
        assert error["code"] == "placement.concurrent_update"
        assert "consumer generation conflict - expected 1 but got null" in error["detail"]
    assert usage(client, rp) == {"VCPU": 2}
    assert client.simulate_get(f"/allocations/{consumer}").json["consumer_generation"] == 1


def test_a_claim_refused_for_capacity_on_the_first_try_is_the_answer(api, engine, monkeypatch):
    rp = provider_with_inventory(engine, VCPU=2)
    tries = []
    real = ledger.replace_in

    def counted(conn, writes, **how):
        tries.append(how.get("assume_new"))
        return real(conn, writes, **how)

    filled = api("1.28").simulate_put(f"/allocations/{uuid.uuid4()}", json=body({rp: {"VCPU": 2}}))
    assert filled.status_code == 204
    monkeypatch.setattr(ledger, "replace_in", counted)
    full = api("1.28").simulate_put(f"/allocations/{uuid.uuid4()}", json=body({rp: {"VCPU": 1}}))
    assert full.status_code == 409 and "exceed the capacity" in full.text
    assert tries == [True]  # the consumer is known to be new: no second run
    tries.clear()
    missing = api("1.28", allocation_conflict_retry_count=1).simulate_put(
        f"/allocations/{uuid.uuid4()}", json=body({str(uuid.uuid4()): {"VCPU": 1}})
    )
    assert missing.status_code == 400
    assert tries == [True, False]  # a 400 is checked again with the consumer looked up
