"""Differential: random 1.39 `GET /allocation_candidates` queries asked of a worker
that searches its in-memory index and of one that searches the database (the
SQL path), on random nested clouds, must get the same answer: the same status,
and the same body (allocation requests in the same order, provider summaries).

Each cloud is built in two halves with the index warmed between them, and some
providers of the first half are deleted and created again (the same uuid, name
and parent, or another parent): the index answers from what it caught up
through the journal, as a long-running worker does. Seeds are fixed: the same
clouds and queries on every run (CLOUDS x QUERIES requests to each worker).
"""

from __future__ import annotations

import random
import uuid as uuidlib
from pathlib import Path

import pytest

from tally.config import Settings
from tally.db.engine import make_engine
from tally.placement.app import create_app
from tally.placement.ledger.bootstrap import prepare_database
from tests.conftest import PlacementClient

CLOUDS = 10
QUERIES = 80
AGGS = [str(uuidlib.UUID(int=0x900 + i)) for i in range(3)]
TRAITS = ["HW_CPU_X86_AVX2", "HW_NUMA_ROOT", "CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B", "CUSTOM_SSD"]
SHARES = "MISC_SHARES_VIA_AGGREGATE"
AMOUNTS = {
    "VCPU": (1, 2, 4),
    "MEMORY_MB": (512, 2048),
    "DISK_GB": (10, 100),
    "SRIOV_NET_VF": (1, 2),
}


class Cloud:
    """A random nested cloud made through the API: compute nodes with NUMA
    children and their network devices, and sharing disk providers."""

    def __init__(self, api: PlacementClient, rng: random.Random) -> None:
        self.api, self.rng = api, rng
        self.providers: dict[str, str | None] = {}  # uuid -> parent
        self.names: dict[str, str] = {}
        self.inventories: dict[str, dict] = {}

    def _ok(self, resp, *allowed: int) -> None:  # noqa: ANN001
        assert resp.status_code < 300 or resp.status_code in allowed, resp.text

    def _uuid(self) -> str:
        return str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))

    def provider(self, parent: str | None, inventory: dict, traits: list[str]) -> str:
        uuid = self._uuid()
        self.names[uuid] = f"rp-{len(self.names)}"
        self.make(uuid, parent, inventory, traits)
        return uuid

    def make(self, uuid: str, parent: str | None, inventory: dict, traits: list[str]) -> None:
        body = {"uuid": uuid, "name": self.names[uuid], "parent_provider_uuid": parent}
        self._ok(self.api.simulate_post("/resource_providers", json=body))
        self.providers[uuid] = parent
        self.inventories[uuid] = inventory
        generation = 0
        if inventory:
            body = {"resource_provider_generation": generation, "inventories": inventory}
            self._ok(self.api.simulate_put(f"/resource_providers/{uuid}/inventories", json=body))
            generation += 1
        if traits:
            body = {"resource_provider_generation": generation, "traits": traits}
            self._ok(self.api.simulate_put(f"/resource_providers/{uuid}/traits", json=body))
            generation += 1
        aggs = self.rng.sample(AGGS, self.rng.choice([0, 1, 1, 2]))
        if aggs or SHARES in traits:
            aggs = aggs or [self.rng.choice(AGGS)]
            body = {"resource_provider_generation": generation, "aggregates": aggs}
            self._ok(self.api.simulate_put(f"/resource_providers/{uuid}/aggregates", json=body))

    def _some(self, *traits: str) -> list[str]:
        return [t for t in traits if self.rng.random() < 0.4]

    def _stock(self, **totals: tuple[int, ...]) -> dict:
        found = {}
        for rc, choices in totals.items():
            total = self.rng.choice(choices)
            if total:
                found[rc] = {"total": total, "reserved": self.rng.choice([0, 0, 1])}
                if rc == "VCPU":
                    found[rc]["allocation_ratio"] = self.rng.choice([1.0, 2.0])
        return found

    def compute_node(self) -> None:
        rng = self.rng
        stock = self._stock(VCPU=(0, 4, 8), MEMORY_MB=(0, 4096, 8192), DISK_GB=(0, 0, 200))
        root = self.provider(None, stock, self._some("HW_CPU_X86_AVX2", "CUSTOM_SSD"))
        for _ in range(rng.choice([0, 1, 2, 2, 3])):
            numa = self.provider(
                root,
                self._stock(VCPU=(0, 2, 4), MEMORY_MB=(0, 2048)),
                ["HW_NUMA_ROOT", *self._some("HW_CPU_X86_AVX2")],
            )
            for _ in range(rng.choice([0, 0, 1, 2])):
                physnet = rng.choice(["CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"])
                self.provider(numa, self._stock(SRIOV_NET_VF=(1, 2, 4)), [physnet])

    def sharing(self) -> None:
        stock = self._stock(DISK_GB=(100, 1000), IPV4_ADDRESS=(0, 8))
        self.provider(None, stock, [SHARES, *self._some("CUSTOM_SSD")])

    def claim(self) -> None:
        """Some usage on a random provider (refused claims are skipped)."""
        uuid = self.rng.choice(list(self.providers))
        inventory = self.inventories[uuid]
        if not inventory:
            return
        rc = self.rng.choice(sorted(inventory))
        body = {
            "allocations": {uuid: {"resources": {rc: self.rng.choice(AMOUNTS.get(rc, (1,)))}}},
            "consumer_generation": None,
            "project_id": "p",
            "user_id": "u",
            "consumer_type": "INSTANCE",
        }
        self._ok(self.api.simulate_put(f"/allocations/{self._uuid()}", json=body), 409)

    def made_again(self) -> None:
        """A leaf provider deleted and created again with its uuid and name (under
        its parent, or another provider of the cloud)."""
        parents = set(self.providers.values())
        leaves = [u for u in self.providers if u not in parents]
        uuid = self.rng.choice(leaves)
        if self.api.simulate_delete(f"/resource_providers/{uuid}").status_code != 204:
            return  # it has allocations
        parent = self.providers.pop(uuid)
        if self.rng.random() < 0.3:
            parent = self.rng.choice([None, *self.providers])
        self.make(uuid, parent, self.inventories[uuid], self._some(*TRAITS))

    def build(self, warm: PlacementClient) -> None:
        for _ in range(self.rng.randint(2, 3)):
            self.compute_node()
        self.sharing()
        warm.simulate_get("/allocation_candidates?resources=VCPU:1")  # the index loads
        for _ in range(self.rng.randint(1, 2)):
            self.compute_node()
        if self.rng.random() < 0.7:
            self.sharing()
        for _ in range(self.rng.randint(0, 3)):
            self.made_again()
        for _ in range(self.rng.randint(2, 6)):
            self.claim()


def _resources(rng: random.Random) -> str:
    classes = rng.sample(sorted(AMOUNTS), rng.choice([1, 1, 1, 2]))
    return ",".join(f"{rc}:{rng.choice(AMOUNTS[rc])}" for rc in sorted(classes))


def _traits(rng: random.Random) -> str:
    """One `required` value: traits and forbidden ones, or any of some (`in:`)."""
    pool = [*TRAITS, SHARES]
    if rng.random() < 0.2:
        return "in:" + ",".join(rng.sample(pool, 2))
    return _some_forbidden(rng, pool)


def _some_forbidden(rng: random.Random, pool: list[str]) -> str:
    picked = rng.sample(pool, rng.choice([1, 1, 2]))
    return ",".join(("!" if rng.random() < 0.4 else "") + t for t in picked)


def _aggregates(rng: random.Random) -> str:
    """One `member_of` value: an aggregate, any of some, or forbidden ones."""
    kind = rng.random()
    if kind < 0.3:
        return "in:" + ",".join(rng.sample(AGGS, 2))
    if kind < 0.5:
        return "!" + rng.choice(AGGS)
    if kind < 0.6:
        return "!in:" + ",".join(rng.sample(AGGS, 2))
    return rng.choice(AGGS)


def random_query(rng: random.Random, providers: list[str]) -> str:
    """A 1.39 query: an unsuffixed group and/or granular ones, each with resources
    and maybe traits, aggregates and a tree; group policy, same_subtree,
    root_required and limit now and then."""
    params: list[tuple[str, str]] = []
    suffixes = rng.sample(["1", "2", "3", "_A", "_NET"], rng.choice([0, 1, 1, 2, 2, 3]))
    groups = ([""] if not suffixes or rng.random() < 0.5 else []) + suffixes
    for suffix in groups:
        if suffix == "" or rng.random() < 0.9:
            params.append((f"resources{suffix}", _resources(rng)))
        if rng.random() < 0.3:
            params.append((f"required{suffix}", _traits(rng)))
        if rng.random() < 0.1:
            params.append((f"required{suffix}", _traits(rng)))
        if rng.random() < 0.25:
            params.append((f"member_of{suffix}", _aggregates(rng)))
        if rng.random() < 0.15:
            params.append((f"in_tree{suffix}", rng.choice(providers)))
    if suffixes:
        params.append(("group_policy", rng.choice(["isolate", "none"])))
    if len(suffixes) >= 2 and rng.random() < 0.4:
        params.append(("same_subtree", ",".join(rng.sample(suffixes, 2))))
    if rng.random() < 0.2:
        params.append(("root_required", _some_forbidden(rng, TRAITS)))
    if rng.random() < 0.3:
        params.append(("limit", str(rng.choice([1, 2, 5]))))
    return "&".join(f"{k}={v}" for k, v in params)


@pytest.mark.parametrize("seed", range(CLOUDS))
def test_the_index_and_the_database_answer_alike(tmp_path: Path, seed: int):
    engine = make_engine(f"sqlite:///{tmp_path / 'tally.sqlite'}")
    prepare_database(engine)
    try:
        indexed = PlacementClient(create_app(Settings.of(), engine), "1.39")
        tables = PlacementClient(create_app(Settings.of(candidates_index_max_mb=0), engine), "1.39")
        for trait in TRAITS:
            if trait.startswith("CUSTOM_"):
                indexed.simulate_put(f"/traits/{trait}")
        rng = random.Random(seed)
        cloud = Cloud(indexed, rng)
        cloud.build(indexed)
        answered = 0
        for _ in range(QUERIES):
            query = random_query(rng, list(cloud.providers))
            from_index = indexed.simulate_get(f"/allocation_candidates?{query}")
            from_tables = tables.simulate_get(f"/allocation_candidates?{query}")
            assert from_index.status_code == from_tables.status_code, (query, from_index.text)
            assert from_index.status_code != 500, (query, from_index.text)
            if from_index.status_code == 200:
                assert from_index.json == from_tables.json, query
                answered += bool(from_index.json["allocation_requests"])
            else:
                assert (
                    from_index.json["errors"][0]["detail"]
                    == (from_tables.json["errors"][0]["detail"])
                ), query
        assert answered >= QUERIES // 10  # (the queries find something)
    finally:
        engine.dispose()
