"""The candidate search over a fake `Source`: plain dicts, no database, no index.
What the search asks of what it reads is all in `Source` (source.py): a source
that answers those questions gets the whole answer, summaries included, read
whole (`whole`: tree by tree) or as the search asks for it.

    cn1 (VCPU 8)             cn2 (VCPU 4, 4 used)      ss (DISK_GB 100, shares
      numa0 (VCPU 4, PCPU 2)   [CUSTOM_GOLD]               via aggregate A)
    cn1 and ss in aggregate A
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Collection, Iterable, Mapping

import orjson
import pytest

from tally.placement.candidate_query import parse_query
from tally.placement.ledger.candidates import Result, Source, answer_over, search_over
from tally.placement.ledger.candidates.snapshot import SHARING_TRAIT, ProviderRow, Stock, fitting

PARENTS = {"cn1": None, "numa0": "cn1", "cn2": None, "ss": None}
INVENTORY = {  # provider -> class -> (capacity, used)
    "cn1": {"VCPU": (8, 0)},
    "numa0": {"VCPU": (4, 0), "PCPU": (2, 0)},
    "cn2": {"VCPU": (4, 4)},
    "ss": {"DISK_GB": (100, 0)},
}
TRAITS = {"cn2": {"CUSTOM_GOLD"}, "ss": {SHARING_TRAIT}}
AGGREGATES = {"cn1": {"A"}, "ss": {"A"}}
CLASSES = ["VCPU", "PCPU", "DISK_GB"]
TRAIT_NAMES = ["CUSTOM_GOLD", SHARING_TRAIT]


class FakeSource:
    """A `Source` over the module's dicts. Provider ids in PARENTS' order; `rows`
    holds only what the search asked to load unless `whole`."""

    def __init__(self, whole: bool) -> None:
        self.whole = whole
        self.ids = {name: i + 1 for i, name in enumerate(PARENTS)}
        self.all_rows: dict[int, ProviderRow] = {}
        for name, parent in PARENTS.items():
            root = name
            while PARENTS[root] is not None:
                root = PARENTS[root]
            parent_id = self.ids[parent] if parent else None
            self.all_rows[self.ids[name]] = (name, parent_id, self.ids[root])
        self.rows = dict(self.all_rows) if whole else {}
        self.classes = {name: i + 1 for i, name in enumerate(CLASSES)}
        self.traits = {name: i + 1 for i, name in enumerate(TRAIT_NAMES)}
        self.aggs = {"A": 1}
        self.asked: list[str] = []

    def fresh(self) -> FakeSource:
        return FakeSource(self.whole)

    def class_ids(self, names: Iterable[str]) -> dict[str, int]:
        return {n: self.classes[n] for n in names if n in self.classes}

    def trait_ids(self, names: Iterable[str]) -> dict[str, int]:
        return {n: self.traits[n] for n in names if n in self.traits}

    def aggregate_ids(self, uuids: Iterable[str]) -> dict[str, int]:
        return {u: self.aggs[u] for u in uuids if u in self.aggs}

    def tree_roots(self, uuids: Iterable[str]) -> dict[str, int]:
        return {u: self.all_rows[self.ids[u]][2] for u in uuids if u in self.ids}

    def class_names(self, ids: Iterable[int]) -> dict[int, str]:
        by_id = {rc: name for name, rc in self.classes.items()}
        return {rc: by_id[rc] for rc in ids}

    def has_trees(self) -> bool:
        return any(parent is not None for parent in PARENTS.values())

    def _holding(self, trait: int) -> set[int]:
        name = TRAIT_NAMES[trait - 1]
        return {self.ids[p] for p, held in TRAITS.items() if name in held}

    def roots_with_traits(self, required: set[int], forbidden: set[int]) -> set[int]:
        found = set(self.sorted_roots())
        for trait in required:
            found &= self._holding(trait)
        for trait in forbidden:
            found -= self._holding(trait)
        return found

    def trait_holders(self, trait_ids: Iterable[int]) -> dict[int, set[int]]:
        return {tr: self._holding(tr) for tr in trait_ids if self._holding(tr)}

    def aggregate_members(self, agg_ids: Iterable[int]) -> dict[int, set[int]]:
        return {1: {self.ids[p] for p in AGGREGATES}} if 1 in set(agg_ids) else {}

    def sharing_anchors(self, providers: Iterable[int]) -> dict[int, set[int]]:
        members = {self.ids[p] for p in AGGREGATES}
        return {sp: {self.all_rows[m][2] for m in members} for sp in providers if sp in members}

    def stock(
        self, class_ids: Iterable[int], roots: Collection[int] | None = None
    ) -> dict[int, list[Stock]]:
        self.asked.append("stock")
        return {
            rc: [s for s in self.class_stock(rc).values() if roots is None or s[1] in roots]
            for rc in sorted(set(class_ids))
        }

    def fitting(self, rc: int, rows: list[Stock], amount: int) -> list[Stock]:
        return fitting(rows, amount)

    def sorted_roots(self) -> list[int]:
        return sorted(rp for rp, row in self.all_rows.items() if row[1] is None)

    def root_of(self) -> dict[int, int] | None:
        return {rp: row[2] for rp, row in self.all_rows.items()} if self.whole else None

    def class_stock(self, rc: int) -> Mapping[int, Stock]:
        name = CLASSES[rc - 1]
        found = {}
        for provider, held in INVENTORY.items():
            if name in held:
                rp = self.ids[provider]
                capacity, used = held[name]
                found[rp] = (rp, self.all_rows[rp][2], capacity, used, 1, capacity, 1)
        return dict(sorted(found.items()))

    def load_providers(self, ids: Collection[int]) -> None:
        self.rows.update({rp: self.all_rows[rp] for rp in ids})

    def load_trees(self, roots: Collection[int]) -> None:
        self.rows.update({rp: row for rp, row in self.all_rows.items() if row[2] in roots})

    def tree_members(self, roots: Iterable[int]) -> set[int]:
        roots = set(roots)
        self.load_trees(roots)
        return {rp for rp, row in self.all_rows.items() if row[2] in roots}

    def stock_of_trees(
        self, roots: Collection[int], skip_classes: Collection[int]
    ) -> list[tuple[int, int, int, int]]:
        return [
            (rp, rc, s[2], s[3])
            for rc in range(1, len(CLASSES) + 1)
            if rc not in skip_classes
            for rp, s in self.class_stock(rc).items()
            if s[1] in roots
        ]

    def trait_names(self, providers: Collection[int]) -> dict[int, list[str]]:
        names = {self.ids[p]: sorted(held, key=TRAIT_NAMES.index) for p, held in TRAITS.items()}
        return {rp: names[rp] for rp in providers if rp in names}

    def kept(self) -> None:
        return None


def _request(query: str, version: tuple[int, int] = (1, 39)):
    return parse_query(urllib.parse.parse_qs(query, keep_blank_values=True), version)


def _summary(name: str, parent: str | None, root: str, traits: list[str] = ()) -> dict:
    return {
        "resources": {
            rc: {"capacity": capacity, "used": used}
            for rc, (capacity, used) in INVENTORY[name].items()
        },
        "traits": list(traits),
        "parent_provider_uuid": parent,
        "root_provider_uuid": root,
    }


@pytest.fixture(params=[False, True], ids=["as-asked", "whole"])
def source(request: pytest.FixtureRequest) -> FakeSource:
    return FakeSource(whole=request.param)


def test_a_fake_source_is_a_source(source):
    assert isinstance(source, FakeSource)
    typed: Source = source  # (mypy checks the protocol; here: it runs)
    assert typed.sorted_roots() == [1, 3, 4]


def test_the_search_reads_a_fake_source(source):
    found = search_over(source, _request("resources=VCPU:1&limit=5"))
    assert found.allocation_requests == [
        {"allocations": {"cn1": {"resources": {"VCPU": 1}}}, "mappings": {"": ["cn1"]}},
        {"allocations": {"numa0": {"resources": {"VCPU": 1}}}, "mappings": {"": ["numa0"]}},
    ]  # cn2 is full
    assert found.provider_summaries == {
        "cn1": _summary("cn1", None, "cn1"),
        "numa0": _summary("numa0", "cn1", "cn1"),
    }


def test_sharing_nested_and_traits_over_a_fake_source(source):
    found = search_over(source, _request("resources=PCPU:1,DISK_GB:10"))
    assert found.allocation_requests == [
        {
            "allocations": {
                "numa0": {"resources": {"PCPU": 1}},
                "ss": {"resources": {"DISK_GB": 10}},
            },
            "mappings": {"": ["numa0", "ss"]},
        }
    ]
    assert set(found.provider_summaries) == {"cn1", "numa0", "ss"}
    assert found.provider_summaries["ss"] == _summary("ss", None, "ss", [SHARING_TRAIT])
    empty = Result([], {})
    assert search_over(source, _request("resources=VCPU:1&root_required=CUSTOM_GOLD")) == empty
    assert search_over(source, _request("resources=VCPU:9")) == empty  # (cn2 gold but full)


def test_the_answer_as_json_over_a_fake_source(source):
    found = search_over(source.fresh(), _request("resources=VCPU:1"))
    answer = answer_over(source, _request("resources=VCPU:1"))
    assert orjson.loads(bytes(answer)) == {
        "allocation_requests": found.allocation_requests,
        "provider_summaries": found.provider_summaries,
    }
