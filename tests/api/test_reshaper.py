"""POST /reshaper: inventories of several providers and allocations of several
consumers replaced in one transaction.

    root (compute node)   VCPU 8, VGPU 4      vm1: 2 VCPU, 1 VGPU   (consumer generation 1)
      └ child (a pGPU)    no inventory        vm2: 1 VCPU, 2 VGPU   (consumer generation 1)

root is at generation 3 (inventory written, then one claim per vm), child at 0.
The story: the VGPU inventory, and what vm1 and vm2 hold of it, moves from the
root to the child. Every failing reshape leaves all of it as it was.
"""

from __future__ import annotations

import logging
import threading
import uuid

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import transaction

PROJECT, USER = "proj-a", "user-a"
V = "1.30"  # the first reshaper microversion, before consumer types
NEW_VM = "7bd2e864-0415-445c-8fc2-328520ef7642"


def _provider(client, name: str, parent: str | None = None) -> str:
    rp = str(uuid.uuid4())
    body = {"uuid": rp, "name": name}
    if parent:
        body["parent_provider_uuid"] = parent
    result = client.simulate_post("/resource_providers", json=body)
    assert result.status_code in (200, 201), result.text
    return rp


def _claim(client, consumer: str, allocations: dict, generation: int | None = None) -> None:
    body = {
        "allocations": {rp: {"resources": res} for rp, res in allocations.items()},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": generation,
        "consumer_type": "INSTANCE",
    }
    result = client.simulate_put(f"/allocations/{consumer}", json=body)
    assert result.status_code == 204, result.text


@pytest.fixture
def host(api) -> dict[str, str]:
    """The providers and consumers of the module docstring."""
    client = api()  # latest: the claims record a consumer type
    root = _provider(client, "compute")
    child = _provider(client, "pgpu", parent=root)
    inventories = {"VCPU": {"total": 8}, "VGPU": {"total": 4}}
    result = client.simulate_put(
        f"/resource_providers/{root}/inventories",
        json={"resource_provider_generation": 0, "inventories": inventories},
    )
    assert result.status_code == 200, result.text
    vm1, vm2 = str(uuid.uuid4()), str(uuid.uuid4())
    _claim(client, vm1, {root: {"VCPU": 2, "VGPU": 1}})
    _claim(client, vm2, {root: {"VCPU": 1, "VGPU": 2}})
    return {"root": root, "child": child, "vm1": vm1, "vm2": vm2}


def consumer(rp_res: dict, generation: int | None = 1, **extra: object) -> dict:
    return {
        "allocations": {rp: {"resources": res} for rp, res in rp_res.items()},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": generation,
        **extra,
    }


def move_vgpu(host: dict[str, str], **extra: object) -> dict:
    """The reshape of the story, as a client that read everything just now sends it."""
    root, child = host["root"], host["child"]
    return {
        "inventories": {
            root: {"resource_provider_generation": 3, "inventories": {"VCPU": {"total": 8}}},
            child: {"resource_provider_generation": 0, "inventories": {"VGPU": {"total": 4}}},
        },
        "allocations": {
            host["vm1"]: consumer({root: {"VCPU": 2}, child: {"VGPU": 1}}, **extra),
            host["vm2"]: consumer({root: {"VCPU": 1}, child: {"VGPU": 2}}, **extra),
        },
    }


def post(client, body: dict):
    return client.simulate_post("/reshaper", json=body)


def error(result) -> dict:
    return result.json["errors"][0]


def state(client, engine: sa.Engine, host: dict[str, str]) -> dict:
    """Everything a reshape could change, as the API shows it (plus the consumer rows)."""
    seen: dict = {}
    for name in ("root", "child"):
        rp = host[name]
        seen[name] = {
            "inventories": client.simulate_get(f"/resource_providers/{rp}/inventories").json,
            "usages": client.simulate_get(f"/resource_providers/{rp}/usages").json,
            "allocations": client.simulate_get(f"/resource_providers/{rp}/allocations").json,
        }
    for name in ("vm1", "vm2"):
        seen[name] = client.simulate_get(f"/allocations/{host[name]}").json
    seen["new"] = client.simulate_get(f"/allocations/{NEW_VM}").json
    with transaction(engine) as conn:
        seen["consumers"] = sorted(conn.execute(sa.select(t.consumers.c.uuid)).scalars())
        seen["types"] = sorted(conn.execute(sa.select(t.consumer_types.c.name)).scalars())
    return seen


def inventory(client, rp: str) -> dict:
    return client.simulate_get(f"/resource_providers/{rp}/inventories").json


def usages(client, rp: str) -> dict:
    return client.simulate_get(f"/resource_providers/{rp}/usages").json["usages"]


# ---------------------------------------------------------------- the story


def test_move_vgpu_from_root_to_child(api, host):
    client = api(V)
    result = post(client, move_vgpu(host))
    assert result.status_code == 204, result.text
    assert result.text == ""
    assert "content-type" not in {k.lower() for k in result.headers}

    root, child = host["root"], host["child"]
    # As upstream: a generation moves once per step that writes the provider
    # (interim inventory, allocations, final inventory).
    assert inventory(client, root) == {
        "resource_provider_generation": 6,
        "inventories": {"VCPU": _amounts(8)},
    }
    assert inventory(client, child) == {
        "resource_provider_generation": 3,
        "inventories": {"VGPU": _amounts(4)},
    }
    assert usages(client, root) == {"VCPU": 3}
    assert usages(client, child) == {"VGPU": 3}
    vm1 = api("1.38").simulate_get(f"/allocations/{host['vm1']}").json
    assert vm1["consumer_generation"] == 2
    assert vm1["consumer_type"] == "INSTANCE"  # before 1.38 the type stays as it was
    assert {rp: a["resources"] for rp, a in vm1["allocations"].items()} == {
        root: {"VCPU": 2},
        child: {"VGPU": 1},
    }


def test_move_back_and_consolidate_under_new_consumers(api, host):
    """The child's inventory emptied (`{}`), vm2's allocations removed (`{}`) and
    taken over by a new consumer (generation null)."""
    client = api(V)
    assert post(client, move_vgpu(host)).status_code == 204
    root, child = host["root"], host["child"]
    body = {
        "inventories": {
            root: {
                "resource_provider_generation": 6,
                "inventories": {"VCPU": {"total": 8}, "VGPU": {"total": 4}},
            },
            child: {"resource_provider_generation": 3, "inventories": {}},
        },
        "allocations": {
            host["vm1"]: consumer({root: {"VCPU": 2, "VGPU": 1}}, generation=2),
            host["vm2"]: consumer({}, generation=2),
            NEW_VM: consumer({root: {"VCPU": 1, "VGPU": 2}}, generation=None),
        },
    }
    result = post(client, body)
    assert result.status_code == 204, result.text
    assert usages(client, root) == {"VCPU": 3, "VGPU": 3}
    assert usages(client, child) == {}
    assert inventory(client, root)["resource_provider_generation"] == 9
    # no interim step for an empty inventory; the allocation step touches it
    # because vm2, emptied, held VGPU there; then the final inventory
    assert inventory(client, child) == {"resource_provider_generation": 5, "inventories": {}}
    assert client.simulate_get(f"/allocations/{host['vm2']}").json == {"allocations": {}}
    assert client.simulate_get(f"/allocations/{NEW_VM}").json["consumer_generation"] == 1


def test_allocations_may_be_empty(api, host):
    """Growing an inventory needs no allocations; the generation still moves
    for the interim and the final inventory."""
    client = api(V)
    root = host["root"]
    body = {
        "inventories": {
            root: {
                "resource_provider_generation": 3,
                "inventories": {"VCPU": {"total": 16}, "VGPU": {"total": 4}},
            }
        },
        "allocations": {},
    }
    assert post(client, body).status_code == 204
    assert inventory(client, root)["resource_provider_generation"] == 5
    assert inventory(client, root)["inventories"]["VCPU"]["total"] == 16
    assert usages(client, root) == {"VCPU": 3, "VGPU": 3}


def _amounts(total: int) -> dict:
    return {
        "total": total,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": 2147483647,
        "step_size": 1,
        "allocation_ratio": 1.0,
    }


# ---------------------------------------------------------------- all or nothing


def _stale_root(body, host):
    body["inventories"][host["root"]]["resource_provider_generation"] = 2
    return 409, "placement.concurrent_update", "actual: 3, given: 2"


def _stale_consumer(body, host):
    body["allocations"][host["vm2"]]["consumer_generation"] = 0
    return 409, "placement.concurrent_update", "consumer generation conflict"


def _unknown_inventory_provider(body, host):
    body["inventories"][str(uuid.uuid4())] = {
        "resource_provider_generation": 0,
        "inventories": {"VGPU": {"total": 1}},
    }
    return 400, "placement.resource_provider.not_found", "in inventories not found"


def _unknown_allocation_provider(body, host):
    body["allocations"][host["vm1"]]["allocations"][str(uuid.uuid4())] = {"resources": {"VCPU": 1}}
    return 400, "placement.undefined_code", "that does not exist"


def _unknown_inventory_class(body, host):
    body["inventories"][host["child"]]["inventories"]["CUSTOM_NOPE"] = {"total": 1}
    return 400, "placement.undefined_code", "No such resource class CUSTOM_NOPE"


def _unknown_allocation_class(body, host):
    body["allocations"][host["vm1"]]["allocations"][host["child"]]["resources"]["CUSTOM_NOPE"] = 1
    return 400, "placement.undefined_code", "No such resource class CUSTOM_NOPE"


def _capacity(body, host):
    body["inventories"][host["child"]]["inventories"]["VGPU"]["total"] = 2
    return 409, "placement.undefined_code", "Unable to allocate inventory"


def _constraints(body, host):
    body["inventories"][host["child"]]["inventories"]["VGPU"]["max_unit"] = 1
    return 409, "placement.undefined_code", "Unable to allocate inventory"


def _no_inventory_there(body, host):
    body["inventories"][host["child"]]["inventories"] = {"VCPU": {"total": 4}}
    return 409, "placement.undefined_code", "Unable to allocate inventory"


def _removed_while_held(body, host):
    """vm2 keeps its VGPU on the root, whose VGPU inventory goes: the final step fails,
    after the interim inventories and the allocations were written."""
    body["allocations"][host["vm2"]]["allocations"] = {
        host["root"]: {"resources": {"VCPU": 1, "VGPU": 2}}
    }
    return 409, "placement.inventory.inuse", "the inventory cannot be removed"


def _bad_record(body, host):
    body["inventories"][host["child"]]["inventories"]["VGPU"]["reserved"] = 5
    return 400, "placement.undefined_code", "reserved value of VGPU (5) is greater than total (4)"


FAILURES = [
    _stale_root,
    _stale_consumer,
    _unknown_inventory_provider,
    _unknown_allocation_provider,
    _unknown_inventory_class,
    _unknown_allocation_class,
    _capacity,
    _constraints,
    _no_inventory_there,
    _removed_while_held,
    _bad_record,
]


@pytest.mark.parametrize("over_capacity", ["refuse", "allow"])
@pytest.mark.parametrize("spoil", FAILURES, ids=[f.__name__.strip("_") for f in FAILURES])
def test_a_failing_reshape_changes_nothing(api, engine, host, spoil, over_capacity):
    client = api("1.38", over_capacity=over_capacity)
    before = state(client, engine, host)
    body = move_vgpu(host, consumer_type="RESHAPED")
    # a new consumer (and a new consumer type) that must not be left behind
    body["allocations"][NEW_VM] = consumer(
        {host["root"]: {"VCPU": 1}}, generation=None, consumer_type="RESHAPED"
    )
    status, code, words = spoil(body, host)
    result = post(client, body)
    assert result.status_code == status, result.text
    assert error(result)["code"] == code
    assert words in error(result)["detail"]
    assert state(client, engine, host) == before
    # and the unspoiled reshape still goes through at the same generations
    assert post(client, move_vgpu(host, consumer_type="RESHAPED")).status_code == 204


# ---------------------------------------------------------------- the capacity guard, end state


def _shrink_root_vgpu(host, total: int, vm1_vgpu: bool) -> dict:
    """Root VGPU lowered to `total`; vm1 gives up its VGPU or keeps it."""
    root = host["root"]
    vm1 = {"VCPU": 2, "VGPU": 1} if vm1_vgpu else {"VCPU": 2}
    return {
        "inventories": {
            root: {
                "resource_provider_generation": 3,
                "inventories": {"VCPU": {"total": 8}, "VGPU": {"total": total}},
            }
        },
        "allocations": {host["vm1"]: consumer({root: vm1})},
    }


def test_shrink_below_usage_refused_on_the_end_state(api, engine, host, caplog):
    """vm1 frees its VGPU, but 2 are still held by vm2 on a capacity of 1: the
    409 names the usage and holders AFTER the reshape, and nothing changes."""
    client = api(V, over_capacity="refuse")
    before = state(client, engine, host)
    caplog.set_level(logging.WARNING, logger="tally.placement.inventory")
    result = post(client, _shrink_root_vgpu(host, 1, vm1_vgpu=False))
    assert result.status_code == 409, result.text
    err = error(result)
    assert err["code"] == "placement.inventory.inuse"
    lines = err["detail"].splitlines()
    assert lines[0] == (
        f"Inventory for 'VGPU' on resource provider '{host['root']}' in use: 2 used, new capacity 1"
    )
    assert lines[1] == "VGPU is held by 1 consumer, largest first:"
    assert lines[2] == f"  2 by consumer {host['vm2']} (type INSTANCE, project {PROJECT})"
    assert lines[-2].startswith("Free those allocations first")
    assert lines[-1] == (
        f"update conflict: Inventory for 'VGPU' on resource provider '{host['root']}' in use. "
        f"2 used, new capacity 1, held by 1 consumer (largest {host['vm2']}: 2)."
    )
    assert err["usage"] == [
        {
            "resource_class": "VGPU",
            "used": 2,
            "capacity": 1,
            "removed": False,
            "consumers": [
                {
                    "uuid": host["vm2"],
                    "amount": 2,
                    "consumer_type": "INSTANCE",
                    "project_id": PROJECT,
                }
            ],
            "more_consumers": 0,
        }
    ]
    assert state(client, engine, host) == before


def test_shrink_below_current_usage_allowed_when_the_reshape_frees_enough(api, host):
    client = api(V, over_capacity="refuse")
    result = post(client, _shrink_root_vgpu(host, 2, vm1_vgpu=False))
    assert result.status_code == 204, result.text
    assert inventory(client, host["root"])["inventories"]["VGPU"]["total"] == 2
    assert usages(client, host["root"]) == {"VCPU": 3, "VGPU": 2}


def test_shrink_below_usage_refused_when_nothing_moves(api, host):
    """The same request as upstream's 'empty allocations inv in use', on our guard."""
    client = api(V, over_capacity="refuse")
    body = _shrink_root_vgpu(host, 2, vm1_vgpu=True)
    body["allocations"] = {}
    result = post(client, body)
    assert result.status_code == 409
    assert error(result)["code"] == "placement.inventory.inuse"
    assert "3 used, new capacity 2" in error(result)["detail"]


def test_allow_mode_writes_the_shrink_with_a_warning(api, host, caplog):
    client = api(V, over_capacity="allow")
    caplog.set_level(logging.WARNING, logger="tally.placement.inventory")
    body = _shrink_root_vgpu(host, 2, vm1_vgpu=True)
    result = post(client, body)
    assert result.status_code == 204, result.text
    assert inventory(client, host["root"])["inventories"]["VGPU"]["total"] == 2
    assert usages(client, host["root"]) == {"VCPU": 3, "VGPU": 3}
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"Resource provider {host['root']} is now over-capacity for VGPU" in warned


@pytest.mark.parametrize("over_capacity", ["refuse", "allow"])
def test_adding_to_an_over_capacity_class_is_refused_in_both_modes(api, host, over_capacity):
    """Usage may only grow within the new capacity: that is the allocation check."""
    client = api(V, over_capacity=over_capacity)
    body = _shrink_root_vgpu(host, 2, vm1_vgpu=True)
    body["allocations"][host["vm1"]]["allocations"][host["root"]]["resources"]["VGPU"] = 2
    result = post(client, body)
    assert result.status_code == 409
    assert "Unable to allocate inventory" in error(result)["detail"]
    assert error(result)["code"] == "placement.undefined_code"


@pytest.mark.parametrize("over_capacity", ["refuse", "allow"])
def test_removing_a_held_class_is_refused_in_both_modes(api, host, over_capacity):
    client = api(V, over_capacity=over_capacity)
    body = _shrink_root_vgpu(host, 2, vm1_vgpu=False)
    body["inventories"][host["root"]]["inventories"].pop("VGPU")
    result = post(client, body)
    assert result.status_code == 409
    err = error(result)
    assert err["code"] == "placement.inventory.inuse"
    assert err["detail"].splitlines()[0] == (
        f"Inventory for 'VGPU' on resource provider '{host['root']}' in use: "
        "2 used, the inventory cannot be removed"
    )


def test_an_already_over_capacity_class_may_be_kept(api, engine, host):
    """Repair rule of the guard: a reshape that does not lower a capacity is never
    refused, even if the provider is over capacity already."""
    with transaction(engine, write=True) as conn:
        conn.execute(t.inventories.update().where(t.inventories.c.total == 4).values(total=2))
    client = api(V, over_capacity="refuse")
    body = _shrink_root_vgpu(host, 2, vm1_vgpu=True)
    result = post(client, body)
    assert result.status_code == 204, result.text
    assert inventory(client, host["root"])["inventories"]["VGPU"]["total"] == 2
    assert usages(client, host["root"])["VGPU"] == 3  # still over, as before


# ---------------------------------------------------------------- microversions and schema


def test_consumer_type_from_1_38(api, host):
    client = api("1.38")
    result = post(client, move_vgpu(host))
    assert result.status_code == 400
    assert "'consumer_type' is a required property" in error(result)["detail"]
    result = post(client, move_vgpu(host, consumer_type="RESHAPED"))
    assert result.status_code == 204, result.text
    assert client.simulate_get(f"/allocations/{host['vm1']}").json["consumer_type"] == "RESHAPED"


@pytest.mark.parametrize("version", ["1.30", "1.34", "1.37"])
def test_consumer_type_refused_before_1_38(api, host, version):
    result = post(api(version), move_vgpu(host, consumer_type="RESHAPED"))
    assert result.status_code == 400
    detail = error(result)["detail"]
    assert "JSON does not validate: Additional properties are not allowed" in detail
    assert "'consumer_type' was unexpected" in detail


def test_mappings_from_1_34(api, host):
    mappings = {"": [host["root"]]}
    result = post(api("1.33"), move_vgpu(host, mappings=mappings))
    assert result.status_code == 400
    assert "'mappings' was unexpected" in error(result)["detail"]
    assert post(api("1.34"), move_vgpu(host, mappings=mappings)).status_code == 204


def test_not_there_before_1_30(api, host):
    result = post(api("1.29"), move_vgpu(host))
    assert result.status_code == 404
    assert result.json["errors"][0]["code"] == "placement.undefined_code"


def test_post_only(api):
    result = api(V).simulate_get("/reshaper")
    assert result.status_code == 405
    assert result.headers["allow"] == "POST"


def test_json_only(api, host):
    result = api(V).simulate_post("/reshaper", body="inventories=1", content_type="text/plain")
    assert result.status_code == 415
    assert error(result)["code"] == "placement.undefined_code"
    assert "text/plain is not supported" in error(result)["detail"]


@pytest.mark.parametrize(
    ("spoil", "words"),
    [
        (lambda b, h: b.pop("allocations"), "'allocations' is a required property"),
        (lambda b, h: b.update(inventories={}), "{} should be non-empty"),
        (lambda b, h: b.update(cows="moo"), "'cows' was unexpected"),
        (
            lambda b, h: b["inventories"].update({"not-a-uuid": {}}),
            "'not-a-uuid' does not match any of the regexes",
        ),
        (
            lambda b, h: b["inventories"][h["child"]]["inventories"]["VGPU"].update(bad=1),
            "'bad' was unexpected",
        ),
        (
            lambda b, h: b["inventories"][h["child"]].pop("resource_provider_generation"),
            "'resource_provider_generation' is a required property",
        ),
        (
            lambda b, h: b["allocations"][h["vm1"]].pop("consumer_generation"),
            "'consumer_generation' is a required property",
        ),
        (
            lambda b, h: b["allocations"][h["vm1"]]["allocations"][h["child"]].update(
                resources={"VGPU": 0}
            ),
            "0 is less than the minimum of 1",
        ),
    ],
    ids=[
        "no-allocations",
        "no-inventories",
        "extra-key",
        "bad-provider-key",
        "bad-record-field",
        "no-provider-generation",
        "no-consumer-generation",
        "zero-amount",
    ],
)
def test_schema_errors(api, host, spoil, words):
    body = move_vgpu(host)
    spoil(body, host)
    result = post(api("1.30"), body)
    assert result.status_code == 400, result.text
    assert "JSON does not validate" in error(result)["detail"]
    assert words in error(result)["detail"]


def test_malformed_json(api):
    result = api(V).simulate_post(
        "/reshaper", body="{not json", headers={"content-type": "application/json"}
    )
    assert result.status_code == 400
    assert "Malformed JSON" in error(result)["detail"]


def test_admin_only(api, host):
    result = api(V).simulate_post(
        "/reshaper", json=move_vgpu(host), headers={"x-auth-token": "user"}
    )
    assert result.status_code == 403
    assert error(result)["code"] == "placement.undefined_code"
    assert "placement:reshaper:reshape" in error(result)["detail"]


# ---------------------------------------------------------------- concurrency


def test_shrinking_reshapes_racing_claims_never_end_over_capacity(api, host):
    """Reshapes that lower the root's VCPU to what is allocated race claims of
    1 VCPU each: whoever wins, the root never ends above its capacity, and every
    answer is a 204 or a 409 the final state explains."""
    client = api(V, over_capacity="refuse")
    root = host["root"]
    answers: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def claimer() -> None:
        try:
            barrier.wait(timeout=30)
            for _ in range(4):
                body = consumer({root: {"VCPU": 1}}, generation=None)
                result = client.simulate_put(f"/allocations/{uuid.uuid4()}", json=body)
                assert result.status_code in (204, 409), result.text
                answers.append(result.status_code)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def shrinker() -> None:
        try:
            barrier.wait(timeout=30)
            for _ in range(4):
                seen = inventory(client, root)
                used = usages(client, root)["VCPU"]
                body = {
                    "inventories": {
                        root: {
                            "resource_provider_generation": seen["resource_provider_generation"],
                            "inventories": {"VCPU": {"total": used}, "VGPU": {"total": 4}},
                        }
                    },
                    "allocations": {},
                }
                result = post(client, body)
                assert result.status_code in (204, 409), result.text
                if result.status_code == 409:
                    assert error(result)["code"] in (
                        "placement.concurrent_update",
                        "placement.inventory.inuse",
                    )
                answers.append(result.status_code)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (claimer, claimer, shrinker, shrinker)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(answers) == 16
    total = inventory(client, root)["inventories"]["VCPU"]["total"]
    assert usages(client, root)["VCPU"] <= total
