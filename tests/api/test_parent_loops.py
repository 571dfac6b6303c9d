"""A parent loop written into the database behind the API's back (providers that
are each other's parent) never hangs a request: every walk up or down a tree that
meets one stops, and the request answers a 409 naming the providers of the loop,
within a second, on the index path and the database path alike.

    root (VCPU 4)  <-- parent --  c1 (VCPU 4)      root's parent set to c1:
         ^                                         root -> c1 -> root -> ...
         +---------- parent --  c2 (VCPU 4)
"""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from tally.db import journal
from tally.db import schema as t
from tests.api.test_candidates import Cloud

SAME_SUBTREE = "resources1=VCPU:3&resources2=VCPU:3&same_subtree=1,2&group_policy=none"
SECONDS = 1.0


@pytest.fixture(params=[2048, 0], ids=["index", "database"])
def index_mb(request: pytest.FixtureRequest) -> int:
    return request.param


def _looped(api, engine: sa.Engine, index_mb: int):  # noqa: ANN001, ANN202
    """The cloud above, the loop written, the client (its index told of the change)."""
    client = api(candidates_index_max_mb=index_mb)
    cloud = Cloud(client)
    cloud.provider("root", inventory={"VCPU": 4})
    cloud.provider("c1", parent="root", inventory={"VCPU": 4})
    cloud.provider("c2", parent="root", inventory={"VCPU": 4})
    rp = t.resource_providers
    with engine.begin() as conn:
        c1 = conn.execute(sa.select(rp.c.id).where(rp.c.uuid == cloud.uuids["c1"])).scalar_one()
        conn.execute(rp.update().where(rp.c.uuid == cloud.uuids["root"]).values(
            parent_provider_id=c1))  # fmt: skip
        journal.touch_everything(conn)  # (as a write through the API would tell the index)
    return client, cloud


def _within(seconds: float, call):  # noqa: ANN001, ANN202
    """call()'s result, or a failure when it has not returned within `seconds`."""
    done: list = []
    thread = threading.Thread(target=lambda: done.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    if not done:
        pytest.fail(f"no answer within {seconds} s: the request is stuck")
    return done[0]


def _names_the_loop(result, cloud: Cloud) -> None:  # noqa: ANN001
    assert result.status_code == 409, result.text
    (error,) = result.json["errors"]
    assert error["code"] == "placement.undefined_code"
    assert "parent loop" in error["detail"]
    for name in ("root", "c1"):
        assert cloud.uuids[name] in error["detail"]
    assert cloud.uuids["c2"] not in error["detail"]  # (not in the loop)


def test_same_subtree_over_a_loop_is_a_409_naming_it(api, engine, index_mb):
    client, cloud = _looped(api, engine, index_mb)
    result = _within(
        SECONDS,
        lambda: client.simulate_get("/allocation_candidates", query_string=SAME_SUBTREE),
    )
    _names_the_loop(result, cloud)


def test_reparenting_inside_a_loop_is_a_409_naming_it(api, engine):
    client, cloud = _looped(api, engine, 0)
    body = {"name": "c1", "parent_provider_uuid": cloud.uuids["c2"]}
    result = _within(
        SECONDS,
        lambda: client.simulate_put(
            f"/resource_providers/{cloud.uuids['c1']}",
            json=body,
            headers={"openstack-api-version": "placement 1.37"},
        ),
    )
    _names_the_loop(result, cloud)


def test_unparenting_inside_a_loop_is_a_409_naming_it(api, engine):
    client, cloud = _looped(api, engine, 0)
    body = {"name": "c1", "parent_provider_uuid": None}
    result = _within(
        SECONDS,
        lambda: client.simulate_put(
            f"/resource_providers/{cloud.uuids['c1']}",
            json=body,
            headers={"openstack-api-version": "placement 1.37"},
        ),
    )
    _names_the_loop(result, cloud)
