"""A GET /allocation_candidates that finds nothing is kept with its verdict, found
later by the caller's global request id (Nova's) or Placement's own; one that
finds something is not kept."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.api.test_candidates import Cloud

NOVA_ID = f"req-{uuid.uuid4()}"


def records(client, request_id: str, wait: float = 10.0) -> list[dict]:  # noqa: ANN001
    """The failures kept for `request_id`, once the writer has written them
    (it writes off the request's path)."""
    deadline = time.monotonic() + wait
    while True:
        found = client.simulate_get("/tally/v1/failures", params={"request_id": request_id})
        assert found.status_code == 200, found.text
        if found.json["failures"] or time.monotonic() > deadline:
            return found.json["failures"]
        time.sleep(0.05)


@pytest.mark.parametrize("version", ["1.39", "1.30"])  # written straight to JSON, and not
def test_an_empty_answer_is_kept_with_its_verdict(api, version):
    client = api(version)
    cloud = Cloud(client)
    cloud.provider("cn1", inventory={"VCPU": 8, "MEMORY_MB": 4096})
    cloud.provider("cn2", inventory={"VCPU": 4, "MEMORY_MB": 4096})
    asked = client.simulate_get(
        "/allocation_candidates",
        query_string="resources=VCPU:6,MEMORY_MB:8192",
        headers={"x-openstack-request-id": NOVA_ID},
    )
    assert asked.status_code == 200 and asked.json["allocation_requests"] == []
    (kept,) = records(client, NOVA_ID)
    assert kept["global_request_id"] == NOVA_ID
    assert kept["request_id"] == asked.headers["openstack-request-id"]
    assert kept["query"] == "resources=VCPU:6,MEMORY_MB:8192"
    assert kept["microversion"] == version
    assert kept["reason"] == "resources=MEMORY_MB:8192"  # rules out both trees
    ruled = {c["constraint"]: c["rules_out"] for c in kept["verdict"]["constraints"]}
    assert ruled == {"resources=VCPU:6": 1, "resources=MEMORY_MB:8192": 2}
    # found by Placement's own id too
    assert records(client, asked.headers["openstack-request-id"]) == [kept]


def test_an_answer_with_candidates_is_not_kept(api):
    client = api("1.39")
    Cloud(client).provider("cn1", inventory={"VCPU": 8})
    mine = f"req-{uuid.uuid4()}"
    asked = client.simulate_get(
        "/allocation_candidates",
        query_string="resources=VCPU:1",
        headers={"x-openstack-request-id": mine},
    )
    assert asked.json["allocation_requests"]
    assert records(client, mine, wait=0.5) == []


def test_nothing_kept_when_the_setting_is_off(api):
    client = api("1.39", failures=False)
    Cloud(client).provider("cn1", inventory={"VCPU": 8})
    mine = f"req-{uuid.uuid4()}"
    client.simulate_get(
        "/allocation_candidates",
        query_string="resources=VCPU:100",
        headers={"x-openstack-request-id": mine},
    )
    assert records(client, mine, wait=0.5) == []
