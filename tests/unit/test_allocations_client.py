"""clients/allocations: the one owner of allocation bodies and of the generation retry,
over a mocked Placement (the lab's ReportClient goes through it too)."""

from __future__ import annotations

import json

import httpx
import pytest

from tally.clients import allocations as allocs
from tally.clients.errors import GaveUp
from tally.clients.placement import PlacementClient
from tally.clients.races import ATTEMPTS
from tally.compute.report import ClaimConflict, ReportClient

RP = "9a7f0c1e-0000-4000-8000-000000000001"
RACE = {"errors": [{"status": 409, "code": "placement.concurrent_update", "detail": "race"}]}


def placement(version: str, puts: list, refuse: int = 0) -> PlacementClient:
    """A Placement whose consumer holds 2 VCPU at generation 5 and which loses the
    first `refuse` writes to a generation race."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(
                200,
                json={
                    "allocations": {RP: {"resources": {"VCPU": 2}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": 5,
                    "consumer_type": "INSTANCE",
                },
            )
        puts.append(json.loads(request.content))
        if len(puts) <= refuse:
            return httpx.Response(409, json=RACE)
        return httpx.Response(204)

    return PlacementClient("http://p", version=version, transport=httpx.MockTransport(handle))


@pytest.mark.parametrize(
    ("version", "keys"),
    [
        ("1.0", {"allocations"}),
        ("1.8", {"allocations", "project_id", "user_id"}),
        ("1.28", {"allocations", "project_id", "user_id", "consumer_generation"}),
        ("1.38", {"allocations", "project_id", "user_id", "consumer_generation", "consumer_type"}),
    ],
)
def test_the_body_follows_the_microversion(version, keys):
    client = placement(version, [])
    body = allocs.body(client, allocs.Consumer("c", {RP: {"VCPU": 1}}, "p", "u", 5, "INSTANCE"))
    assert set(body) == keys
    if version in ("1.0", "1.8"):  # the list form before 1.12
        assert body["allocations"] == [
            {"resource_provider": {"uuid": RP}, "resources": {"VCPU": 1}}
        ]
    else:
        assert body["allocations"] == {RP: {"resources": {"VCPU": 1}}}


def test_update_sends_the_generation_read_and_retries_a_lost_race():
    puts: list = []
    client = placement("1.38", puts, refuse=1)
    written = allocs.update(
        client, "c", lambda c: allocs.dataclasses.replace(c, allocations={RP: {"VCPU": 1}})
    )
    assert written is not None and len(puts) == 2
    assert puts[-1]["consumer_generation"] == 5 and puts[-1]["allocations"][RP]["resources"] == {
        "VCPU": 1
    }


def test_giving_up_raises_never_passes_for_success():
    puts: list = []
    client = placement("1.38", puts, refuse=99)
    with pytest.raises(GaveUp):
        allocs.update(client, "c", lambda c: allocs.dataclasses.replace(c, allocations={}))
    assert len(puts) == ATTEMPTS
    # the lab's report client used to fall out of its loop as if it had written
    with pytest.raises(ClaimConflict):
        ReportClient(placement("1.38", [], refuse=99)).replace("c", {RP: {"VCPU": 1}}, "INSTANCE")
