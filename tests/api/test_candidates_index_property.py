"""Property: whatever writes come in, and however many one catch-up sees at once,
the candidates index kept current through the journal answers every query of a
fixed set exactly as the database does (the SQL path) and as an index loaded
fresh does, and holds the same structures as that fresh one.

Hypothesis draws sequences of writes over a small pool of uuids and names, so
that providers are deleted and created again with the same uuid (issue 37), with
a name another had, under another parent, and moved between; claims and their
release, inventories, traits and aggregates (sharing providers) come between.
A `look` is a search: everything written since is caught up in one go.
"""

from __future__ import annotations

import shutil
import uuid as uuidlib
from collections.abc import Callable, Iterator
from pathlib import Path

import hypothesis
import pytest
import sqlalchemy as sa
from hypothesis import strategies as st

from tally.config import Settings
from tally.db.engine import make_engine
from tally.placement.app import create_app
from tally.placement.candidate_query import parse_query
from tally.placement.ledger.bootstrap import prepare_database
from tally.placement.ledger.candidates import Index, Options, find_candidates, search_in
from tests.api.index_state import books, caught_up, fresh
from tests.conftest import PlacementClient

POOL = [str(uuidlib.UUID(int=0x500 + i)) for i in range(5)]  # provider uuids
NAMES = [f"n{i}" for i in range(len(POOL))]  # a provider's own name, or another's
CONSUMERS = [str(uuidlib.UUID(int=0x600 + i)) for i in range(3)]
AGG = str(uuidlib.UUID(int=0x700))
TRAITS = ["CUSTOM_FAST", "MISC_SHARES_VIA_AGGREGATE"]

QUERIES = [
    "resources=VCPU:1",
    "resources=VCPU:2&limit=2",
    "resources=VCPU:1,DISK_GB:10",
    "resources=DISK_GB:10",
    "resources=VCPU:1&required=CUSTOM_FAST",
    "resources=VCPU:1&required=!CUSTOM_FAST",
    f"resources=VCPU:1&member_of={AGG}",
    f"resources=VCPU:1&member_of=!{AGG}",
    "resources=VCPU:1&root_required=CUSTOM_FAST",
    "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate",
    "resources_A=VCPU:1&resources_B=DISK_GB:5&same_subtree=_A,_B&group_policy=none",
    *(f"resources=VCPU:1&in_tree={u}" for u in POOL),
    *(f"resources1=VCPU:1&in_tree1={u}&resources2=DISK_GB:5&group_policy=none" for u in POOL[:2]),
]
REQUESTS = []
for _query in QUERIES:
    _params: dict[str, list[str]] = {}
    for _part in _query.split("&"):
        _key, _, _value = _part.partition("=")
        _params.setdefault(_key, []).append(_value)
    REQUESTS.append((_query, parse_query(_params, (1, 39))))

slots = st.integers(0, len(POOL) - 1)
WRITES = st.one_of(
    st.tuples(st.just("make"), slots, st.none() | slots, st.none() | slots),
    st.tuples(st.just("delete"), slots),
    st.tuples(st.just("remake"), slots, st.none() | slots),
    st.tuples(st.just("move"), slots, st.none() | slots),
    st.tuples(st.just("stock"), slots, st.integers(0, 4), st.sampled_from([0, 0, 20])),
    st.tuples(st.just("claim"), st.integers(0, len(CONSUMERS) - 1), slots, st.integers(1, 2)),
    st.tuples(st.just("release"), st.integers(0, len(CONSUMERS) - 1)),
    st.tuples(st.just("traits"), slots, st.sets(st.sampled_from(TRAITS))),
    st.tuples(st.just("aggregates"), slots, st.booleans()),
    st.just(("look",)),
)


# Where every example starts: 0 -> (1 -> 3), 2; and 4, a root with disk.
START = [
    ("make", 0, None, None),
    ("make", 1, 0, None),
    ("make", 2, 0, None),
    ("make", 3, 1, None),
    ("make", 4, None, None),
    *(("stock", slot, 4, 0) for slot in range(4)),
    ("stock", 4, 0, 20),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each example (migrating costs a second)."""
    path = tmp_path_factory.mktemp("template") / "tally.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    prepare_database(engine)
    engine.dispose()
    return path


@pytest.fixture
def databases(template: Path, tmp_path: Path) -> Iterator[Callable[[], sa.Engine]]:
    """`make()`: a new database (from the template) for one example."""
    engines: list[sa.Engine] = []

    def make() -> sa.Engine:
        path = tmp_path / f"t{len(engines)}.sqlite"
        shutil.copyfile(template, path)
        engines.append(make_engine(f"sqlite:///{path}"))
        return engines[-1]

    yield make
    for engine in engines:
        engine.dispose()


class Writer:
    """Runs drawn writes through the API (the app itself searches the database:
    the index under test sees the writes only through the journal)."""

    def __init__(self, engine: sa.Engine) -> None:
        app = create_app(Settings.of(candidates_index_max_mb=0), engine)
        self.api = PlacementClient(app, "1.39")
        assert self.api.simulate_put("/traits/CUSTOM_FAST").status_code == 201

    def run(self, write: tuple) -> None:
        verb, *args = write
        resp = getattr(self, verb)(*args)
        assert resp is None or resp.status_code < 500, (write, resp.text)

    def _generation(self, slot: int) -> int | None:
        resp = self.api.simulate_get(f"/resource_providers/{POOL[slot]}")
        return resp.json["generation"] if resp.status_code == 200 else None

    def make(self, slot: int, parent: int | None, name: int | None):  # noqa: ANN201
        """(`name`: the slot whose name it takes; None: its own)"""
        body = {"uuid": POOL[slot], "name": NAMES[slot if name is None else name]}
        if parent is not None:
            body["parent_provider_uuid"] = POOL[parent]
        return self.api.simulate_post("/resource_providers", json=body)

    def delete(self, slot: int):  # noqa: ANN201
        return self.api.simulate_delete(f"/resource_providers/{POOL[slot]}")

    def remake(self, slot: int, parent: int | None):  # noqa: ANN201
        """Delete a provider and make it again at once (its uuid and name; under
        `parent`), with some stock: the compute service deleted and started again."""
        resp = self.api.simulate_get(f"/resource_providers/{POOL[slot]}")
        if resp.status_code != 200 or self.delete(slot).status_code != 204:
            return None
        body = {"uuid": POOL[slot], "name": resp.json["name"]}
        if parent is not None:
            body["parent_provider_uuid"] = POOL[parent]
        made = self.api.simulate_post("/resource_providers", json=body)
        return made if made.status_code >= 300 else self.stock(slot, 4, 0)

    def move(self, slot: int, parent: int | None):  # noqa: ANN201
        resp = self.api.simulate_get(f"/resource_providers/{POOL[slot]}")
        if resp.status_code != 200:
            return None
        body = {"name": resp.json["name"], "parent_provider_uuid": None}
        if parent is not None:
            body["parent_provider_uuid"] = POOL[parent]
        return self.api.simulate_put(f"/resource_providers/{POOL[slot]}", json=body)

    def stock(self, slot: int, vcpu: int, disk: int):  # noqa: ANN201
        generation = self._generation(slot)
        if generation is None:
            return None
        inventories = {rc: {"total": n} for rc, n in (("VCPU", vcpu), ("DISK_GB", disk)) if n}
        body = {"resource_provider_generation": generation, "inventories": inventories}
        return self.api.simulate_put(f"/resource_providers/{POOL[slot]}/inventories", json=body)

    def claim(self, consumer: int, slot: int, vcpu: int):  # noqa: ANN201
        now = self.api.simulate_get(f"/allocations/{CONSUMERS[consumer]}").json
        body = {
            "allocations": {POOL[slot]: {"resources": {"VCPU": vcpu}}},
            "consumer_generation": now.get("consumer_generation"),
            "project_id": "p",
            "user_id": "u",
            "consumer_type": "INSTANCE",
        }
        return self.api.simulate_put(f"/allocations/{CONSUMERS[consumer]}", json=body)

    def release(self, consumer: int):  # noqa: ANN201
        return self.api.simulate_delete(f"/allocations/{CONSUMERS[consumer]}")

    def traits(self, slot: int, traits: set[str]):  # noqa: ANN201
        generation = self._generation(slot)
        if generation is None:
            return None
        body = {"resource_provider_generation": generation, "traits": sorted(traits)}
        return self.api.simulate_put(f"/resource_providers/{POOL[slot]}/traits", json=body)

    def aggregates(self, slot: int, member: bool):  # noqa: ANN201
        generation = self._generation(slot)
        if generation is None:
            return None
        body = {"resource_provider_generation": generation, "aggregates": [AGG] if member else []}
        return self.api.simulate_put(f"/resource_providers/{POOL[slot]}/aggregates", json=body)

    def look(self) -> None:
        """(Compared by the test.)"""


def _answer(result) -> tuple:  # noqa: ANN001
    return result.allocation_requests, result.provider_summaries


def assert_index_is_the_database(engine: sa.Engine, index: Index) -> None:
    """Every query answered alike by `index` (caught up), the tables and a fresh
    index; and the index's structures those of the fresh one."""
    caught_up(index, engine)
    loaded = fresh(engine)
    assert books(index) == books(loaded)
    for query, request in REQUESTS:
        with engine.connect() as conn:
            expected = _answer(search_in(conn, request, Options()))
        assert _answer(find_candidates(engine, request, Options(), index)) == expected, query
        assert _answer(find_candidates(engine, request, Options(), loaded)) == expected, query


@hypothesis.settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # the same sequences on every run (it is in the test command)
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(writes=st.lists(WRITES, min_size=1, max_size=30))
def test_the_index_answers_as_the_database_after_any_writes(databases, writes):
    engine = databases()
    writer = Writer(engine)
    for write in START:
        writer.run(write)
    index = fresh(engine)  # from now on it only catches up through the journal
    for write in writes:
        writer.run(write)
        if write[0] == "look":
            assert_index_is_the_database(engine, index)
    assert_index_is_the_database(engine, index)


def test_a_uuid_deleted_and_made_again_in_one_catch_up(databases):
    """The sequence of issue 37, as the property's writes (always run, whatever
    Hypothesis draws)."""
    engine = databases()
    writer = Writer(engine)
    index = fresh(engine)
    for write in [
        ("make", 0, None, 0),
        ("make", 1, 0, 1),
        ("make", 2, 0, 2),
        *(("stock", slot, 4, 0) for slot in range(3)),
        ("look",),
        ("delete", 1),
        ("make", 1, 0, 1),
        ("stock", 1, 4, 0),
        ("look",),
        ("delete", 1),
    ]:
        writer.run(write)
        if write[0] == "look":
            assert_index_is_the_database(engine, index)
    assert_index_is_the_database(engine, index)
