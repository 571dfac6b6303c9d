"""The capacity fill (`tally.nova.fill`) on hand-made GET /allocation_candidates answers.

host-a (VCPU 16, 2 used; MEMORY_MB 8192)            a flat host
host-n (MEMORY_MB 10240)                            a nested host
  numa-0 (VCPU 4)   numa-1 (VCPU 6)
host-b (VCPU 8)   host-c (VCPU 8, DISK_GB 40)       in aggregate AGG with
shared (DISK_GB 100, MISC_SHARES_VIA_AGGREGATE)     the sharing provider
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

from tally.nova import fill as nova_fill
from tally.nova.fill import HostFit, fill

SHARES = nova_fill.SHARING_TRAIT


def summary(root: str | None = None, traits=(), **resources: tuple[int, int]) -> dict:
    """A provider summary: CLASS=(capacity, used)."""
    return {
        "resources": {rc: {"capacity": c, "used": u} for rc, (c, u) in resources.items()},
        "traits": list(traits),
        "root_provider_uuid": root,
    }


def answer(requests: list[dict], summaries: dict) -> dict:
    return {
        "allocation_requests": [
            {"allocations": {rp: {"resources": r} for rp, r in request.items()}}
            for request in requests
        ],
        "provider_summaries": summaries,
    }


def claim_until_refused(found: dict) -> tuple[int, dict[str, int]]:
    """The brute force on a static answer: claim the first candidate that still
    fits, again and again, as a server keeping its order would offer them."""
    room = nova_fill.room_of(found)
    requests = nova_fill.allocation_requests(found)
    total, hosts = 0, {}
    while True:
        for request in requests:
            if all(room[(rp, rc)] >= n for rp, r in request.items() for rc, n in r.items()):
                break
        else:
            return total, hosts
        for rp, r in request.items():
            for rc, n in r.items():
                room[(rp, rc)] -= n
        host = nova_fill.host_of(request, found["provider_summaries"])
        hosts[host] = hosts.get(host, 0) + 1
        total += 1


def test_flat_host_fills_to_the_class_that_runs_out():
    found = answer(
        [{"host-a": {"VCPU": 4, "MEMORY_MB": 1024}}],
        {"host-a": summary("host-a", VCPU=(16, 2), MEMORY_MB=(8192, 0))},
    )
    filled = fill(found)
    assert filled.total == 3  # 14 VCPU free: 3 of 4; memory would take 8
    assert filled.hosts == (HostFit("host-a", 3, (("host-a", "VCPU"),)),)
    assert filled.room == {("host-a", "VCPU"): 2, ("host-a", "MEMORY_MB"): 5120}


def test_capacity_is_the_summary_s_reserved_and_ratio_already_applied():
    # total 8, reserved 2, ratio 1.5: the server reports capacity 9; 7 used
    found = answer([{"host-a": {"VCPU": 1}}], {"host-a": summary("host-a", VCPU=(9, 7))})
    assert fill(found).total == 2


def test_a_provider_over_capacity_fits_none_rather_than_a_negative_count():
    found = answer([{"host-a": {"VCPU": 1}}], {"host-a": summary("host-a", VCPU=(4, 6))})
    filled = fill(found)
    assert filled.total == 0
    assert filled.hosts[0].limiting == (("host-a", "VCPU"),)


def test_amounts_on_a_step_size_leave_the_remainder_unused():
    # DISK_GB step 10: the server only lists it for multiples of 10
    found = answer([{"host-c": {"DISK_GB": 10}}], {"host-c": summary("host-c", DISK_GB=(45, 0))})
    filled = fill(found)
    assert (filled.total, filled.room[("host-c", "DISK_GB")]) == (4, 5)


def test_nested_tree_counts_on_its_root_with_every_limiting_class():
    summaries = {
        "host-n": summary("host-n", MEMORY_MB=(10240, 0)),
        "numa-0": summary("host-n", VCPU=(4, 0)),
        "numa-1": summary("host-n", VCPU=(6, 0)),
    }
    found = answer(
        [
            {"numa-0": {"VCPU": 2}, "host-n": {"MEMORY_MB": 2048}},
            {"numa-1": {"VCPU": 2}, "host-n": {"MEMORY_MB": 2048}},
        ],
        summaries,
    )
    filled = fill(found)
    assert [p.count for p in filled.candidates] == [2, 3]  # memory shared by both
    assert filled.total == 5
    assert filled.hosts == (
        HostFit(
            "host-n",
            5,
            (("numa-0", "VCPU"), ("host-n", "MEMORY_MB"), ("numa-1", "VCPU")),
        ),
    )
    assert claim_until_refused(found) == (5, {"host-n": 5})


def sharing_world() -> dict:
    summaries = {
        "host-b": summary("host-b", VCPU=(8, 0)),
        "host-c": summary("host-c", VCPU=(8, 0), DISK_GB=(40, 0)),
        "shared": summary("shared", traits=[SHARES], DISK_GB=(100, 20)),
    }
    return answer(
        [
            {"host-b": {"VCPU": 1}, "shared": {"DISK_GB": 20}},
            {"host-c": {"VCPU": 1, "DISK_GB": 20}},
            {"host-c": {"VCPU": 1}, "shared": {"DISK_GB": 20}},
        ],
        summaries,
    )


def test_sharing_provider_is_filled_in_the_answer_s_order():
    filled = fill(sharing_world())
    # host-b takes all 80 GB of the shared disk (4); host-c its own 40 (2), then none
    assert [p.count for p in filled.candidates] == [4, 2, 0]
    assert filled.total == 6
    by_host = {h.uuid: h for h in filled.hosts}
    assert by_host["host-b"].fits == 4
    assert by_host["host-b"].limiting == (("shared", "DISK_GB"),)
    assert by_host["host-c"].limiting == (("host-c", "DISK_GB"), ("shared", "DISK_GB"))
    assert claim_until_refused(sharing_world()) == (6, {"host-b": 4, "host-c": 2})


def test_a_candidate_of_sharing_providers_alone_counts_on_the_sharing_provider():
    found = answer(
        [{"shared": {"DISK_GB": 30}}],
        {"shared": summary("shared", traits=[SHARES], DISK_GB=(100, 0))},
    )
    assert fill(found).hosts == (HostFit("shared", 3, (("shared", "DISK_GB"),)),)


def test_answers_before_1_12_and_1_29_are_read_too():
    found = {
        "allocation_requests": [
            {"allocations": [{"resource_provider": {"uuid": "old"}, "resources": {"VCPU": 2}}]}
        ],
        "provider_summaries": {"old": {"resources": {"VCPU": {"capacity": 7, "used": 0}}}},
    }
    assert fill(found).hosts == (HostFit("old", 3, (("old", "VCPU"),)),)


def test_an_empty_answer_fits_nothing():
    filled = fill({"allocation_requests": [], "provider_summaries": {}})
    assert (filled.total, filled.hosts, filled.candidates) == (0, (), ())


def test_by_aggregate_sums_hosts_of_each_aggregate():
    hosts = [HostFit("a", 3, ()), HostFit("b", 4, ()), HostFit("c", 5, ())]
    rows = nova_fill.by_aggregate(hosts, {"a": ["agg-1"], "b": ["agg-1", "agg-2"], "c": []})
    assert [(r.aggregate, r.hosts, r.fits) for r in rows] == [
        ("agg-1", ("a", "b"), 7),
        ("agg-2", ("b",), 4),
        (None, ("c",), 5),
    ]


def test_the_fill_matches_claiming_first_candidates_on_random_static_answers():
    """The closed form (each candidate as often as it fits, once) against the
    loop that claims one instance at a time."""
    rng = random.Random(7)
    for _ in range(200):
        providers = [f"rp{i}" for i in range(rng.randint(1, 5))]
        classes = ["VCPU", "MEMORY_MB", "DISK_GB"]
        summaries = {
            rp: summary(
                rp,
                traits=[SHARES] if rng.random() < 0.2 else [],
                **{rc: (rng.randint(0, 30), rng.randint(0, 10)) for rc in classes},
            )
            for rp in providers
        }
        requests = []
        for _ in range(rng.randint(1, 6)):
            shape = {rc: rng.randint(1, 5) for rc in rng.sample(classes, rng.randint(1, 3))}
            request: dict[str, dict[str, int]] = {}
            for rc, n in shape.items():
                request.setdefault(rng.choice(providers), {})[rc] = n
            requests.append(request)
        found = answer(requests, summaries)
        total, hosts = claim_until_refused(found)
        filled = fill(found)
        assert filled.total == total
        assert {h.uuid: h.fits for h in filled.hosts if h.fits} == hosts


def test_the_fill_module_stands_alone():
    """Plain data in and out: the server may use it without the clients or HTTP (it
    reads allocations by Placement's one rule, tally.amounts: plain arithmetic too)."""
    tree = ast.parse(Path(nova_fill.__file__).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert {name for name in imported if name and name.startswith(("tally", "httpx"))} == {
        "tally.amounts"
    }
