"""A service's calls carry the global request id it was asked to pass on
(`X-OpenStack-Request-ID`, as Nova's calls to Placement do), and only then."""

from __future__ import annotations

import httpx

from tally.clients.compute import ComputeClient
from tally.clients.http import global_request_id, new_request_id
from tally.clients.placement import PlacementClient


def recording() -> tuple[list[str | None], httpx.MockTransport]:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("x-openstack-request-id"))
        return httpx.Response(200, json={"version": {"version": "2.96"}, "usages": {}})

    return seen, httpx.MockTransport(handler)


def test_calls_inside_carry_the_global_request_id():
    seen, transport = recording()
    placement = PlacementClient("http://p", transport=transport, version="1.39")
    compute = ComputeClient("http://c", transport=transport, version="2.96")
    placement.usages("rp")
    ours = new_request_id()
    with global_request_id(ours):
        placement.usages("rp")
        compute.get("/servers")
        with global_request_id(None):  # a nested scope without one
            placement.usages("rp")
    placement.usages("rp")
    assert seen == [None, ours, ours, None, None]
    assert ours.startswith("req-") and len(ours) == 40
