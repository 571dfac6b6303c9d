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
