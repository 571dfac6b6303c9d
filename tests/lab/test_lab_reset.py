"""`tally lab reset` (POST /compute/v2.1/os-lab/reset): back to an empty lab without a
restart, its traces in Placement gone (read back through Placement's API), and
`tally lab up` builds it again."""

from __future__ import annotations

import json

import pytest

from tally.clients.compute import ComputeError
from tests.lab.conftest import new_uuid, tally_lab


def lab_providers(lab) -> dict[str, str]:
    return {h["provider_uuid"]: h["name"] for h in lab.compute.get("/os-lab/hosts")["hosts"]}


def providers_in_placement(lab) -> dict[str, str]:
    found = lab.placement.get("/resource_providers")["resource_providers"]
    return {p["uuid"]: p["name"] for p in found}


def test_reset_empties_the_lab_and_its_traces_in_placement_then_up_works_again(lab):
    tally_lab(lab, "up")
    providers = lab_providers(lab)
    consumers = [s["id"] for s in lab.compute.get("/servers", {"all_tenants": "1"})["servers"]]
    # faults that leave an orphan, a double allocation, and a provider whose service is gone
    for kind in ("delete-while-down", "migration-error", "service-delete"):
        report = json.loads(tally_lab(lab, "break", kind, "-f", "json"))
        consumers += [c["consumer"] for c in report["held"]]
    assert len(lab_providers(lab)) == 2  # service-delete left its provider in Placement
    assert set(providers) <= set(providers_in_placement(lab))
    lab.compute.post("/flavors", {"flavor": {"name": "extra", "vcpus": 1, "ram": 64, "disk": 1}})

    done = json.loads(tally_lab(lab, "reset", "-f", "json"))
    assert (done["servers"], done["migrations"], done["hosts"], done["flavors"]) == (6, 1, 2, 5)
    assert sorted(done["providers_deleted"]) == sorted(providers)
    assert set(done["consumers_released"]) == set(consumers)

    status = json.loads(tally_lab(lab, "status", "-f", "json"))
    assert (status["hosts"], status["servers"], status["migrations"]) == (0, 0, {})
    assert lab.compute.get("/flavors")["flavors"] == []
    assert lab.compute.get("/os-services")["services"] == []
    assert lab.compute.get("/servers", {"all_tenants": "1", "deleted": "true"})["servers"] == []
    assert not set(providers) & set(providers_in_placement(lab))
    for consumer in consumers:
        assert lab.held(consumer) == {}

    out = tally_lab(lab, "up")
    assert "Lab up: 3 hosts, 6 servers." in out
    again = lab_providers(lab)
    assert sorted(again.values()) == ["lab-compute-1", "lab-compute-2", "lab-compute-3"]
    assert not set(again) & set(providers)  # new providers, named as before
    assert {providers_in_placement(lab)[rp] for rp in again} == set(again.values())
    usage = [lab.placement.usages(rp).get("VCPU", 0) for rp in again]
    assert sorted(usage) == [2, 2, 2]


def test_reset_says_what_it_did_and_leaves_what_the_lab_did_not_create(lab):
    tally_lab(lab, "up", "--hosts", "2", "--servers", "2")
    mine = new_uuid()
    lab.placement.post("/resource_providers", {"name": "compute-by-hand", "uuid": mine})
    lab.placement.put_inventories(mine, 0, {"VCPU": {"total": 8}})
    owner = new_uuid()
    lab.placement.put(
        f"/allocations/{owner}",
        {
            "allocations": {mine: {"resources": {"VCPU": 2}}},
            "project_id": "demo",
            "user_id": "alice",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    out = tally_lab(lab, "reset")
    assert out == (
        "Lab reset: removed 2 servers, 0 migrations, 2 hosts and 4 flavors; in Placement, "
        "released 2 consumers and deleted 2 resource providers.\n"
    )
    assert providers_in_placement(lab) == {mine: "compute-by-hand"}
    assert lab.held(owner) == {mine: {"VCPU": 2}}
    assert tally_lab(lab, "reset").startswith("Lab reset: removed 0 servers")  # idempotent


def test_reset_is_refused_while_a_consumer_the_lab_did_not_create_holds_a_lab_host(lab):
    tally_lab(lab, "up", "--hosts", "2", "--servers", "2")
    rp, name = next(iter(lab_providers(lab).items()))
    stranger = new_uuid()
    lab.placement.put(
        f"/allocations/{stranger}",
        {
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": "demo",
            "user_id": "alice",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    out = tally_lab(lab, "reset", code=1)
    assert "Reset refused, nothing was changed" in out
    assert f"{name} ({rp}): {stranger}" in out
    status = json.loads(tally_lab(lab, "status", "-f", "json"))
    assert (status["hosts"], status["hosts_down"], status["servers"]) == (2, 0, 2)
    assert rp in providers_in_placement(lab)
    assert sum(lab.placement.usages(r).get("VCPU", 0) for r in lab_providers(lab)) == 3

    lab.placement.delete(f"/allocations/{stranger}")
    tally_lab(lab, "reset")
    assert providers_in_placement(lab) == {}


def test_reset_is_for_administrators(lab):
    tally_lab(lab, "up", "--hosts", "1", "--servers", "1")
    with pytest.raises(ComputeError) as caught:
        lab.compute_as("alice:admin").post("/os-lab/reset")
    assert caught.value.status == 403
    assert json.loads(tally_lab(lab, "status", "-f", "json"))["servers"] == 1
