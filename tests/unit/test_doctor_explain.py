"""The explain plan, heal's flavor rule and the candidates judge, without a server."""

from __future__ import annotations

import httpx
import pytest

from tally.clients.placement import PlacementClient
from tally.doctor import audit, candidates, heal
from tally.doctor.explain import RESERVED_WARNING, plan
from tally.doctor.inventory_check import ClassChange, InventoryCheck, Suggestion

RP = "rp-1"


def refused(capacity_asked: int = 0, used: int = 3) -> InventoryCheck:
    change = ClassChange("VCPU", used, 16, capacity_asked, refused=True, total_asked=16)
    reserve = Suggestion("reserve at most 13 VCPU", f"tally provider inventory set {RP} --amend")
    return InventoryCheck(RP, "cmp-1", 4, (change,), (reserve,))


def finding(consumer: str, kind: str, **extra) -> audit.Finding:
    return audit.Finding(consumer, kind, {RP: {"VCPU": 1}}, "why", **extra)


def test_the_plan_settles_moves_then_frees_then_reserves():
    report = audit.Audit(
        consumers=(
            finding("m1", audit.MIGRATING, server="s1", migration_status="running", migration_id=9),
            finding("m2", audit.MIGRATING, server="s2", migration_status="finished"),
            finding("o", audit.ORPHAN),
            finding("x", audit.STALE_MIGRATION, server="s3"),
            finding("s4", audit.LIVE, server="s4", host="cmp-1"),
        ),
        providers={RP: "cmp-1"},
        provider=RP,
    )
    steps = plan(refused(), report, RP)
    commands = [s.command for s in steps]
    assert commands[:3] == [
        "openstack server migration abort s1 9",
        "openstack server resize confirm s2",
        f"tally audit --provider {RP} --delete --apply",
    ]
    assert "2 consumer(s)" in steps[2].text and "orphan, stale-migration" in steps[2].text
    assert steps[3].command == "tally drain HOST"  # live s4 and the moves still hold 3 > 0
    assert steps[-1].text.endswith(RESERVED_WARNING)


def test_no_drain_step_when_cleanup_is_enough():
    report = audit.Audit((finding("o", audit.ORPHAN),), {RP: "cmp-1"}, provider=RP)
    commands = [s.command for s in plan(refused(capacity_asked=2), report, RP)]
    assert "tally drain HOST" not in commands


def test_flavor_resources_follow_nova():
    flavor = {
        "vcpus": 2,
        "ram": 4096,
        "disk": 20,
        "ephemeral": 5,
        "swap": 1500,
        "extra_specs": {"resources:VCPU": "0", "resources:CUSTOM_PMEM": "1", "hw:x": "y"},
    }
    assert heal.flavor_resources(flavor) == {"MEMORY_MB": 4096, "DISK_GB": 27, "CUSTOM_PMEM": 1}


def test_candidate_resources_parse():
    assert candidates.parse_resources("VCPU:4, MEMORY_MB:8192") == {"VCPU": 4, "MEMORY_MB": 8192}
    for bad in ("", "VCPU=4", "VCPU:four"):
        with pytest.raises(ValueError):
            candidates.parse_resources(bad)


def test_candidates_judge_units_traits_and_aggregates():
    inventories = {
        "root": {"VCPU": {"total": 8, "max_unit": 2, "allocation_ratio": 1.0}},
        "child": {"MEMORY_MB": {"total": 4096, "step_size": 1000, "allocation_ratio": 1.0}},
    }

    def handle(request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        if parts == [""]:
            return httpx.Response(200, json={"versions": [{"max_version": "1.39"}]})
        rp, what = parts[1], parts[2]
        body = {
            "inventories": {"inventories": inventories[rp]},
            "usages": {"usages": {"VCPU": 7} if rp == "root" else {}},
            "traits": {"traits": ["HW_CPU_X86_AVX2"] if rp == "child" else []},
            "aggregates": {"aggregates": ["agg-1"]},
        }[what]
        return httpx.Response(200, json=body)

    client = PlacementClient("http://p", transport=httpx.MockTransport(handle))
    members = [{"uuid": "root"}, {"uuid": "child"}]
    reasons, shortfall = candidates._judge(
        client,
        "root",
        members,
        {"VCPU": 1, "MEMORY_MB": 2048},
        ["HW_CPU_X86_AVX2", "!CUSTOM_SLOW"],
        ["in:agg-1,agg-2"],
    )
    assert reasons == ["capacity MEMORY_MB: 4096 free of 2048 asked"]  # step_size 1000
    reasons, _ = candidates._judge(client, "root", members, {"VCPU": 2}, ["CUSTOM_X"], ["agg-9"])
    assert reasons == [
        "capacity VCPU: 1 free of 2 asked",
        "traits: CUSTOM_X",
        "aggregates: not a member of agg-9",
    ]
    assert shortfall == 0.0
