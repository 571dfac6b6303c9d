"""GET /allocation_candidates over HTTP: microversion gates and response
shapes (1.10 .. 1.39), query errors with Placement's messages and codes, the
query forms on a small cloud built through the API, and the truncation
settings.

The cloud (`cloud` fixture):

    cn1  VCPU 8, MEMORY_MB 4096             aggA   HW_CPU_X86_AVX2
    |-- numa0  VCPU 4                               HW_NUMA_ROOT
    |   `-- pf0  SRIOV_NET_VF 8                     CUSTOM_PHYSNET1
    `-- numa1  VCPU 4                               HW_NUMA_ROOT
    cn2  VCPU 8, MEMORY_MB 4096, DISK_GB 500 aggA, aggB
    ss   DISK_GB 1000                        aggA   MISC_SHARES_VIA_AGGREGATE
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable

import pytest

from tests.conftest import PlacementClient

AGG_A = "aaaaaaaa-0000-4000-8000-000000000001"
AGG_B = "bbbbbbbb-0000-4000-8000-000000000002"


class Cloud:
    """Providers made through the API, by name."""

    def __init__(self, client: PlacementClient) -> None:
        self.client = client
        self.uuids: dict[str, str] = {}

    def provider(self, name, parent=None, inventory=None, traits=(), aggs=()):  # noqa: ANN001
        body = {"name": name, "uuid": str(uuidlib.uuid4())}
        if parent:
            body["parent_provider_uuid"] = self.uuids[parent]
        self._ok(self.client.simulate_post("/resource_providers", json=body))
        uuid = self.uuids[name] = body["uuid"]
        if inventory:
            inventories = {rc: {"total": n} for rc, n in inventory.items()}
            self._put(uuid, "inventories", {"inventories": inventories})
        for trait in traits:
            if trait.startswith("CUSTOM_"):
                self._ok(self.client.simulate_put(f"/traits/{trait}"))
        if traits:
            self._put(uuid, "traits", {"traits": list(traits)})
        if aggs:
            self._put(uuid, "aggregates", {"aggregates": list(aggs)})

    def allocate(self, name: str, **resources: int) -> None:
        body = {
            "allocations": {self.uuids[name]: {"resources": resources}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        self._ok(self.client.simulate_put(f"/allocations/{uuidlib.uuid4()}", json=body))

    def _put(self, uuid: str, what: str, body: dict) -> None:
        path = f"/resource_providers/{uuid}"
        body["resource_provider_generation"] = self.client.simulate_get(path).json["generation"]
        self._ok(self.client.simulate_put(f"{path}/{what}", json=body))

    @staticmethod
    def _ok(result) -> None:  # noqa: ANN001
        assert result.status_code < 300, result.text

    def name(self, uuid: str) -> str:
        return {u: n for n, u in self.uuids.items()}[uuid]


@pytest.fixture
def cloud(api: Callable[..., PlacementClient]) -> Cloud:
    built = Cloud(api())
    built.provider(
        "cn1", inventory={"VCPU": 8, "MEMORY_MB": 4096}, aggs=(AGG_A,), traits=("HW_CPU_X86_AVX2",)
    )
    built.provider("numa0", "cn1", {"VCPU": 4}, traits=("HW_NUMA_ROOT",))
    built.provider("pf0", "numa0", {"SRIOV_NET_VF": 8}, traits=("CUSTOM_PHYSNET1",))
    built.provider("numa1", "cn1", {"VCPU": 4}, traits=("HW_NUMA_ROOT",))
    built.provider(
        "cn2", inventory={"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 500}, aggs=(AGG_A, AGG_B)
    )
    built.provider(
        "ss", inventory={"DISK_GB": 1000}, aggs=(AGG_A,), traits=("MISC_SHARES_VIA_AGGREGATE",)
    )
    return built


def get(client: PlacementClient, query: str, status: int = 200) -> dict:
    result = client.simulate_get("/allocation_candidates", query_string=query)
    assert result.status_code == status, result.text
    return result.json


def picks(cloud: Cloud, body: dict) -> list[dict[str, dict[str, int]]]:
    """Allocation requests as {provider name: resources}, sorted."""
    found = [
        {cloud.name(u): a["resources"] for u, a in r["allocations"].items()}
        for r in body["allocation_requests"]
    ]
    return sorted(found, key=lambda d: sorted((k, sorted(v.items())) for k, v in d.items()))


# -- gates and errors ------------------------------------------------------------


def test_not_found_before_1_10(api):
    assert api("1.9").simulate_get("/allocation_candidates?resources=VCPU:1").status_code == 404


@pytest.mark.parametrize(
    ("version", "query", "message"),
    [
        ("1.10", "", "'resources' is a required property"),
        ("1.10", "resources=", "Got: empty string."),
        ("1.10", "resources=VCPU", "Badly formed resources parameter"),
        ("1.10", "resources=MCPU:1", "Invalid resource class in resources parameter"),
        ("1.15", "resources=VCPU:1&limit=5", "'limit' was unexpected"),
        ("1.16", "resources=VCPU:1&limit=0", "Failed validating 'pattern'"),
        ("1.16", "resources=VCPU:1&required=A", "'required' was unexpected"),
        ("1.17", "resources=VCPU:1&required=CUSTOM_NOPE", "No such trait(s): CUSTOM_NOPE"),
        ("1.17", "resources=VCPU:1&required=!A", "HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !A"),
        ("1.24", "resources=VCPU:1&resources1=VCPU:1", "'resources1' was unexpected"),
        ("1.25", "resources01=VCPU:1", "does not match any of the regexes"),
        ("1.33", "resources1@=VCPU:1", "^member_of([a-zA-Z0-9_-]{1,64})?$"),
        ("1.25", "resources=VCPU:1&group_policy=bogus", "'bogus' is not one of"),
        ("1.25", "resources1=VCPU:1&resources2=VCPU:1", '"group_policy" parameter is required'),
        ("1.30", "resources=VCPU:1&in_tree=" + AGG_A, "Invalid query string parameters"),
        ("1.31", "resources=VCPU:1&in_tree=nope", "Expected 'in_tree' parameter to be a format"),
        ("1.23", f"resources=VCPU:1&member_of={AGG_A}&member_of={AGG_B}", "Multiple member_of"),
        ("1.34", "resources=VCPU:1&root_required=A", "'root_required' does not match any"),
        ("1.38", "resources=VCPU:1&required=in:A,B", "only supported since microversion 1.39"),
    ],
)
def test_bad_queries_are_400_with_upstream_messages(api, version, query, message):
    body = get(api(version), query, status=400)
    assert message in body["errors"][0]["detail"]


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("resources=VCPU:1&root_required=A&root_required=B", "placement.query.duplicate_key"),
        ("resources=VCPU:1&root_required=A,!A", "placement.query.bad_value"),
        ("resources_A=VCPU:1&same_subtree=_A,,_B", "placement.query.bad_value"),
        ("resources_A=VCPU:1&required_B=A&group_policy=none", "placement.query.bad_value"),
        (f"member_of_A={AGG_A}&same_subtree=_A", "placement.query.missing_value"),
    ],
)
def test_query_error_codes(api, query, code):
    assert get(api("1.39"), query, status=400)["errors"][0]["code"] == code


# -- response shapes ------------------------------------------------------------------


def test_list_form_before_1_12_and_requested_classes_only(cloud, api):
    body = get(api("1.10"), "resources=DISK_GB:10")
    assert sorted(
        cloud.name(a["resource_provider"]["uuid"])
        for r in body["allocation_requests"]
        for a in r["allocations"]
    ) == ["cn2", "ss"]
    assert body["provider_summaries"][cloud.uuids["cn2"]] == {
        "resources": {"DISK_GB": {"capacity": 500, "used": 0}}
    }


def test_shapes_by_microversion(cloud, api):
    query = "resources=VCPU:1,MEMORY_MB:1024&required=HW_CPU_X86_AVX2"
    at_1_14 = api("1.14").simulate_get("/allocation_candidates", query_string="resources=VCPU:1")
    assert "cache-control" not in at_1_14.headers
    at_1_17 = get(api("1.17"), query)  # before 1.29: one provider per tree, so cn1 alone
    summary = at_1_17["provider_summaries"][cloud.uuids["cn1"]]
    assert summary == {
        "resources": {
            "VCPU": {"capacity": 8, "used": 0},
            "MEMORY_MB": {"capacity": 4096, "used": 0},
        },
        "traits": ["HW_CPU_X86_AVX2"],
    }
    assert "mappings" not in at_1_17["allocation_requests"][0]
    latest = api("1.39").simulate_get("/allocation_candidates", query_string=query)
    assert latest.headers["cache-control"] == "no-cache"
    assert "last-modified" in latest.headers
    body = latest.json
    assert len(body["provider_summaries"]) == 4  # the whole cn1 tree from 1.29
    numa0 = body["provider_summaries"][cloud.uuids["numa0"]]
    assert numa0["parent_provider_uuid"] == cloud.uuids["cn1"]
    assert numa0["root_provider_uuid"] == cloud.uuids["cn1"]
    mapped = sorted(sorted(map(cloud.name, r["mappings"][""])) for r in body["allocation_requests"])
    assert mapped == [["cn1"], ["cn1", "numa0"], ["cn1", "numa1"]]


def test_1_27_summaries_show_every_class(cloud, api):
    before = get(api("1.26"), "resources=VCPU:1")["provider_summaries"]
    after = get(api("1.27"), "resources=VCPU:1")["provider_summaries"]
    assert before[cloud.uuids["cn2"]]["resources"].keys() == {"VCPU"}
    assert after[cloud.uuids["cn2"]]["resources"].keys() == {"VCPU", "MEMORY_MB", "DISK_GB"}


# -- query forms -------------------------------------------------------------------------


def test_nested_and_sharing_combinations(cloud, api):
    body = get(api(), "resources=VCPU:1,DISK_GB:100")
    assert picks(cloud, body) == sorted(
        [
            {"cn1": {"VCPU": 1}, "ss": {"DISK_GB": 100}},
            {"numa0": {"VCPU": 1}, "ss": {"DISK_GB": 100}},
            {"numa1": {"VCPU": 1}, "ss": {"DISK_GB": 100}},
            {"cn2": {"VCPU": 1, "DISK_GB": 100}},
            {"cn2": {"VCPU": 1}, "ss": {"DISK_GB": 100}},
        ],
        key=lambda d: sorted((k, sorted(v.items())) for k, v in d.items()),
    )
    assert len(body["provider_summaries"]) == 6
    old = get(api("1.28"), "resources=VCPU:1,SRIOV_NET_VF:1")
    assert old["allocation_requests"] == []  # two providers of one tree


def test_usage_counts_against_capacity(cloud, api):
    cloud.allocate("cn2", DISK_GB=450)
    body = get(api(), "resources=VCPU:1,DISK_GB:100")
    assert [p for p in picks(cloud, body) if "cn2" in p] == [
        {"cn2": {"VCPU": 1}, "ss": {"DISK_GB": 100}}
    ]
    assert body["provider_summaries"][cloud.uuids["cn2"]]["resources"]["DISK_GB"]["used"] == 450


def test_traits_member_of_in_tree_and_root_required(cloud, api):
    client = api()
    assert len(get(client, "resources=VCPU:1&required=HW_NUMA_ROOT")["allocation_requests"]) == 2
    assert len(get(client, "resources=VCPU:1&required=!HW_NUMA_ROOT")["allocation_requests"]) == 2
    any_of = get(client, "resources=VCPU:1&required=in:HW_NUMA_ROOT,CUSTOM_PHYSNET1")
    assert len(any_of["allocation_requests"]) == 2
    assert len(get(client, f"resources=VCPU:1&member_of={AGG_B}")["allocation_requests"]) == 1
    assert len(get(client, f"resources=VCPU:1&member_of=!{AGG_B}")["allocation_requests"]) == 3
    in_tree = get(client, f"resources=VCPU:1&in_tree={cloud.uuids['pf0']}")
    assert len(in_tree["allocation_requests"]) == 3
    rooted = get(client, "resources=VCPU:1&root_required=HW_CPU_X86_AVX2")
    assert len(rooted["allocation_requests"]) == 3


def test_granular_groups_policies_and_same_subtree(cloud, api):
    client = api()
    isolated = get(
        client,
        "resources_A=VCPU:1&resources_B=VCPU:1&in_tree_A="
        f"{cloud.uuids['cn1']}&group_policy=isolate",
    )
    assert len(isolated["allocation_requests"]) == 6  # 3 providers of cn1, ordered pairs
    tied = get(
        client,
        "resources_C=VCPU:1&resources_N=SRIOV_NET_VF:1&same_subtree=_C,_N&group_policy=none",
    )
    # VCPU from pf0's ancestors only: its parent numa0, or the root cn1.
    assert picks(cloud, tied) == [
        {"cn1": {"VCPU": 1}, "pf0": {"SRIOV_NET_VF": 1}},
        {"numa0": {"VCPU": 1}, "pf0": {"SRIOV_NET_VF": 1}},
    ]
    mappings = [r["mappings"] for r in tied["allocation_requests"]]
    assert sorted(cloud.name(m["_C"][0]) for m in mappings) == ["cn1", "numa0"]
    assert {cloud.name(m["_N"][0]) for m in mappings} == {"pf0"}


def test_limit_uses_the_first_value_and_trims_summaries(cloud, api):
    body = get(api(), "resources=VCPU:1&limit=1&limit=10")
    assert len(body["allocation_requests"]) == 1
    (uuid,) = body["allocation_requests"][0]["allocations"]
    root = body["provider_summaries"][uuid]["root_provider_uuid"]
    assert {s["root_provider_uuid"] for s in body["provider_summaries"].values()} == {root}


# -- truncation settings -----------------------------------------------------------------


@pytest.fixture
def wide(api: Callable[..., PlacementClient]) -> Cloud:
    built = Cloud(api())
    for r in range(3):
        built.provider(f"host{r}")
        for c in range(3):
            built.provider(f"gpu{r}{c}", f"host{r}", {"VGPU": 1})
    return built


def roots_of(cloud: Cloud, body: dict) -> list[str]:
    return sorted(
        cloud.name(u)[3] for r in body["allocation_requests"] for u in list(r["allocations"])[:1]
    )


def test_max_allocation_candidates_depth_and_breadth_first(wide, api):
    query = "resources_A=VGPU:1&resources_B=VGPU:1&group_policy=isolate"
    assert len(get(api(), query)["allocation_requests"]) == 18
    deep = get(api(max_allocation_candidates=3), query)
    assert roots_of(wide, deep) == ["0", "0", "0"]
    fair = get(
        api(
            max_allocation_candidates=3,
            allocation_candidates_generation_strategy="breadth-first",
        ),
        query,
    )
    assert roots_of(wide, fair) == ["0", "1", "2"]
    assert len(fair["provider_summaries"]) == 12


def test_randomized_limit_is_a_sample_of_the_full_set(wide, api):
    everything = get(api(), "resources=VGPU:1")["allocation_requests"]
    sample = get(api(randomize_allocation_candidates=True), "resources=VGPU:1&limit=4")
    assert len(sample["allocation_requests"]) == 4
    assert all(r in everything for r in sample["allocation_requests"])


def test_randomized_limit_draws_from_every_tree_and_summarizes_only_its_own(wide, api):
    client = api(randomize_allocation_candidates=True)
    seen: set[str] = set()
    for _ in range(40):  # a tree missed 40 times in a row: (2/3)^40, never
        body = get(client, "resources=VGPU:1&limit=1")
        assert len(body["allocation_requests"]) == 1
        assert len(body["provider_summaries"]) == 4  # the chosen tree only
        seen |= set(roots_of(wide, body))
    assert seen == {"0", "1", "2"}
