"""One GET /allocation_candidates may make only so much: a request whose
groups multiply past `candidates_answer_budget` is refused 400 naming the
setting before it spends the memory, while `limit` keeps such a request cheap
and answered. Both with the in-memory index and on the database alone."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.api.test_candidates import Cloud, get
from tests.conftest import PlacementClient

CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB", "SRIOV_NET_VF", "VGPU", "PCI_DEVICE")
SIX_GROUPS = "&".join(f"resources{i}=VCPU:1" for i in range(1, 7)) + "&group_policy=none"
ONE_GROUP_SIX_CLASSES = "resources=" + ",".join(f"{rc}:1" for rc in CLASSES)
BUDGET = 10_000  # both requests above would make 10**6


@pytest.fixture(params=[2048, 0], ids=["index", "database"])
def budgeted(request: pytest.FixtureRequest, api: Callable[..., PlacementClient]):
    """`budgeted(**settings)`: a client with the small budget, index on or off;
    the cloud is one root with ten children offering 1,000 of every class."""
    cloud = Cloud(api())
    cloud.provider("root")
    for child in range(10):
        cloud.provider(f"child{child}", "root", {rc: 1000 for rc in CLASSES})

    def make(**settings: object) -> PlacementClient:
        return api(
            **{
                "candidates_index_max_mb": request.param,
                "candidates_answer_budget": BUDGET,
                **settings,
            }
        )

    return make


@pytest.mark.parametrize("query", [SIX_GROUPS, ONE_GROUP_SIX_CLASSES])
def test_a_request_past_the_budget_is_refused_naming_the_setting(budgeted, query):
    client = budgeted()
    for _ in range(2):  # the second ask goes through the kept answers
        body = get(client, query, status=400)
        (error,) = body["errors"]
        assert "candidates_answer_budget" in error["detail"]
        assert f"more than {BUDGET}" in error["detail"]
        assert "limit=N" in error["detail"]


def test_limit_keeps_many_groups_answered(budgeted):
    client = budgeted()
    for _ in range(3):  # asked again: the kept-answer path must not refuse it either
        body = get(client, f"{SIX_GROUPS}&limit=5")
        assert len(body["allocation_requests"]) == 5
        assert len(body["provider_summaries"]) == 11


def test_what_one_tree_offers_one_group_counts_whatever_the_limit(budgeted):
    """Six classes, each from any of ten providers of one tree: the group's
    parts are that product, made before any limit applies."""
    body = get(budgeted(), f"{ONE_GROUP_SIX_CLASSES}&limit=5", status=400)
    assert "candidates_answer_budget" in body["errors"][0]["detail"]


def test_an_answer_within_the_budget_is_whole(budgeted):
    three = "&".join(f"resources{i}=VCPU:1" for i in range(1, 4)) + "&group_policy=none"
    body = get(budgeted(), three)
    assert len(body["allocation_requests"]) == 1000  # every child for each of 3 groups


def test_no_budget_makes_everything(budgeted):
    four = "&".join(f"resources{i}=VCPU:1" for i in range(1, 5)) + "&group_policy=none"
    body = get(budgeted(candidates_answer_budget=-1), four)
    assert len(body["allocation_requests"]) == 10_000


def test_a_refused_search_asks_the_server_to_free_its_memory(budgeted, monkeypatch):
    asked = []
    monkeypatch.setattr("tally.memory.release_soon", lambda: asked.append(True))
    client = budgeted()
    get(client, f"{SIX_GROUPS}&limit=5")
    assert asked == []
    get(client, SIX_GROUPS, status=400)
    assert asked == [True]


# -- the work of a search, not just its answer ---------------------------------
#
#     host                     (no inventory)
#     |-- dev0 .. dev9         VCPU 1 each
#     `-- big                  VCPU 1000, CUSTOM_BIG
#
# Eleven groups of VCPU:1 that refuse `big` cannot fit on the ten devices: the
# search sees it at once from the room of the devices together (and says so
# with an empty answer, as upstream does). With a twelfth group that may take
# `big`, the room together is ample, yet the eleven still cannot fit: only
# trying tells, 10! placements and more, so the work is bounded instead.

DEVICES = 10


def _groups(count: int, *, one_may_take_big: bool = False, limit: bool = False) -> str:
    query = [f"resources{i}=VCPU:1&required{i}=!CUSTOM_BIG" for i in range(1, count + 1)]
    if one_may_take_big:
        query.append(f"resources{count + 1}=VCPU:1")
    return "&".join(query) + "&group_policy=none" + ("&limit=1" if limit else "")


@pytest.fixture(params=[2048, 0], ids=["index", "database"])
def devices(request: pytest.FixtureRequest, api: Callable[..., PlacementClient]):
    """`devices(**settings)`: a client over the tree above, index on or off."""
    cloud = Cloud(api())
    cloud.provider("host")
    for device in range(DEVICES):
        cloud.provider(f"dev{device}", "host", {"VCPU": 1})
    cloud.provider("big", "host", {"VCPU": 1000}, traits=["CUSTOM_BIG"])

    def make(**settings: object) -> PlacementClient:
        return api(**{"candidates_index_max_mb": request.param, **settings})

    make.cloud = cloud  # type: ignore[attr-defined]
    return make


@pytest.mark.parametrize("limit", [False, True], ids=["whole", "limit=1"])
def test_more_groups_than_devices_is_an_empty_answer_without_trying(devices, limit):
    """Answered from the room alone: not one placement is tried (a budget of 10
    units of work would refuse the walk)."""
    client = devices(candidates_answer_budget=10)
    for _ in range(2):  # the second ask goes through the kept answers
        body = get(client, _groups(DEVICES + 1, limit=limit))
        assert body["allocation_requests"] == []
        assert body["provider_summaries"] == {}


@pytest.mark.parametrize("limit", [False, True], ids=["whole", "limit=1"])
def test_a_search_that_only_trying_can_decide_is_refused_past_the_budget(devices, limit):
    """Eleven groups on ten devices beside a twelfth that may take `big`: with
    the default budget, refused at once (this took minutes, for an empty answer)."""
    client = devices()
    for _ in range(2):
        body = get(client, _groups(DEVICES + 1, one_may_take_big=True, limit=limit), status=400)
        (error,) = body["errors"]
        assert error["code"] == "placement.undefined_code"
        assert "candidates_answer_budget" in error["detail"]
        assert "more than 250000" in error["detail"]


@pytest.mark.parametrize("limit", [False, True], ids=["whole", "limit=1"])
def test_the_combinations_tried_count_whatever_the_answer(devices, limit):
    """Seven groups on six devices (the others taken) beside one that may take
    `big`: an empty answer, found by trying some 12,000 partial placements; a
    budget of 2,000 refuses it, with `limit` or without."""
    for device in range(6, DEVICES):  # leave six free devices
        devices.cloud.allocate(f"dev{device}", VCPU=1)
    client = devices(candidates_answer_budget=2000)
    body = get(client, _groups(7, one_may_take_big=True, limit=limit), status=400)
    assert "candidates_answer_budget" in body["errors"][0]["detail"]
    allowed = devices(candidates_answer_budget=-1)
    assert get(allowed, _groups(7, one_may_take_big=True, limit=limit))["allocation_requests"] == []


def test_the_deadline_stops_a_search_with_no_budget(devices):
    client = devices(candidates_answer_budget=-1, candidates_search_seconds=1)
    result = client.simulate_get(
        "/allocation_candidates", query_string=_groups(DEVICES + 1, one_may_take_big=True)
    )
    assert result.status_code == 503, result.text
    assert result.headers["retry-after"] == "1"
    (error,) = result.json["errors"]
    assert error["title"] == "Service Unavailable"
    assert "candidates_search_seconds" in error["detail"]
    assert "past 1 seconds" in error["detail"]


@pytest.mark.parametrize(
    ("asks", "expected"),
    [
        ((2, 2, 2, 1, 1, 1), 36),  # each child one 2 and one 1: 3! * 3!
        ((2, 2, 2, 2, 1), 0),  # four 2s, three places for a 2
        ((2, 2, 2, 1, 1, 1, 1), 0),  # 10 asked, 9 of room
        ((1, 1, 1, 1, 1, 1, 1, 1, 1), 1680),  # 9!/(3! 3! 3!): full to the last VCPU
    ],
)
def test_room_decides_only_what_cannot_fit(api, asks, expected):
    """Three children of 3 VCPU: what fits is answered whole, what cannot is
    empty, index on and off alike."""
    cloud = Cloud(api())
    cloud.provider("host")
    for child in range(3):
        cloud.provider(f"child{child}", "host", {"VCPU": 3})
    query = "&".join(f"resources{i}=VCPU:{n}" for i, n in enumerate(asks, 1))
    query += "&group_policy=none"
    for index_mb in (2048, 0):
        body = get(api(candidates_index_max_mb=index_mb), query)
        assert len(body["allocation_requests"]) == expected
