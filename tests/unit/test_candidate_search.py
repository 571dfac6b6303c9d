"""The candidate search (ledger.candidates) straight against the tables, on
SQLite and PostgreSQL: request parsing, each filter, nested and sharing trees,
group policies, and the truncation settings.

Trees are written with `World` (rows, no HTTP); a search returns candidates as
sets of "provider:CLASS=amount" strings, which keeps the expectations readable.
"""

from __future__ import annotations

import uuid as uuidlib

import orjson
import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.placement.candidate_query import parse_query
from tally.placement.error_types import BadRequest
from tally.placement.ledger.candidates import (
    Index,
    Options,
    candidates_json,
    find_candidates,
    search_in,
)
from tally.placement.ledger.candidates import request as rq


def uuid_of(name: str) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, name))


class World:
    """Builder of providers, inventories, traits, aggregates and allocations."""

    def __init__(self, engine: sa.Engine, source: str = "database") -> None:
        self.engine = engine
        self.source = source  # "database" (Snapshot) or "index" (in memory)
        self.ids: dict[str, int] = {}
        self.names: dict[str, str] = {}  # uuid -> name
        with engine.connect() as conn:
            classes = sa.select(t.resource_classes.c.name, t.resource_classes.c.id)
            self.classes = dict(conn.execute(classes).all())
            self.traits = dict(conn.execute(sa.select(t.traits.c.name, t.traits.c.id)).all())
        self.aggs: dict[str, int] = {}

    def provider(
        self,
        name: str,
        parent: str | None = None,
        inventory: dict[str, int | dict] | None = None,
        traits: tuple[str, ...] = (),
        aggs: tuple[str, ...] = (),
    ) -> str:
        with self.engine.begin() as conn:
            parent_id = self.ids[parent] if parent else None
            root_id = None
            if parent:
                root_id = conn.execute(
                    sa.select(t.resource_providers.c.root_provider_id).where(
                        t.resource_providers.c.id == parent_id
                    )
                ).scalar_one()
            rp = conn.execute(
                t.resource_providers.insert().values(
                    uuid=uuid_of(name),
                    name=name,
                    generation=0,
                    parent_provider_id=parent_id,
                    root_provider_id=root_id,
                )
            ).inserted_primary_key[0]
            if root_id is None:
                conn.execute(
                    t.resource_providers.update()
                    .where(t.resource_providers.c.id == rp)
                    .values(root_provider_id=rp)
                )
            for rc, spec in (inventory or {}).items():
                spec = {"total": spec} if isinstance(spec, int) else spec
                conn.execute(
                    t.inventories.insert().values(
                        resource_provider_id=rp,
                        resource_class_id=self._class(conn, rc),
                        total=spec["total"],
                        reserved=spec.get("reserved", 0),
                        min_unit=spec.get("min_unit", 1),
                        max_unit=spec.get("max_unit", spec["total"]),
                        step_size=spec.get("step_size", 1),
                        allocation_ratio=spec.get("allocation_ratio", 1.0),
                    )
                )
            for trait in traits:
                conn.execute(
                    t.resource_provider_traits.insert().values(
                        resource_provider_id=rp, trait_id=self._trait(conn, trait)
                    )
                )
            for agg in aggs:
                conn.execute(
                    t.resource_provider_aggregates.insert().values(
                        resource_provider_id=rp, aggregate_id=self._agg(conn, agg)
                    )
                )
        self.ids[name] = rp
        self.names[uuid_of(name)] = name
        return name

    def allocate(self, name: str, rc: str, used: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                t.allocations.insert().values(
                    resource_provider_id=self.ids[name],
                    consumer_id=str(uuidlib.uuid4()),
                    resource_class_id=self.classes[rc],
                    used=used,
                )
            )

    def _class(self, conn: sa.Connection, name: str) -> int:
        if name not in self.classes:
            new_id = max(10000, *self.classes.values()) + 1
            conn.execute(t.resource_classes.insert().values(id=new_id, name=name))
            self.classes[name] = new_id
        return self.classes[name]

    def _trait(self, conn: sa.Connection, name: str) -> int:
        if name not in self.traits:
            result = conn.execute(t.traits.insert().values(name=name))
            self.traits[name] = result.inserted_primary_key[0]
        return self.traits[name]

    def _agg(self, conn: sa.Connection, name: str) -> int:
        if name not in self.aggs:
            result = conn.execute(t.placement_aggregates.insert().values(uuid=uuid_of(name)))
            self.aggs[name] = result.inserted_primary_key[0]
        return self.aggs[name]

    # -- searching --------------------------------------------------------

    def result(self, query: str, version: tuple[int, int] = (1, 39), **options: object):
        params: dict[str, list[str]] = {}
        for part in query.split("&"):
            key, _, value = part.partition("=")
            for name in sorted(self.aggs, key=len, reverse=True):  # @agg -> its uuid
                value = value.replace(f"@{name}", uuid_of(name))
            for name in sorted(self.ids, key=len, reverse=True):  # %provider -> its uuid
                value = value.replace(f"%{name}", uuid_of(name))
            params.setdefault(key, []).append(value)
        request = parse_query(params, version)
        if self.source == "index":  # a fresh index: loaded whole from the tables
            result = find_candidates(self.engine, request, Options(**options), Index())
        else:
            with self.engine.connect() as conn:
                result = search_in(conn, request, Options(**options))
        if version >= (1, 34) and not options.get("randomize"):
            # The newest shape is written straight to JSON: the very same answer.
            index = Index() if self.source == "index" else None
            body = candidates_json(self.engine, request, Options(**options), index)
            assert body == orjson.dumps(
                {
                    "allocation_requests": result.allocation_requests,
                    "provider_summaries": result.provider_summaries,
                }
            )
        return result

    def search(self, query: str, version: tuple[int, int] = (1, 39), **options: object):
        """Candidates as a sorted list of frozensets of 'provider:CLASS=n'."""
        found = self.result(query, version, **options).allocation_requests
        return sorted((self.readable(c) for c in found), key=lambda c: sorted(c))

    def readable(self, candidate: dict) -> frozenset[str]:
        return frozenset(
            f"{self.names[u]}:{rc}={n}"
            for u, alloc in candidate["allocations"].items()
            for rc, n in alloc["resources"].items()
        )

    def mappings(self, candidate: dict) -> dict[str, list[str]]:
        return {k: sorted(self.names[u] for u in v) for k, v in candidate["mappings"].items()}


def cands(*groups: str) -> list[frozenset[str]]:
    """Expected candidates: each a space-separated 'provider:CLASS=n' list."""
    return sorted((frozenset(g.split()) for g in groups), key=lambda c: sorted(c))


@pytest.fixture(params=["database", "index"])
def world(engine: sa.Engine, request: pytest.FixtureRequest) -> World:
    return World(engine, request.param)


# -- request parsing -------------------------------------------------------


def parse(query: str, version: tuple[int, int] = (1, 39)) -> rq.CandidateRequest:
    params: dict[str, list[str]] = {}
    for part in query.split("&"):
        key, _, value = part.partition("=")
        params.setdefault(key, []).append(value)
    return parse_query(params, version)


def test_parse_groups_in_query_order_with_their_filters():
    request = parse(
        "resources_B=VCPU:1&required_B=A,!B&resources=DISK_GB:5&member_of=in:"
        "4f5e3d2c-1b0a-4c9d-8e7f-6a5b4c3d2e1f,5f5e3d2c-1b0a-4c9d-8e7f-6a5b4c3d2e1f"
        "&in_tree=6f5e3d2c-1b0a-4c9d-8e7f-6a5b4c3d2e1f&group_policy=isolate&limit=3&limit=9"
    )
    first, second = request.groups
    assert (first.suffix, first.resources, first.required, first.forbidden) == (
        "_B",
        {"VCPU": 1},
        [frozenset({"A"})],
        frozenset({"B"}),
    )
    assert first.use_same_provider and not second.use_same_provider
    assert second.member_of == [
        frozenset({"4f5e3d2c-1b0a-4c9d-8e7f-6a5b4c3d2e1f", "5f5e3d2c-1b0a-4c9d-8e7f-6a5b4c3d2e1f"})
    ]
    assert second.in_tree == "6f5e3d2c-1b0a-4c9d-8e7f-6a5b4c3d2e1f"
    assert request.limit == 3  # the first limit counts, as upstream
    assert request.isolate


@pytest.mark.parametrize(
    ("query", "version", "message"),
    [
        (
            "resources1=VCPU:1&resources2=VCPU:1",
            (1, 25),
            'The "group_policy" parameter is required',
        ),
        ("required=FOO&required1=BAR", (1, 25), "orphaned traits keys: required, required1"),
        ("member_of1=" + uuid_of("a"), (1, 25), "orphaned member_of keys: member_of1"),
        ("resources=VCPU:1&in_tree1=" + uuid_of("a"), (1, 31), "All request groups must specify"),
        ("group_policy=none", (1, 25), "At least one request group"),
        ("resources=VCPU:1&required=A,!A", (1, 22), "required: (A)"),
        ("resources=VCPU:1&root_required=A,!A", (1, 35), "found in root_required: A"),
        ("resources=VCPU:1&root_required=A&root_required=B", (1, 35), "only once"),
        ("resources_A=VCPU:1&same_subtree=_A,,_B", (1, 36), "Empty string (unsuffixed"),
        ("resources_A=VCPU:1&required_B=X", (1, 36), "bad group(s) - ['_B']"),
        ("resources_A=VCPU:1&same_subtree=_A,_C", (1, 36), "['_C'] not found in ['_A']"),
        ("member_of_A=" + uuid_of("a") + "&same_subtree=_A", (1, 36), "at least one resources"),
        ("resources=VCPU:0", (1, 10), "requires amount >= 1"),
        ("resources=VCPU:1&required=in:A,B", (1, 38), "only supported since microversion 1.39"),
        ("resources=VCPU:1&member_of=!" + uuid_of("a"), (1, 31), "Forbidden member_of"),
    ],
)
def test_parse_refuses_with_upstream_messages(query, version, message):
    with pytest.raises(BadRequest) as caught:
        parse(query, version)
    assert message in caught.value.detail


def test_parse_before_1_36_and_1_33_treats_suffixes_as_plain_keys():
    assert [g.suffix for g in parse("resources=VCPU:1&resources_X=VCPU:1", (1, 32)).groups] == [""]
    request = parse("resources_X=VCPU:1&required_Y=A&same_subtree=_X,_Y&group_policy=none", (1, 36))
    assert request.same_subtrees == [frozenset({"_X", "_Y"})]


# -- flat providers ----------------------------------------------------------


def test_capacity_units_and_usage_decide_who_fits(world):
    world.provider("cn1", inventory={"VCPU": {"total": 8, "allocation_ratio": 2.0, "reserved": 2}})
    world.provider("cn2", inventory={"VCPU": {"total": 16, "step_size": 4, "min_unit": 4}})
    world.provider("cn3", inventory={"VCPU": {"total": 16, "max_unit": 2}})
    world.allocate("cn1", "VCPU", 8)  # capacity (8 - 2) * 2 = 12 leaves 4
    assert world.search("resources=VCPU:4") == cands("cn1:VCPU=4", "cn2:VCPU=4")
    assert world.search("resources=VCPU:5") == []
    assert world.search("resources=VCPU:2") == cands("cn1:VCPU=2", "cn3:VCPU=2")
    assert world.search("resources=VCPU:8") == cands("cn2:VCPU=8")


def test_every_class_must_fit_on_one_flat_provider(world):
    world.provider("cn1", inventory={"VCPU": 8, "MEMORY_MB": 1024})
    world.provider("cn2", inventory={"VCPU": 8})
    assert world.search("resources=VCPU:1,MEMORY_MB:512") == cands("cn1:VCPU=1 cn1:MEMORY_MB=512")


def test_unknown_class_and_trait_are_refused(world):
    world.provider("cn1", inventory={"VCPU": 8})
    with pytest.raises(BadRequest, match="No such resource class CUSTOM_NOPE"):
        world.search("resources=CUSTOM_NOPE:1")
    with pytest.raises(BadRequest, match=r"No such trait\(s\): CUSTOM_NOPE"):
        world.search("resources=VCPU:1&required=CUSTOM_NOPE")


def test_summaries_show_all_classes_traits_and_tree(world):
    world.provider("cn1", inventory={"VCPU": 8, "DISK_GB": 100}, traits=("HW_CPU_X86_AVX2",))
    world.provider("numa", parent="cn1", inventory={"MEMORY_MB": 64})
    world.allocate("cn1", "DISK_GB", 30)
    summaries = world.result("resources=VCPU:1").provider_summaries
    assert summaries[uuid_of("cn1")] == {
        "resources": {"VCPU": {"capacity": 8, "used": 0}, "DISK_GB": {"capacity": 100, "used": 30}},
        "traits": ["HW_CPU_X86_AVX2"],
        "parent_provider_uuid": None,
        "root_provider_uuid": uuid_of("cn1"),
    }
    assert summaries[uuid_of("numa")]["parent_provider_uuid"] == uuid_of("cn1")
    old = world.result("resources=VCPU:1", version=(1, 26)).provider_summaries
    assert old[uuid_of("cn1")]["resources"] == {"VCPU": {"capacity": 8, "used": 0}}


# -- nested trees ----------------------------------------------------------------


@pytest.fixture
def numa(world: World) -> World:
    """cn (DISK_GB) with numa0 and numa1 (VCPU, MEMORY_MB, HW_NUMA_ROOT), pf0
    under numa0 (SRIOV_NET_VF, CUSTOM_PHYSNET1)."""
    world.provider("cn", inventory={"DISK_GB": 100}, traits=("COMPUTE_VOLUME_MULTI_ATTACH",))
    for i in (0, 1):
        world.provider(
            f"numa{i}",
            parent="cn",
            inventory={"VCPU": 4, "MEMORY_MB": 2048},
            traits=("HW_NUMA_ROOT",),
        )
    world.provider(
        "pf0", parent="numa0", inventory={"SRIOV_NET_VF": 8}, traits=("CUSTOM_PHYSNET1",)
    )
    return world


def test_unsuffixed_group_mixes_providers_of_one_tree(numa):
    assert numa.search("resources=VCPU:1,MEMORY_MB:512") == cands(
        "numa0:VCPU=1 numa0:MEMORY_MB=512",
        "numa0:VCPU=1 numa1:MEMORY_MB=512",
        "numa1:VCPU=1 numa0:MEMORY_MB=512",
        "numa1:VCPU=1 numa1:MEMORY_MB=512",
    )
    assert numa.search("resources=VCPU:1,SRIOV_NET_VF:2,DISK_GB:10") == cands(
        "numa0:VCPU=1 pf0:SRIOV_NET_VF=2 cn:DISK_GB=10",
        "numa1:VCPU=1 pf0:SRIOV_NET_VF=2 cn:DISK_GB=10",
    )


def test_before_1_29_one_provider_per_tree(numa):
    assert numa.search("resources=VCPU:1,DISK_GB:1", version=(1, 28)) == []
    assert numa.search("resources=VCPU:1,MEMORY_MB:512", version=(1, 28)) == cands(
        "numa0:VCPU=1 numa0:MEMORY_MB=512", "numa1:VCPU=1 numa1:MEMORY_MB=512"
    )
    result = numa.result("resources=VCPU:1", version=(1, 28))
    assert len(result.allocation_requests) == 2
    assert set(result.provider_summaries) == {uuid_of("numa0"), uuid_of("numa1")}
    assert len(numa.result("resources=VCPU:1").provider_summaries) == 4  # the whole tree


def test_unsuffixed_traits_hold_collectively_and_forbidden_on_each(numa):
    found = numa.search("resources=VCPU:1,SRIOV_NET_VF:1&required=CUSTOM_PHYSNET1,HW_NUMA_ROOT")
    assert len(found) == 2
    assert numa.search("resources=VCPU:1&required=CUSTOM_PHYSNET1") == []
    assert numa.search("resources=DISK_GB:1,VCPU:1&required=!HW_NUMA_ROOT") == []
    assert numa.search("resources=DISK_GB:1&required=!HW_NUMA_ROOT") == cands("cn:DISK_GB=1")


def test_in_tree_of_a_child_means_its_whole_tree(numa):
    numa.provider("other", inventory={"VCPU": 4})
    assert len(numa.search("resources=VCPU:1&in_tree=%pf0")) == 2
    assert numa.search("resources1=VCPU:1&in_tree1=%other") == cands("other:VCPU=1")
    assert numa.search("resources=VCPU:1&in_tree=" + uuid_of("nowhere")) == []


def test_same_subtree_with_a_resourceless_group(numa):
    query = (
        "resources_C=VCPU:1&resources_N=SRIOV_NET_VF:1&required_R=HW_NUMA_ROOT&group_policy=none"
    )
    tied = numa.result(query + "&same_subtree=_C,_N,_R").allocation_requests
    assert [numa.readable(c) for c in tied] == cands("numa0:VCPU=1 pf0:SRIOV_NET_VF=1")
    assert numa.mappings(tied[0]) == {"_C": ["numa0"], "_N": ["pf0"], "_R": ["numa0"]}
    assert len(numa.search(query + "&same_subtree=_C,_R")) == 2  # _N anywhere in the tree


# -- granular groups ---------------------------------------------------------------


def test_isolate_puts_suffixed_groups_on_different_providers(numa):
    query = "resources_A=VCPU:1&resources_B=VCPU:1&group_policy="
    assert numa.search(query + "isolate") == cands(
        "numa0:VCPU=1 numa1:VCPU=1", "numa0:VCPU=1 numa1:VCPU=1"
    )
    assert len(numa.search(query + "none")) == 4
    mapped = [numa.mappings(c) for c in numa.result(query + "isolate").allocation_requests]
    assert sorted(m["_A"][0] for m in mapped) == ["numa0", "numa1"]


def test_groups_combined_must_still_fit(world):
    world.provider("small", inventory={"VCPU": {"total": 8, "max_unit": 2}})
    world.provider("big", inventory={"VCPU": 8})
    world.allocate("big", "VCPU", 5)
    query = "resources=VCPU:1&resources1=VCPU:1&resources2=VCPU:1&group_policy=none"
    assert world.search(query) == cands("big:VCPU=3")  # 'small' would exceed max_unit 2
    assert world.search(query.replace("VCPU:1&resources2", "VCPU:2&resources2")) == []


def test_granular_traits_and_member_of_apply_to_the_one_provider(numa):
    numa.provider("cn2", inventory={"VCPU": 4}, aggs=("agg",), traits=("CUSTOM_FOO",))
    assert numa.search("resources1=VCPU:1&required1=CUSTOM_FOO") == cands("cn2:VCPU=1")
    assert numa.search("resources1=VCPU:1&member_of1=@agg") == cands("cn2:VCPU=1")
    assert len(numa.search("resources1=VCPU:1&required1=!CUSTOM_FOO")) == 2


# -- aggregates and sharing ------------------------------------------------------------


@pytest.fixture
def shared(world: World) -> World:
    """cn1 (no disk) and cn2 (disk) in aggA with sharing ss (DISK_GB); cn3 in
    aggB only; ss2 shares DISK_GB via aggC, which numa1_0 under cn1 is in."""
    world.provider("cn1", inventory={"VCPU": 8}, aggs=("aggA",))
    world.provider("numa1_0", parent="cn1", inventory={"VCPU": 8}, aggs=("aggC",))
    world.provider("cn2", inventory={"VCPU": 8, "DISK_GB": 100}, aggs=("aggA",))
    world.provider("cn3", inventory={"VCPU": 8}, aggs=("aggB",))
    world.provider(
        "ss", inventory={"DISK_GB": 1000}, aggs=("aggA",), traits=("MISC_SHARES_VIA_AGGREGATE",)
    )
    world.provider(
        "ss2", inventory={"DISK_GB": 1000}, aggs=("aggC",), traits=("MISC_SHARES_VIA_AGGREGATE",)
    )
    return world


def test_sharing_providers_serve_every_tree_of_their_aggregates(shared):
    assert shared.search("resources=VCPU:1,DISK_GB:10") == cands(
        "cn1:VCPU=1 ss:DISK_GB=10",
        "cn1:VCPU=1 ss2:DISK_GB=10",
        "numa1_0:VCPU=1 ss:DISK_GB=10",
        "numa1_0:VCPU=1 ss2:DISK_GB=10",
        "cn2:VCPU=1 cn2:DISK_GB=10",
        "cn2:VCPU=1 ss:DISK_GB=10",
    )
    # A candidate only a sharing provider satisfies is returned once.
    assert shared.search("resources=DISK_GB:500") == cands("ss:DISK_GB=500", "ss2:DISK_GB=500")


def test_member_of_on_a_root_spans_its_tree_only_for_the_unsuffixed_group(shared):
    assert shared.search("resources=VCPU:1&member_of=@aggA") == cands(
        "cn1:VCPU=1", "numa1_0:VCPU=1", "cn2:VCPU=1"
    )
    assert shared.search("resources1=VCPU:1&member_of1=@aggA") == cands("cn1:VCPU=1", "cn2:VCPU=1")
    assert shared.search("resources=VCPU:1,DISK_GB:10&member_of=@aggC") == cands(
        "numa1_0:VCPU=1 ss2:DISK_GB=10"
    )
    assert shared.search("resources=VCPU:1&member_of=!@aggA") == cands("cn3:VCPU=1")
    assert shared.search("resources=VCPU:1&member_of=@aggA&member_of=@aggB") == []


def test_in_tree_keeps_sharing_out_of_the_unsuffixed_group(shared):
    assert shared.search("resources=VCPU:1,DISK_GB:10&in_tree=%cn1") == []
    assert shared.search("resources=VCPU:1&resources1=DISK_GB:10&in_tree1=%ss") == cands(
        "cn1:VCPU=1 ss:DISK_GB=10", "numa1_0:VCPU=1 ss:DISK_GB=10", "cn2:VCPU=1 ss:DISK_GB=10"
    )


def test_granular_sharing_is_anchored_to_each_tree(shared):
    found = shared.search(
        "resources=VCPU:1&resources_D=DISK_GB:10&required_D=MISC_SHARES_VIA_AGGREGATE"
        "&member_of=@aggA"
    )
    assert found == cands(
        "cn1:VCPU=1 ss:DISK_GB=10",
        "cn1:VCPU=1 ss2:DISK_GB=10",
        "numa1_0:VCPU=1 ss:DISK_GB=10",
        "numa1_0:VCPU=1 ss2:DISK_GB=10",
        "cn2:VCPU=1 ss:DISK_GB=10",
    )


def test_root_required_filters_the_anchor_root(shared):
    shared.provider("cn4", inventory={"VCPU": 8}, traits=("CUSTOM_GOLD",))
    assert shared.search("resources=VCPU:1&root_required=CUSTOM_GOLD") == cands("cn4:VCPU=1")
    assert len(shared.search("resources=VCPU:1&root_required=!CUSTOM_GOLD")) == 4
    found = shared.search("resources=VCPU:1,DISK_GB:1&root_required=!MISC_SHARES_VIA_AGGREGATE")
    assert len(found) == 6  # sharing providers still serve the allowed roots
    assert shared.search("resources=VCPU:1&root_required=HW_CPU_X86_AVX2") == []


def test_narrowed_search_still_reports_a_later_unknown_trait(shared):
    # Group 1 only fits cn3, which member_of in group 2 rules out: the narrowed
    # read finds nothing for group 1, yet (like upstream, which reads all) the
    # unknown trait of group 3 must be refused.
    query = (
        "resources1=VCPU:8&member_of1=@aggB&resources2=VCPU:1&member_of2=@aggA"
        "&resources3=VCPU:1&required3=CUSTOM_UNKNOWN&group_policy=none"
    )
    with pytest.raises(BadRequest, match="CUSTOM_UNKNOWN"):
        shared.search(query)


# -- truncation ------------------------------------------------------------------


@pytest.fixture
def wide(world: World) -> World:
    """Three roots, each with four PGPU children of one VGPU each."""
    for r in range(3):
        world.provider(f"root{r}")
        for c in range(4):
            world.provider(f"gpu{r}{c}", parent=f"root{r}", inventory={"VGPU": 1})
    return world


def test_wide_trees_give_every_isolated_combination(wide):
    query = "resources_A=VGPU:1&resources_B=VGPU:1&group_policy=isolate"
    assert len(wide.search(query)) == 3 * 4 * 3
    assert len(wide.search("resources=VGPU:2")) == 0  # one VGPU per provider


def test_max_candidates_depth_first_fills_from_the_first_tree(wide):
    query = "resources_A=VGPU:1&resources_B=VGPU:1&group_policy=isolate"
    found = wide.search(query, max_candidates=5)
    assert len(found) == 5
    assert {entry[3] for c in found for entry in c} == {"0"}  # all from root0's gpus


def test_max_candidates_breadth_first_is_fair_across_roots(wide):
    query = "resources_A=VGPU:1&resources_B=VGPU:1&group_policy=isolate"
    found = wide.search(query, max_candidates=6, strategy="breadth-first")
    roots = sorted(entry[3] for c in found for entry in sorted(c)[:1])
    assert roots == ["0", "0", "1", "1", "2", "2"]


def test_limit_keeps_summaries_of_the_returned_trees_only(wide):
    result = wide.result("resources=VGPU:1&limit=2")
    assert len(result.allocation_requests) == 2
    assert len(result.provider_summaries) == 5  # root0 and its four gpus
    sampled = wide.result("resources=VGPU:1&limit=3", randomize=True)
    assert len(sampled.allocation_requests) == 3
