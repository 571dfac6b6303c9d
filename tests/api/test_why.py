"""GET /tally/v1/allocation_candidates/why against the brute-force judge of
tests/api/why_judge.py (written from the API's own state alone): on seeded random
clouds of hosts with devices as child providers and sharing providers, and seeded
random queries of the whole 1.39 grammar, every constraint rules out exactly the
trees the judge says, no tree the search fits, and the closest misses are the
judge's; the trees it says fit are those of the answer."""

from __future__ import annotations

import random
import urllib.parse
import uuid as uuidlib

import pytest

from tally.placement.ledger.candidates import Index
from tests.api.test_candidates import Cloud
from tests.api.why_judge import SHARING, Books, check, why
from tests.conftest import empty_database

CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB", "SRIOV_NET_VF", "CUSTOM_GPU")
TRAITS = ("HW_CPU_X86_AVX2", "CUSTOM_FAST", "CUSTOM_SLOW", "HW_NUMA_ROOT", "CUSTOM_PHYSNET1")
AGGS = [str(uuidlib.UUID(int=n + 1)) for n in range(4)]


def build(client, rng: random.Random) -> Cloud:  # noqa: ANN001
    """Hosts (some with NUMA children and a device under one), some used, and
    sharing providers of disk in some aggregates (hosts and a few NUMA children)."""
    cloud = Cloud(client)
    assert client.simulate_put("/resource_classes/CUSTOM_GPU").status_code in (201, 204)
    for trait in TRAITS:  # every name a query may use exists: an unknown one is a 400
        if trait.startswith("CUSTOM_"):
            assert client.simulate_put(f"/traits/{trait}").status_code in (201, 204)
    for h in range(rng.randint(5, 9)):
        host = f"h{h}"
        cloud.provider(
            host,
            inventory={"VCPU": rng.choice([4, 8, 16]), "MEMORY_MB": rng.choice([2048, 8192])}
            | ({"DISK_GB": rng.choice([50, 200])} if rng.random() < 0.6 else {}),
            traits=rng.sample(TRAITS[:3], rng.randint(0, 2)),
            aggs=rng.sample(AGGS, rng.randint(0, 2)),
        )
        if rng.random() < 0.5:
            for n in range(2):
                cloud.provider(
                    f"{host}n{n}",
                    host,
                    {"VCPU": 4, "MEMORY_MB": 4096},
                    traits=["HW_NUMA_ROOT"],
                    aggs=rng.sample(AGGS, 1) if rng.random() < 0.2 else (),  # (not the root's)
                )
            device = {"SRIOV_NET_VF": 8} if rng.random() < 0.5 else {"CUSTOM_GPU": 1}
            cloud.provider(f"{host}d", f"{host}n0", device, traits=["CUSTOM_PHYSNET1"])
        if rng.random() < 0.5:
            cloud.allocate(host, VCPU=rng.choice([2, 4]), MEMORY_MB=1024)
    for s in range(rng.randint(0, 2)):
        cloud.provider(
            f"ss{s}",
            inventory={"DISK_GB": rng.choice([100, 1000])},
            traits=[SHARING],
            aggs=rng.sample(AGGS, rng.randint(1, 2)),
        )
    return cloud


def random_query(rng: random.Random, uuids: list[str]) -> str:
    params: list[tuple[str, str]] = []
    suffixes = [""] if rng.random() < 0.7 else []
    suffixes += [str(n) for n in range(1, rng.randint(1, 3))] or ([] if suffixes else ["1"])
    numbered = [s for s in suffixes if s]
    resourceless = []  # (a group without resources is refused unless in a same_subtree)
    for s in suffixes:
        fewest = 0 if len(numbered) > 1 and s not in ("", suffixes[0]) else 1
        picked = rng.sample(CLASSES, rng.randint(fewest, 2))
        if not picked:
            resourceless.append(s)
        if picked:
            amounts = [f"{rc}:{rng.choice([1, 2, 4, 8, 16, 4096, 100])}" for rc in picked]
            params.append((f"resources{s}", ",".join(amounts)))
        if rng.random() < 0.4 or not picked:
            trait = rng.choice(TRAITS)
            if rng.random() < 0.3:
                trait = "in:" + ",".join(rng.sample(TRAITS, 2))
            elif rng.random() < 0.3:
                trait = "!" + trait
            params.append((f"required{s}", trait))
        if rng.random() < 0.25:
            agg = rng.choice(AGGS)
            spelled = rng.choice([agg, "in:" + ",".join(rng.sample(AGGS, 2)), "!" + agg])
            params.append((f"member_of{s}", spelled))
        if rng.random() < 0.1:
            params.append((f"in_tree{s}", rng.choice(uuids)))
    if rng.random() < 0.2:
        params.append(("root_required", rng.choice(["HW_CPU_X86_AVX2", "!CUSTOM_SLOW"])))
    if len(suffixes) > 1 or (suffixes and suffixes[0]):
        params.append(("group_policy", rng.choice(["none", "isolate"])))
    if len(numbered) > 1 and (resourceless or rng.random() < 0.3):
        params.append(("same_subtree", ",".join(numbered)))
    return urllib.parse.urlencode(params, safe=":,!")


@pytest.mark.parametrize("seed", range(4))
def test_each_constraint_rules_out_what_a_brute_force_judge_says(api, engine, seed):
    rng = random.Random(seed)
    client = api("1.39")
    build(client, rng)
    books = Books(client)
    index = Index()
    empty = sum(
        not check(client, engine, index, books, random_query(rng, sorted(books.root))).requests
        for _ in range(70)
    )
    assert empty >= 5, empty  # enough empty answers among them


@pytest.mark.slow
def test_a_thousand_empty_answers_explained_exactly(sqlite_engine, make_client):
    """The corpus: seeded clouds and queries until 1,000 answers were empty (on
    SQLite: the other backends run the test above)."""
    empty = queries = 0
    for seed in range(100, 200):
        rng = random.Random(seed)
        client = make_client("1.39")
        build(client, rng)
        books = Books(client)
        index = Index()
        for _ in range(150):
            queries += 1
            query = random_query(rng, sorted(books.root))
            empty += not check(client, sqlite_engine, index, books, query).requests
        if empty >= 1000:
            break
        empty_database(sqlite_engine)  # the next cloud on an empty database
    print(f"{queries} queries, {empty} empty answers explained")
    assert empty >= 1000, (queries, empty)


def test_a_verdict_is_worked_out_again_once_anything_changed(api):
    """(The index keeps a request shape's verdict until its next catch-up.)"""
    client = api("1.39")
    cloud = Cloud(client)
    cloud.provider("cn1", inventory={"VCPU": 4})
    first = why(client, "resources=VCPU:8")
    assert (first["fits"], first["constraints"][0]["rules_out"]) == (0, 1)
    assert why(client, "resources=VCPU:8") == first
    cloud.provider("cn2", inventory={"VCPU": 16})
    again = why(client, "resources=VCPU:8")
    assert (again["trees"], again["fits"], again["candidates"]) == (2, 1, 1)


def test_a_forbidden_aggregate_on_a_child_rules_out_only_that_child(api):
    """Upstream leaves out a provider in the aggregate or under a root in it: the
    tree of a NUMA node in it still fits by its other node (bug 1792503's fixture)."""
    client = api("1.39")
    cloud = Cloud(client)
    cloud.provider("cn1")
    cloud.provider("numa1_1", "cn1", {"VCPU": 4}, aggs=[AGGS[0]])
    cloud.provider("numa1_2", "cn1", {"VCPU": 4})
    cloud.provider("cn2", aggs=[AGGS[0]])
    cloud.provider("numa2_1", "cn2", {"VCPU": 4})
    shown = why(client, f"resources=VCPU:1&member_of=!{AGGS[0]}")
    assert (shown["trees"], shown["fits"], shown["candidates"]) == (2, 1, 1)
    assert shown["constraints"][1]["constraint"] == f"member_of=!{AGGS[0]}"
    assert shown["constraints"][1]["rules_out"] == 1  # cn2's, by its root
    assert [m["name"] for m in shown["closest"]] == ["cn2"]
