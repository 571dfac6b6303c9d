"""A parent loop written into the database behind the API's back (providers that
are each other's parent) never hangs a request: every walk up or down a tree that
meets one stops, and the request answers a 409 naming the providers of the loop,
within a second, on the index path and the database path alike. A provider whose
root is not its parent's (a child hanging under another tree's root) is left out
of candidates by both paths, the index's log naming it.

    root (VCPU 4)  <-- parent --  c1 (VCPU 4)      root's parent set to c1:
         ^                                         root -> c1 -> root -> ...
         +---------- parent --  c2 (VCPU 4)
"""

from __future__ import annotations

import logging
import threading

import pytest
import sqlalchemy as sa

from tally.db import journal
from tally.db import schema as t
from tally.db.transaction import transaction
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
    with transaction(engine, write=True) as conn:
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


@pytest.mark.parametrize("parent", ["c2", None], ids=["reparent", "unparent"])
def test_reparenting_inside_a_loop_is_a_409_naming_it(api, engine, parent):
    client, cloud = _looped(api, engine, 0)
    body = {"name": "c1", "parent_provider_uuid": parent and cloud.uuids[parent]}
    result = _within(
        SECONDS,
        lambda: client.simulate_put(
            f"/resource_providers/{cloud.uuids['c1']}",
            json=body,
            headers={"openstack-api-version": "placement 1.37"},
        ),
    )
    _names_the_loop(result, cloud)


# -- a root that disagrees with the parent's, and a whole reload ------------------
#
#    r1 (VCPU 4)              r2 (VCPU 4)
#      |                        |
#    c1 (VCPU 4) root: r2     c2 (VCPU 4)      c1's stored root set to r2

QUERIES = (
    "resources=VCPU:1",
    "resources=VCPU:1&in_tree={c1}",
    "resources=VCPU:1&in_tree={r2}",
    "resources1=VCPU:3&resources2=VCPU:3&same_subtree=1,2&group_policy=none",
    "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate",
)


def _two_trees(api, index_mb: int) -> tuple:  # noqa: ANN001
    client = api(candidates_index_max_mb=index_mb)
    cloud = Cloud(client)
    cloud.provider("r1", inventory={"VCPU": 4})
    cloud.provider("c1", parent="r1", inventory={"VCPU": 4})
    cloud.provider("r2", inventory={"VCPU": 4})
    cloud.provider("c2", parent="r2", inventory={"VCPU": 4})
    return client, cloud


def _rewrite(engine: sa.Engine, cloud: Cloud, name: str, **values: str | None) -> None:
    """Set provider `name`'s parent/root (by provider name) behind the API's back."""
    rp = t.resource_providers
    with transaction(engine, write=True) as conn:
        ids = dict(conn.execute(sa.select(rp.c.uuid, rp.c.id)).all())
        row = {k: None if v is None else ids[cloud.uuids[v]] for k, v in values.items()}
        conn.execute(rp.update().where(rp.c.id == ids[cloud.uuids[name]]).values(**row))
        journal.touch_everything(conn)


def _answers(client, cloud: Cloud) -> list:  # noqa: ANN001
    found = []
    for query in QUERIES:
        result = client.simulate_get(
            "/allocation_candidates", query_string=query.format(**cloud.uuids)
        )
        found.append((result.status_code, result.json))
    return found


def test_a_child_under_another_trees_root_is_left_out_on_both_paths(api, engine, caplog):
    """Before: the index served c1 in r2's tree (its parent r1 in another), the
    database path answered in_tree=c1 with a 500 (a summary's parent not read)."""
    client, cloud = _two_trees(api, 2048)
    _rewrite(engine, cloud, "c1", root_provider_id="r2")
    caplog.set_level(logging.WARNING)
    on_index = _answers(client, cloud)
    on_database = _answers(api(candidates_index_max_mb=0), cloud)
    assert on_index == on_database
    for status, body in on_index:
        assert status == 200, body
        listed = {u for r in body["allocation_requests"] for u in r["allocations"]}
        assert cloud.uuids["c1"] not in listed | body["provider_summaries"].keys()
    assert {cloud.name(u) for u in on_index[0][1]["provider_summaries"]} == {"r1", "r2", "c2"}
    assert on_index[1][1]["allocation_requests"] == []  # in_tree of a provider left out
    said = [r.getMessage() for r in caplog.records if cloud.uuids["c1"] in r.getMessage()]
    assert said and "left out" in said[0] and "tally db check" in said[0], said


def test_a_parentless_provider_rooted_in_another_tree_is_left_out(api, engine):
    client, cloud = _two_trees(api, 2048)
    _rewrite(engine, cloud, "r1", root_provider_id="r2")  # r1 root of itself no more
    on_index = _answers(client, cloud)
    assert on_index == _answers(api(candidates_index_max_mb=0), cloud)
    assert {cloud.name(u) for u in on_index[0][1]["provider_summaries"]} == {"r2", "c2"}


def test_a_whole_reload_answers_as_a_fresh_index(api, engine):
    """Kept answers (asked twice: kept) go with a whole reload: after c2 is moved
    under r1 behind the API's back and every index told (touch_everything), the
    index answers as the database path does."""
    client, cloud = _two_trees(api, 2048)
    same_subtree = QUERIES[3].format(**cloud.uuids)
    for _ in range(2):
        before = client.simulate_get("/allocation_candidates", query_string=same_subtree).json
    _rewrite(engine, cloud, "c2", parent_provider_id="r1", root_provider_id="r1")
    on_index = _answers(client, cloud)
    assert on_index == _answers(api(candidates_index_max_mb=0), cloud)
    after = on_index[3][1]
    assert after != before
    assert after["provider_summaries"][cloud.uuids["c2"]]["root_provider_uuid"] == cloud.uuids["r1"]


def test_touch_everything_outside_the_write_helper_is_refused(engine):
    """On a bare engine.begin() the note was never flushed: every index went on
    answering from the rows it held, silently (kept answers included)."""
    with pytest.raises(RuntimeError, match="touch_everything"), engine.begin() as conn:
        journal.touch_everything(conn)
