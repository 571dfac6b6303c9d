"""The in-memory candidates index stays exactly the database's answer (the
candidates, and the provider listings it serves too).

Each worker keeps its own index and catches up through the ledger journal. Here
two apps on one database play two workers: every write goes through one of
them at random, and after it both answer every query shape exactly as a search
straight on the tables does (the same candidates and the same summaries).
"""

from __future__ import annotations

import logging
import random
import uuid as uuidlib

import orjson
import pytest
import sqlalchemy as sa

from tally.db import journal
from tally.db import schema as t
from tally.placement.candidate_query import parse_query
from tally.placement.ledger import provider_listing
from tally.placement.ledger.candidates import (
    Index,
    Options,
    candidates_json,
    find_candidates,
    search_in,
    walk,
)
from tally.placement.ledger.provider_filters import ProviderFilter
from tally.placement.ledger.providers import list_provider_parts

SHAPES = [
    "resources=VCPU:1,MEMORY_MB:512",
    "resources=VCPU:2,DISK_GB:10",
    "resources=VCPU:1&required=CUSTOM_FAST",
    "resources=VCPU:1&required=!CUSTOM_FAST",
    "resources=VCPU:1&member_of={agg0}",
    "resources1=VCPU:1&resources2=MEMORY_MB:256&group_policy=isolate",
    "resources=DISK_GB:5&limit=3",
    "resources=VCPU:1&limit=2",
    "resources=VCPU:1,DISK_GB:1&member_of={agg0}&limit=2",
    "resources=VCPU:1,MEMORY_MB:256&required=!CUSTOM_FAST&limit=4",
    "resources1=VCPU:1&resources2=MEMORY_MB:256&group_policy=isolate&limit=2",
    "resources=DISK_GB:1&resources1=VCPU:1&resources2=VCPU:1&group_policy=none&limit=3",
    "resources=VCPU:1&root_required=CUSTOM_FAST",
    "resources=VCPU:1,DISK_GB:1&member_of=in:{agg0},{agg1}",
    "resources=DISK_GB:1&resources_A=VCPU:1&resources_B=MEMORY_MB:256"
    "&same_subtree=_A,_B&group_policy=none",
]
AGGS = [str(uuidlib.UUID(int=i + 1)) for i in range(3)]


def _query(shape: str) -> dict[str, list[str]]:
    params: dict[str, list[str]] = {}
    for part in shape.format(agg0=AGGS[0], agg1=AGGS[1]).split("&"):
        key, _, value = part.partition("=")
        params.setdefault(key, []).append(value)
    return params


def _normal(result) -> tuple:  # noqa: ANN001
    """The answer, in its order (a `limit` takes the first ones: the same must come)."""
    requests = [
        repr(sorted((u, sorted(a["resources"].items())) for u, a in r["allocations"].items()))
        + repr(r["mappings"])
        for r in result.allocation_requests
    ]
    return requests, result.provider_summaries


def _assert_indexes_agree(engine: sa.Engine, indexes: list[Index]) -> None:
    for shape in SHAPES:
        request = parse_query(_query(shape), (1, 39))
        with engine.connect() as conn:
            expected = _normal(search_in(conn, request, Options()))
            body = _body(search_in(conn, request, Options()))
        for index in indexes:
            found = find_candidates(engine, request, Options(), index)
            assert _normal(found) == expected, shape
            # the answer written straight to JSON, from the index's kept summaries:
            # the same bytes as the dicts (the tables may list a summary's classes
            # in another order)
            written = candidates_json(engine, request, Options(), index)
            assert written == _body(found), shape
            assert orjson.loads(written) == orjson.loads(body), shape


LISTINGS = [
    {},
    {"resources": {"VCPU": 1}},
    {"resources": {"VCPU": 2, "DISK_GB": 10}},
    {"resources": {"MEMORY_MB": 512}, "required_traits": [frozenset({"CUSTOM_FAST"})]},
    {"required_traits": [frozenset({"CUSTOM_FAST", "HW_CPU_X86_AVX2"})]},
    {"forbidden_traits": frozenset({"CUSTOM_FAST"})},
    {"member_of": [frozenset({AGGS[0]})]},
    {"member_of": [frozenset(AGGS[:2])], "forbidden_aggregates": frozenset({AGGS[2]})},
    {"forbidden_aggregates": frozenset({AGGS[0]}), "resources": {"DISK_GB": 1}},
]


def _assert_listings_agree(engine: sa.Engine, indexes: list[Index], providers: list[str]) -> None:
    """GET /resource_providers from each index lists what the tables do."""
    shapes = list(LISTINGS)
    if providers:
        shapes += [{"in_tree": providers[0]}, {"in_tree": providers[-1], "resources": {"VCPU": 1}}]
    for shape in shapes:
        wanted = ProviderFilter(**shape)
        expected = list_provider_parts(engine, wanted, _row_text)  # the tables
        for index in indexes:
            # written from rows read by id, then kept: the same both times
            assert list_provider_parts(engine, wanted, _row_text, index) == expected, shape
            assert list_provider_parts(engine, wanted, _row_text, index) == expected, shape


class _RowText:
    """A listing part that is its row as text (the stamp too: a part kept past
    its provider's change shows)."""

    key = "row"

    def __call__(self, row: tuple) -> bytes:
        return repr(row).encode()


_row_text = _RowText()


def _body(result) -> bytes:  # noqa: ANN001
    return orjson.dumps(
        {
            "allocation_requests": result.allocation_requests,
            "provider_summaries": result.provider_summaries,
        }
    )


class Cloud:
    """Random writes through the API of one of several apps."""

    def __init__(self, clients: list, rng: random.Random) -> None:
        self.clients, self.rng = clients, rng
        self.providers: list[str] = []
        self.consumers: list[str] = []

    def api(self):  # noqa: ANN201
        return self.rng.choice(self.clients)

    def _uuid(self) -> str:
        return str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))

    def add_provider(self) -> None:
        rp = self._uuid()
        body: dict = {"name": rp, "uuid": rp}
        if self.providers and self.rng.random() < 0.3:
            body["parent_provider_uuid"] = self.rng.choice(self.providers)
        assert self.api().simulate_post("/resource_providers", json=body).status_code == 200
        self.providers.append(rp)
        self.set_inventory(rp)

    def set_inventory(self, rp: str | None = None) -> None:
        rp = rp or self.rng.choice(self.providers)
        api = self.api()
        gen = api.simulate_get(f"/resource_providers/{rp}").json["generation"]
        inventories = {}
        for rc, top in (("VCPU", 16), ("MEMORY_MB", 4096), ("DISK_GB", 200)):
            if self.rng.random() < 0.7:
                inventories[rc] = {
                    "total": self.rng.randint(1, top),
                    "reserved": self.rng.choice([0, 0, 1]),
                    "allocation_ratio": self.rng.choice([1.0, 1.5, 4.0]),
                }
        resp = api.simulate_put(
            f"/resource_providers/{rp}/inventories",
            json={"resource_provider_generation": gen, "inventories": inventories},
        )
        assert resp.status_code in (200, 409), resp.text  # 409: would strand allocations

    def set_traits(self) -> None:
        rp = self.rng.choice(self.providers)
        api = self.api()
        gen = api.simulate_get(f"/resource_providers/{rp}").json["generation"]
        choices = ["CUSTOM_FAST", "HW_CPU_X86_AVX2", "MISC_SHARES_VIA_AGGREGATE"]
        traits = self.rng.sample(choices, self.rng.randint(0, 2))
        body = {"resource_provider_generation": gen, "traits": traits}
        assert api.simulate_put(f"/resource_providers/{rp}/traits", json=body).status_code == 200

    def set_aggregates(self) -> None:
        rp = self.rng.choice(self.providers)
        api = self.api()
        gen = api.simulate_get(f"/resource_providers/{rp}").json["generation"]
        body = {"resource_provider_generation": gen, "aggregates": self.rng.sample(AGGS, 1)}
        resp = api.simulate_put(f"/resource_providers/{rp}/aggregates", json=body)
        assert resp.status_code == 200

    def claim(self) -> None:
        api = self.api()
        shape = self.rng.choice(SHAPES[:2])
        found = api.simulate_get(f"/allocation_candidates?{shape}").json["allocation_requests"]
        if not found:
            return
        consumer = self._uuid()
        body = {
            "allocations": self.rng.choice(found)["allocations"],
            "consumer_generation": None,
            "project_id": "p",
            "user_id": "u",
            "consumer_type": "INSTANCE",
        }
        resp = api.simulate_put(f"/allocations/{consumer}", json=body)
        assert resp.status_code in (204, 409), resp.text
        if resp.status_code == 204:
            self.consumers.append(consumer)

    def release(self) -> None:
        if self.consumers:
            consumer = self.consumers.pop(self.rng.randrange(len(self.consumers)))
            assert self.api().simulate_delete(f"/allocations/{consumer}").status_code == 204

    def rename_provider(self) -> None:
        rp = self.rng.choice(self.providers)
        body = {"name": f"{rp}-{self.rng.randrange(1000)}"}
        assert self.api().simulate_put(f"/resource_providers/{rp}", json=body).status_code == 200

    def move_provider(self) -> None:
        """Re-parent a provider (or make it a root): its tree's ids change."""
        rp = self.rng.choice(self.providers)
        parent = self.rng.choice([None, *self.providers])
        body = {"name": rp, "parent_provider_uuid": parent}
        resp = self.api().simulate_put(f"/resource_providers/{rp}", json=body)
        assert resp.status_code in (200, 400, 409), resp.text  # 400: into its own subtree

    def delete_provider(self) -> None:
        rp = self.rng.choice(self.providers)
        if self.api().simulate_delete(f"/resource_providers/{rp}").status_code == 204:
            self.providers.remove(rp)  # else it has children or allocations: 409

    def step(self) -> None:
        if len(self.providers) < 4:
            self.add_provider()
            return
        action = self.rng.choice(
            [
                self.add_provider,
                self.set_inventory,
                self.set_traits,
                self.set_aggregates,
                self.claim,
                self.claim,
                self.release,
                self.rename_provider,
                self.move_provider,
                self.delete_provider,
            ]
        )
        action()


@pytest.mark.parametrize(("seed", "writes"), [(1, 1), (2, 1), (3, 1), (4, 3)])
def test_two_workers_answer_as_the_tables_after_every_write(api, engine, seed, writes, monkeypatch):
    """`writes`: the writes between two looks (3: claims and other changes of one
    provider meet in one catch-up)."""
    if seed == 3:  # the tree-by-tree walk of a `limit` gives up at once: the bulk search
        monkeypatch.setattr(walk, "MIN_TREES", 0)
        monkeypatch.setattr(walk, "TREES_PER_CANDIDATE", 0)
    workers = [api("1.39"), api("1.39")]  # writers; the indexes of two more workers read
    indexes = [Index(), Index()]
    assert workers[0].simulate_put("/traits/CUSTOM_FAST").status_code == 201
    cloud = Cloud(workers, random.Random(seed))
    for _ in range(40):
        for _ in range(writes):
            cloud.step()
        _assert_indexes_agree(engine, indexes)
        _assert_listings_agree(engine, indexes, cloud.providers)
    assert all(index.version == indexes[0].version for index in indexes)


def test_a_claim_through_one_worker_shows_in_the_others_next_answer(api):
    one, other = api("1.39"), api("1.39")
    rp = str(uuidlib.uuid4())
    one.simulate_post("/resource_providers", json={"name": "cn", "uuid": rp})
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    one.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory)
    summary = other.simulate_get("/allocation_candidates?resources=VCPU:1").json
    assert summary["provider_summaries"][rp]["resources"]["VCPU"]["used"] == 0
    claim = {
        "allocations": {rp: {"resources": {"VCPU": 3}}},
        "consumer_generation": None,
        "project_id": "p",
        "user_id": "u",
        "consumer_type": "INSTANCE",
    }
    assert one.simulate_put(f"/allocations/{uuidlib.uuid4()}", json=claim).status_code == 204
    after = other.simulate_get("/allocation_candidates?resources=VCPU:1").json
    assert after["provider_summaries"][rp]["resources"]["VCPU"]["used"] == 3
    assert other.simulate_get("/allocation_candidates?resources=VCPU:2").json == {
        "allocation_requests": [],
        "provider_summaries": {},
    }


def test_a_provider_deleted_through_one_worker_never_appears_in_the_other(api):
    one, other = api("1.39"), api("1.39")
    rp = str(uuidlib.uuid4())
    one.simulate_post("/resource_providers", json={"name": "cn", "uuid": rp})
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    one.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory)
    assert (
        rp
        in other.simulate_get("/allocation_candidates?resources=VCPU:1").json["provider_summaries"]
    )
    assert one.simulate_delete(f"/resource_providers/{rp}").status_code == 204
    answer = other.simulate_get("/allocation_candidates?resources=VCPU:1").json
    assert answer["provider_summaries"] == {}


def test_a_new_provider_in_a_deleted_ones_place_shows_its_own_uuid(api):
    """The index keeps candidates of several providers as JSON text; a provider
    deleted (SQLite may give its id to the next one) must not leave its uuid."""
    client = api("1.39")
    root = str(uuidlib.uuid4())
    client.simulate_post("/resource_providers", json={"name": "root", "uuid": root})
    disk = {"resource_provider_generation": 0, "inventories": {"DISK_GB": {"total": 100}}}
    client.simulate_put(f"/resource_providers/{root}/inventories", json=disk)
    query = "/allocation_candidates?resources=VCPU:1,DISK_GB:1"
    for _ in range(2):  # the newest provider goes, another comes in its place
        child = str(uuidlib.uuid4())
        body = {"name": child, "uuid": child, "parent_provider_uuid": root}
        assert client.simulate_post("/resource_providers", json=body).status_code == 200
        cpu = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
        client.simulate_put(f"/resource_providers/{child}/inventories", json=cpu)
        found = client.simulate_get(query).json["allocation_requests"]
        assert [sorted(r["allocations"]) for r in found] == [sorted([root, child])]
        assert sorted(found[0]["mappings"][""]) == sorted([root, child])
        assert client.simulate_delete(f"/resource_providers/{child}").status_code == 204


def test_an_index_behind_a_pruned_journal_reloads_whole(engine, api):
    client = api("1.39")
    index = Index()
    rp = str(uuidlib.uuid4())
    client.simulate_post("/resource_providers", json={"name": "cn", "uuid": rp})
    request = parse_query(_query("resources=VCPU:1"), (1, 39))
    assert find_candidates(engine, request, Options(), index).allocation_requests == []
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    client.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory)
    with engine.begin() as conn:  # as if KEEP changes had passed: the journal has a gap
        conn.execute(t.ledger_changes.delete())
        assert journal.since(conn, index.writers) is None
    found = find_candidates(engine, request, Options(), index)
    assert [list(r["allocations"]) for r in found.allocation_requests] == [[rp]]


def test_past_its_memory_cap_a_worker_searches_the_database(engine, api, caplog):
    client = api("1.39")
    rp = str(uuidlib.uuid4())
    client.simulate_post("/resource_providers", json={"name": "cn", "uuid": rp})
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    client.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory)
    index = Index(max_mb=1)
    index.measure = lambda: 0.0 if index.version is None else 5.0  # the load "took" 5 MiB
    request = parse_query(_query("resources=VCPU:1"), (1, 39))
    with caplog.at_level(logging.WARNING):
        found = find_candidates(engine, request, Options(), index)
    assert not index.enabled
    assert "candidates_index_max_mb=1" in caplog.text
    assert [list(r["allocations"]) for r in found.allocation_requests] == [[rp]]


def test_listing_filters_naming_uuids_in_other_forms_are_left_to_the_database():
    canonical = str(uuidlib.uuid4())
    assert provider_listing.served(ProviderFilter(in_tree=canonical, member_of=[frozenset(AGGS)]))
    assert not provider_listing.served(ProviderFilter(in_tree=canonical.upper()))
    assert not provider_listing.served(ProviderFilter(in_tree=canonical.replace("-", "")))
    assert not provider_listing.served(ProviderFilter(forbidden_aggregates=frozenset({"X" * 32})))
    assert not provider_listing.served(ProviderFilter(name="cn1"))
    assert not provider_listing.served(ProviderFilter(uuid=canonical))


def test_a_provider_deleted_and_made_again_with_its_uuid_is_found_again(api):
    """Issue 37: a compute node's provider deleted and created again with the same
    uuid (nova keeps it on the host). The index held it by uuid alone: the new row
    vanished from `in_tree`, and deleting it again failed every search after."""
    client = api("1.39")
    root, one, two = (str(uuidlib.UUID(int=i)) for i in (11, 12, 13))

    def make(uuid: str, parent: str | None) -> None:
        body = {"name": uuid[-2:], "uuid": uuid, "parent_provider_uuid": parent}
        assert client.simulate_post("/resource_providers", json=body).status_code == 200
        cpu = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
        resp = client.simulate_put(f"/resource_providers/{uuid}/inventories", json=cpu)
        assert resp.status_code == 200, resp.text

    def count(query: str) -> int:
        resp = client.simulate_get(f"/allocation_candidates?resources=VCPU:2{query}")
        assert resp.status_code == 200, resp.text
        return len(resp.json["allocation_requests"])

    make(root, None)
    make(one, root)
    make(two, root)
    assert count("") == 3
    assert client.simulate_delete(f"/resource_providers/{one}").status_code == 204
    make(one, root)
    assert [count(""), count(f"&in_tree={one}"), count(f"&in_tree={root}")] == [3, 3, 3]
    assert client.simulate_delete(f"/resource_providers/{one}").status_code == 204
    assert [count(""), count(f"&in_tree={two}"), count(f"&in_tree={root}")] == [2, 2, 2]
    assert count(f"&in_tree={one}") == 0


def test_a_catch_up_that_fails_leaves_the_index_to_be_loaded_whole(engine, api, monkeypatch):
    """Whatever fails while catching up (not the database: that catch-up is replayed
    as it was), the index no longer knows what it holds: the next search loads it
    whole instead of failing until the worker restarts."""
    client = api("1.39")
    rp = str(uuidlib.uuid4())
    client.simulate_post("/resource_providers", json={"name": "cn", "uuid": rp})
    index = Index()
    request = parse_query(_query("resources=VCPU:1"), (1, 39))
    assert find_candidates(engine, request, Options(), index).allocation_requests == []
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    client.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory)

    def broken(*_args) -> None:  # noqa: ANN002
        raise KeyError("a bug in the incremental catch-up")

    monkeypatch.setattr(Index, "_reload", broken)  # (still broken after: a load is whole)
    with pytest.raises(KeyError):
        find_candidates(engine, request, Options(), index)
    found = find_candidates(engine, request, Options(), index)
    assert [list(r["allocations"]) for r in found.allocation_requests] == [[rp]]
