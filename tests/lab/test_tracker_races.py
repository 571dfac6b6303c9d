"""The lab's writes to Placement that race other writers: each lost race is read
and tried again a bounded number of times, and losing every one is a failure said
as such, never a run that looks done."""

from __future__ import annotations

import dataclasses
import datetime as dt

import httpx
import pytest

from tally.clients.errors import GaveUp
from tally.clients.placement import PlacementClient
from tally.clients.races import ATTEMPTS
from tally.compute.ops import hosts
from tally.compute.report import ReportClient
from tally.compute.store import hosts as host_store
from tally.retrying import retried

RACE = {"errors": [{"status": 409, "code": "placement.concurrent_update", "detail": "race"}]}
LONG_AGO = dt.datetime(2000, 1, 1)


def racing_lab(cloud, loses: str) -> tuple[object, list[str]]:
    """The lab's compute context with a Placement that answers every PUT whose path
    ends with `loses` with a generation race (the rest goes to the real one)."""
    refused: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "PUT" and request.url.path.endswith(loses):
            refused.append(request.url.path)
            return httpx.Response(409, json=RACE)
        return cloud.transport.handle_request(request)

    client = PlacementClient(
        "http://lab.test/placement", version="1.39", transport=httpx.MockTransport(handle)
    )
    return dataclasses.replace(cloud.server.lab, placement=ReportClient(client)), refused


def test_a_tracker_run_that_loses_every_race_fails_and_stays_due(cloud):
    rp = cloud.host("cmp-1")["provider_uuid"]
    inventory = cloud.placement.inventories(rp)
    inventory["inventories"]["MEMORY_MB"]["reserved"] = 4096  # the tracker will rewrite it
    cloud.placement.put_inventories(
        rp, inventory["resource_provider_generation"], inventory["inventories"]
    )
    lab, refused = racing_lab(cloud, "/inventories")
    host = host_store.get(lab.engine, name="cmp-1")
    host_store.mark_reported(lab.engine, [host["uuid"]], LONG_AGO)

    result = hosts.report(lab, host_store.get(lab.engine, name="cmp-1"))

    assert len(refused) == ATTEMPTS
    assert result["inventory_written"] is False
    assert "kept changing" in result["error"]
    assert host_store.get(lab.engine, name="cmp-1")["reported_at"] == LONG_AGO  # still due
    assert cloud.placement.inventories(rp)["inventories"]["MEMORY_MB"]["reserved"] == 4096


def test_the_status_trait_raises_when_every_race_is_lost(cloud):
    lab, refused = racing_lab(cloud, "/traits")
    rp = cloud.host("cmp-2")["provider_uuid"]
    with pytest.raises(GaveUp):
        lab.placement.set_disabled_trait(rp, True)
    assert len(refused) == ATTEMPTS


def test_the_retry_helper_raises_when_it_gives_up_and_lets_other_errors_through():
    runs: list[int] = []

    def lose() -> None:
        runs.append(1)
        raise KeyError("race")

    with pytest.raises(RuntimeError, match="gave up") as caught:
        retried(lose, attempts=4, on=(KeyError,), gave_up=lambda _: RuntimeError("gave up"))
    assert len(runs) == 4 and isinstance(caught.value.__cause__, KeyError)

    with pytest.raises(KeyError):  # not a race: at once
        retried(
            lose,
            attempts=4,
            on=(KeyError,),
            when=lambda _: False,
            gave_up=lambda _: RuntimeError(),
        )
    assert len(runs) == 5
    wins = iter([KeyError(), KeyError(), None])

    def third_time() -> str:
        error = next(wins)
        if error:
            raise error
        return "won"

    assert (
        retried(third_time, attempts=3, on=(KeyError,), gave_up=lambda _: RuntimeError()) == "won"
    )
