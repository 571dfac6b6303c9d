"""Answers kept per request shape (kept_answers.py): a shape asked again is answered
from each tree's kept candidates, and a write sends just the trees it touched
back to the search. Every answer here is also checked against a search on the
tables, byte for byte against the same index without kept answers."""

from __future__ import annotations

import uuid as uuidlib

import orjson
import pytest
import sqlalchemy as sa

from tally.placement.candidate_query import parse_query
from tally.placement.ledger.candidates import (
    Index,
    Options,
    answer_cache,
    candidates_json,
    find_candidates,
    search_in,
)
from tally.placement.ledger.candidates.search import Trees

AGG, OTHER_AGG = str(uuidlib.UUID(int=1)), str(uuidlib.UUID(int=2))


class Cloud:
    def __init__(self, client) -> None:  # noqa: ANN001
        self.client = client

    def provider(self, inventories: dict[str, int], parent: str | None = None) -> str:
        rp = str(uuidlib.uuid4())
        body = {"name": rp, "uuid": rp, "parent_provider_uuid": parent}
        assert self.client.simulate_post("/resource_providers", json=body).status_code == 200
        self.put(
            rp, "inventories", {"inventories": {rc: {"total": n} for rc, n in inventories.items()}}
        )
        return rp

    def put(self, rp: str, what: str, body: dict) -> None:
        generation = self.client.simulate_get(f"/resource_providers/{rp}").json["generation"]
        body = {"resource_provider_generation": generation, **body}
        resp = self.client.simulate_put(f"/resource_providers/{rp}/{what}", json=body)
        assert resp.status_code == 200, resp.text

    def claim(self, allocations: dict[str, dict[str, int]]) -> str:
        consumer = str(uuidlib.uuid4())
        body = {
            "allocations": {rp: {"resources": r} for rp, r in allocations.items()},
            "consumer_generation": None,
            "project_id": "p",
            "user_id": "u",
            "consumer_type": "INSTANCE",
        }
        resp = self.client.simulate_put(f"/allocations/{consumer}", json=body)
        assert resp.status_code == 204, resp.text
        return consumer


def ask(engine: sa.Engine, index: Index, query: str, **options: object) -> dict:
    """The answer from `index` (kept answers on), checked against the same index
    without them (the same bytes) and against the tables (the same JSON)."""
    params: dict[str, list[str]] = {}
    for part in query.split("&"):
        key, _, value = part.partition("=")
        params.setdefault(key, []).append(value)
    request = parse_query(params, (1, 39))
    written = candidates_json(engine, request, Options(**options), index)
    if not options:
        found = find_candidates(engine, request, Options(), index)
        direct = {
            "allocation_requests": found.allocation_requests,
            "provider_summaries": found.provider_summaries,
        }
        assert written == orjson.dumps(direct)
        with engine.connect() as conn:
            tables = search_in(conn, request, Options())
        assert orjson.loads(written) == {
            "allocation_requests": tables.allocation_requests,
            "provider_summaries": tables.provider_summaries,
        }
    return orjson.loads(written)


def kept(index: Index) -> int:
    return len(index.kept.answers._kept)


@pytest.fixture
def searched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The trees searched one by one (a kept answer's stale trees)."""
    trees: list[int] = []
    at = Trees.at

    def spy(self: Trees, root: int) -> list:
        trees.append(root)
        return at(self, root)

    monkeypatch.setattr(Trees, "at", spy)
    return trees


def mapped(answer: dict) -> list[str]:
    return [rp for r in answer["allocation_requests"] for rp in r["mappings"][""]]


def test_a_claim_sends_only_its_tree_back_to_the_search(engine, api, searched):
    cloud = Cloud(api("1.39"))
    hosts = [cloud.provider({"VCPU": 2, "MEMORY_MB": 2048}) for _ in range(5)]
    index = Index()
    query = "resources=VCPU:2"
    assert mapped(ask(engine, index, query)) == hosts
    assert kept(index) == 1 and searched == []  # searched in bulk, and kept
    cloud.claim({hosts[2]: {"VCPU": 1}})
    answer = ask(engine, index, query)
    assert hosts[2] not in mapped(answer) and len(mapped(answer)) == 4
    assert len(searched) == 1  # that host's tree alone
    assert answer["provider_summaries"].get(hosts[2]) is None
    ask(engine, index, query)
    assert len(searched) == 1  # nothing changed since: nothing searched


def test_a_claim_on_a_sharing_provider_refreshes_every_tree_it_shares_into(engine, api):
    cloud = Cloud(api("1.39"))
    inside = [cloud.provider({"VCPU": 4}) for _ in range(3)]
    outside = cloud.provider({"VCPU": 4})
    disk = cloud.provider({"DISK_GB": 100})
    cloud.put(disk, "traits", {"traits": ["MISC_SHARES_VIA_AGGREGATE"]})
    for rp in [*inside, disk]:
        cloud.put(rp, "aggregates", {"aggregates": [AGG]})
    cloud.put(outside, "aggregates", {"aggregates": [OTHER_AGG]})
    index = Index()
    query = "resources=VCPU:1,DISK_GB:60"
    assert len(ask(engine, index, query)["allocation_requests"]) == 3
    cloud.claim({disk: {"DISK_GB": 50}})
    assert ask(engine, index, query)["allocation_requests"] == []
    # the outside host joins the aggregate: its tree is searched again
    cloud.put(outside, "aggregates", {"aggregates": [AGG]})
    assert ask(engine, index, "resources=VCPU:1,DISK_GB:40")["allocation_requests"] != []
    assert len(ask(engine, index, "resources=VCPU:1,DISK_GB:40")["allocation_requests"]) == 4


def test_candidates_of_sharing_providers_alone_come_once(engine, api):
    cloud = Cloud(api("1.39"))
    hosts = [cloud.provider({"VCPU": 4}) for _ in range(3)]
    disk = cloud.provider({"DISK_GB": 100})
    cloud.put(disk, "traits", {"traits": ["MISC_SHARES_VIA_AGGREGATE"]})
    for rp in [*hosts, disk]:
        cloud.put(rp, "aggregates", {"aggregates": [AGG]})
    index = Index()
    for _ in range(3):  # filled, kept, then refreshed after the claim
        answer = ask(engine, index, "resources=DISK_GB:10")
        assert mapped(answer) == [disk]
        cloud.claim({hosts[0]: {"VCPU": 1}})


def test_a_shape_with_a_limit_is_kept_from_its_second_ask(engine, api):
    cloud = Cloud(api("1.39"))
    hosts = [cloud.provider({"VCPU": 2}) for _ in range(6)]
    index = Index()
    first = ask(engine, index, "resources=VCPU:1&limit=2")
    assert kept(index) == 0  # once: the walk makes just two
    assert mapped(ask(engine, index, "resources=VCPU:1&limit=2")) == mapped(first) == hosts[:2]
    assert kept(index) == 1
    cloud.claim({hosts[0]: {"VCPU": 2}})
    assert mapped(ask(engine, index, "resources=VCPU:1&limit=3")) == hosts[1:4]  # same shape
    assert kept(index) == 1


def test_a_random_limit_from_kept_trees_is_a_sample(engine, api):
    cloud = Cloud(api("1.39"))
    hosts = {cloud.provider({"VCPU": 2}) for _ in range(6)}
    index = Index()
    seen: set[str] = set()
    for _ in range(100):  # a host missed 100 times in a row: 6 * (5/6)^100, never
        answer = ask(engine, index, "resources=VCPU:1&limit=1", randomize=True)
        (rp,) = mapped(answer)
        assert list(answer["provider_summaries"]) == [rp]
        seen.add(rp)
    assert kept(index) == 1
    assert seen == hosts


def test_kept_shapes_are_capped(engine, api, monkeypatch):
    monkeypatch.setattr(answer_cache, "SHAPES_KEPT", 2)
    cloud = Cloud(api("1.39"))
    for _ in range(3):
        cloud.provider({"VCPU": 4, "MEMORY_MB": 1024})
    index = Index()
    for amount in (1, 2, 3, 1):
        ask(engine, index, f"resources=VCPU:{amount}")
        assert kept(index) <= 2
    monkeypatch.setattr(answer_cache, "CANDIDATES_KEPT", 5)
    ask(engine, index, "resources=MEMORY_MB:1")
    assert kept(index) == 1  # 3 + 3 candidates are over the cap: the oldest goes
    cloud.provider({"VCPU": 4, "MEMORY_MB": 1024})
    cloud.provider({"VCPU": 4, "MEMORY_MB": 1024})
    assert len(ask(engine, index, "resources=MEMORY_MB:1")["allocation_requests"]) == 5
    assert len(ask(engine, index, "resources=MEMORY_MB:2")["allocation_requests"]) == 5
    assert kept(index) == 1  # the refreshed one is at the cap, the new one alone too
    cloud.provider({"VCPU": 4, "MEMORY_MB": 1024})
    assert len(ask(engine, index, "resources=MEMORY_MB:3")["allocation_requests"]) == 6
    assert len(ask(engine, index, "resources=MEMORY_MB:1")["allocation_requests"]) == 6
    assert kept(index) == 1  # one shape alone over the cap is not kept
    assert len(ask(engine, index, "resources=MEMORY_MB:2")["allocation_requests"]) == 6
    assert kept(index) == 0  # nor one that grew past it when its new tree was searched


def test_too_many_stale_trees_search_in_bulk_again(engine, api, searched, monkeypatch):
    monkeypatch.setattr(answer_cache, "STALE_MIN", 1)
    cloud = Cloud(api("1.39"))
    hosts = [cloud.provider({"VCPU": 2}) for _ in range(4)]
    index = Index()
    ask(engine, index, "resources=VCPU:1")
    for rp in hosts[:2]:
        cloud.claim({rp: {"VCPU": 2}})
    assert mapped(ask(engine, index, "resources=VCPU:1")) == hosts[2:]
    assert searched == [] and kept(index) == 1  # dropped, then searched whole again


def test_answers_depending_on_more_than_the_trees_are_not_kept(engine, api):
    cloud = Cloud(api("1.39"))
    host = cloud.provider({"VCPU": 2})
    child = cloud.provider({"VCPU": 2}, parent=host)
    index = Index()
    unknown = f"resources=VCPU:1&member_of={uuidlib.uuid4()}"
    assert ask(engine, index, unknown)["allocation_requests"] == []
    assert kept(index) == 0
    in_tree = f"resources=VCPU:1&in_tree={child}"
    assert len(ask(engine, index, in_tree)["allocation_requests"]) == 2
    assert kept(index) == 1
    assert cloud.client.simulate_delete(f"/resource_providers/{child}").status_code == 204
    assert ask(engine, index, in_tree)["allocation_requests"] == []  # no such tree now
    assert kept(index) == 0
    assert cloud.client.simulate_put("/traits/CUSTOM_NONE").status_code == 201
    assert ask(engine, index, "resources=VCPU:1&root_required=CUSTOM_NONE") == {
        "allocation_requests": [],
        "provider_summaries": {},
    }
    assert kept(index) == 0


def test_a_trait_added_to_a_root_brings_its_tree_in(engine, api):
    cloud = Cloud(api("1.39"))
    hosts = [cloud.provider({"VCPU": 2}) for _ in range(3)]
    assert cloud.client.simulate_put("/traits/CUSTOM_GOLD").status_code == 201
    cloud.put(hosts[0], "traits", {"traits": ["CUSTOM_GOLD"]})
    index = Index()
    query = "resources=VCPU:1&root_required=CUSTOM_GOLD"
    assert mapped(ask(engine, index, query)) == hosts[:1]
    cloud.put(hosts[2], "traits", {"traits": ["CUSTOM_GOLD"]})
    assert mapped(ask(engine, index, query)) == [hosts[0], hosts[2]]
    cloud.put(hosts[0], "traits", {"traits": []})
    assert mapped(ask(engine, index, query)) == [hosts[2]]


def test_an_in_tree_provider_moving_away_drops_the_sharing_trees_answer(engine, api):
    """A suffixed group's in_tree takes a sharing provider of that tree into
    every tree it shares into: when the named provider moves to another tree,
    those trees change too, though no provider of theirs did."""
    cloud = Cloud(api("1.39"))
    root = cloud.provider({})
    named = cloud.provider({"VCPU": 1}, parent=root)
    disk = cloud.provider({"DISK_GB": 100}, parent=root)
    cloud.put(disk, "traits", {"traits": ["MISC_SHARES_VIA_AGGREGATE"]})
    cloud.put(disk, "aggregates", {"aggregates": [AGG]})
    other = cloud.provider({"VCPU": 1})
    cloud.put(other, "aggregates", {"aggregates": [AGG]})
    empty = cloud.provider({})
    index = Index()
    query = f"resources1=DISK_GB:10&in_tree1={named}"
    assert mapped_groups(ask(engine, index, query)) == [[disk]]
    body = {"name": named, "parent_provider_uuid": empty}
    assert cloud.client.simulate_put(f"/resource_providers/{named}", json=body).status_code == 200
    assert ask(engine, index, query)["allocation_requests"] == []
    assert kept(index) == 0  # (the next ask keeps it again)


def mapped_groups(answer: dict) -> list[list[str]]:
    return [rps for r in answer["allocation_requests"] for rps in r["mappings"].values()]
