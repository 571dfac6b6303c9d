"""`tally.nova.scheduling.place`: the one rule the lab's scheduler, `tally drain`'s
plan check and `tally drain --what-if` place servers with, over a candidates answer
written out here (1.29+ form: roots and traits in the summaries).

    A (16 GB free)   B (16 GB free)   C (32 GB free: no compute service usable)
    T (root, 8 GB) -- T-gpu (VGPU 1)
"""

from __future__ import annotations

from typing import Any

from tally.nova import scheduling

HOSTS = {"A": "host-a", "B": "host-b", "T": "host-t"}  # provider -> host name (C: none)


def summary(root: str, **free: int) -> dict[str, Any]:
    return {
        "resources": {rc: {"capacity": n + 1, "used": 1} for rc, n in free.items()},
        "root_provider_uuid": root,
        "traits": [],
    }


def answer(*requests: dict[str, dict[str, int]], **summaries: dict[str, Any]) -> dict:
    return {
        "allocation_requests": [
            {"allocations": {rp: {"resources": r} for rp, r in request.items()}}
            for request in requests
        ],
        "provider_summaries": summaries,
    }


SMALL = {"VCPU": 1, "MEMORY_MB": 4096}
FLAT = answer(
    {"C": SMALL},
    {"B": SMALL},
    {"A": SMALL},
    A=summary("A", VCPU=4, MEMORY_MB=16384),
    B=summary("B", VCPU=4, MEMORY_MB=16384),
    C=summary("C", VCPU=4, MEMORY_MB=32768),
)


def hosts_of(picks: list[scheduling.Pick]) -> list[str]:
    return [p.host for p in picks]


def test_the_most_free_memory_first_ties_by_name_and_only_usable_hosts():
    # C has the most free memory but is no host the scheduler may use
    assert hosts_of(scheduling.place(FLAT, HOSTS)) == ["A"]
    assert hosts_of(scheduling.place(FLAT, HOSTS, exclude=["A"])) == ["B"]
    assert scheduling.place(FLAT, {}) == []


def test_servers_one_after_another_spread_on_the_room_each_leaves():
    # A, then B (A has less free now), then A (a tie again: by name), until none fits
    placed = scheduling.place(FLAT, HOSTS, count=9)
    assert hosts_of(placed) == ["A", "B"] * 4
    assert placed[0].allocations == {"A": SMALL}


def test_what_was_taken_since_the_answer_is_room_no_more():
    taken = {"A": {"MEMORY_MB": 8192}}
    assert hosts_of(scheduling.place(FLAT, HOSTS, taken=taken)) == ["B"]
    full = {"A": {"VCPU": 4}, "B": {"MEMORY_MB": 16384}}
    assert scheduling.place(FLAT, HOSTS, taken=full) == []


def test_a_tree_is_one_host_its_children_counted_with_it():
    gpu = {"T": SMALL, "T-gpu": {"VGPU": 1}}
    tree = answer(
        gpu,
        T=summary("T", VCPU=4, MEMORY_MB=8192),
        **{"T-gpu": summary("T", VGPU=1)},
    )
    (pick,) = scheduling.place(tree, HOSTS, count=2)  # one VGPU: room for one
    assert (pick.host, pick.allocations) == ("T", gpu)
    assert scheduling.place(tree, HOSTS, taken={"T-gpu": {"VGPU": 1}}) == []
