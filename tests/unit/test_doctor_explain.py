"""The flavor rule and the candidates judge, without a server (the explain plan is
tested end to end per fault in tests/lab/test_doctor_plans.py)."""

from __future__ import annotations

import httpx

from tally.clients.placement import PlacementClient
from tally.doctor import candidates
from tally.nova.flavors import claimed_resources

FLAVOR = {
    "vcpus": 2,
    "ram": 4096,
    "disk": 20,
    "ephemeral": 5,
    "swap": 1500,
    "extra_specs": {"resources:VCPU": "0", "resources:CUSTOM_PMEM": "1", "hw:x": "y"},
}


def test_flavor_resources_follow_nova():
    # DISK_GB 20 root + 5 ephemeral + 1500 MB swap rounded up to 2 GB; VCPU removed
    assert claimed_resources(FLAVOR) == {"MEMORY_MB": 4096, "DISK_GB": 27, "CUSTOM_PMEM": 1}


def test_a_server_booted_from_a_volume_claims_no_root_disk():
    assert claimed_resources(FLAVOR, volume_backed=True)["DISK_GB"] == 7  # ephemeral + swap
    rootless = {"vcpus": 1, "ram": 512, "disk": 10}
    assert claimed_resources(rootless, volume_backed=True) == {"VCPU": 1, "MEMORY_MB": 512}
    pinned = {**rootless, "extra_specs": {"resources:DISK_GB": "3"}}  # an extra spec still wins
    assert claimed_resources(pinned, volume_backed=True)["DISK_GB"] == 3


def with_specs(**specs: str) -> dict:
    return {"vcpus": 4, "ram": 1024, "disk": 10, "extra_specs": specs}


def test_numbered_groups_add_up_and_fill_no_class_twice():
    flavor = with_specs(**{"resources1:VCPU": "1", "resources_net:VCPU": "2"})
    assert claimed_resources(flavor) == {"VCPU": 3, "MEMORY_MB": 1024, "DISK_GB": 10}
    flavor = with_specs(**{"resources1:SRIOV_NET_VF": "2", "resources:SRIOV_NET_VF": "1"})
    assert claimed_resources(flavor)["SRIOV_NET_VF"] == 3
    assert claimed_resources(flavor, numbered=False)["SRIOV_NET_VF"] == 1  # one query's group
    # PCPU asked: the flavor's vcpus are not added as VCPU
    pinned = claimed_resources(with_specs(**{"resources:PCPU": "4"}))
    assert pinned == {"PCPU": 4, "MEMORY_MB": 1024, "DISK_GB": 10}


def test_dedicated_and_mixed_cpu_policies_ask_pcpu():
    base = {"MEMORY_MB": 1024, "DISK_GB": 10}
    assert claimed_resources(with_specs(**{"hw:cpu_policy": "dedicated"})) == {"PCPU": 4, **base}
    isolate = {"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "isolate"}
    assert claimed_resources(with_specs(**isolate)) == {"PCPU": 5, **base}
    assert claimed_resources(with_specs(**{"hw:cpu_policy": "shared"}))["VCPU"] == 4
    for mask, pcpu in (("^0", 3), ("2-3", 2), ("0-3,^1", 3), ("1", 1)):
        mixed = {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": mask}
        assert claimed_resources(with_specs(**mixed)) == {"VCPU": 4 - pcpu, "PCPU": pcpu, **base}
    realtime = {"hw:cpu_policy": "mixed", "hw:cpu_realtime": "yes", "hw:cpu_realtime_mask": "^0"}
    assert claimed_resources(with_specs(**realtime))["PCPU"] == 3


def test_memory_encryption_persistent_memory_and_bad_specs():
    flavor = with_specs(**{"hw:mem_encryption": "True", "hw:pmem": "4GB,4GB, SMALL"})
    assert claimed_resources(flavor) == {
        "VCPU": 4,
        "MEMORY_MB": 1024,
        "DISK_GB": 10,
        "MEM_ENCRYPTION_CONTEXT": 1,
        "CUSTOM_PMEM_NAMESPACE_4GB": 2,
        "CUSTOM_PMEM_NAMESPACE_SMALL": 1,
    }
    # what Nova ignores (with a warning) is ignored here too
    ignored = {"resources:NOT_A_CLASS": "1", "resources:VCPU": "two", "resources:DISK_GB": "-1"}
    assert claimed_resources(with_specs(**ignored)) == claimed_resources(with_specs())


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
