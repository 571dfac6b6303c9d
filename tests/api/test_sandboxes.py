"""What if: the sandbox routes (issue 41). A sandbox's lifecycle, what its reads and
diff show, the refusals of the real writes it repeats, its commit (applied as shown,
or 409 naming what moved with nothing written), its limits and its policy.
(The exactness of every verdict against the real API: test_sandbox_exactness.py;
commits under concurrent writers: test_sandbox_commits.py.)"""

from __future__ import annotations

import uuid as uuidlib

import pytest

from tests.api.test_candidates import Cloud
from tests.conftest import PlacementClient

SANDBOXES = "/tally/v1/sandboxes"


@pytest.fixture
def client(api) -> PlacementClient:  # noqa: ANN001
    """An admin client over each backend's database (SQLite; PostgreSQL and MySQL
    when their test servers are named)."""
    return api()


@pytest.fixture
def cloud(client: PlacementClient) -> Cloud:
    """Two hosts; cn1 with a NUMA node holding a device; one server on cn1."""
    built = Cloud(client)
    built.provider("cn1", inventory={"VCPU": 8, "MEMORY_MB": 4096})
    built.provider("numa0", "cn1", {"VCPU": 4})
    built.provider("pf0", "numa0", {"SRIOV_NET_VF": 4})
    built.provider("cn2", inventory={"VCPU": 8, "MEMORY_MB": 4096})
    built.server = str(uuidlib.uuid4())
    body = {
        "allocations": {built.uuids["cn1"]: {"resources": {"VCPU": 6, "MEMORY_MB": 1024}}},
        "project_id": "demo",
        "user_id": "alice",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    assert client.simulate_put(f"/allocations/{built.server}", json=body).status_code == 204
    return built


def _sandbox(client: PlacementClient, **body) -> str:  # noqa: ANN003
    made = client.simulate_post(SANDBOXES, json=body)
    assert made.status_code == 201, made.text
    return f"{SANDBOXES}/{made.json['id']}"


def _change(client: PlacementClient, box: str, *changes: dict) -> list[dict]:
    result = client.simulate_post(f"{box}/changes", json={"changes": list(changes)})
    assert result.status_code == 200, result.text
    return result.json["steps"]


def _usages(client: PlacementClient, uuid: str, box: str = "") -> dict:
    return client.simulate_get(f"{box}/resource_providers/{uuid}/usages").json["usages"]


def test_a_move_shows_inside_and_leaves_the_live_cloud_alone(client, cloud):
    box = _sandbox(client)
    cn1, cn2 = cloud.uuids["cn1"], cloud.uuids["cn2"]
    (step,) = _change(client, box, {"kind": "move", "consumer": cloud.server, "to": "anywhere"})
    assert step["applied"] and step["error"] is None
    assert step["write"]["allocations"] == {cn2: {"MEMORY_MB": 1024, "VCPU": 6}}
    assert step["reads"]["consumers"] == {cloud.server: 1}
    assert _usages(client, cn1, box) == {"VCPU": 0, "MEMORY_MB": 0}
    assert _usages(client, cn2, box) == {"VCPU": 6, "MEMORY_MB": 1024}
    assert _usages(client, cn1) == {"VCPU": 6, "MEMORY_MB": 1024}  # live: as it was
    assert _usages(client, cn2) == {"VCPU": 0, "MEMORY_MB": 0}
    diff = client.simulate_get(f"{box}/diff").json
    assert diff["providers"][cn1]["usages"]["VCPU"] == {"before": 6, "after": 0}
    assert diff["providers"][cn2]["usages"]["VCPU"] == {"before": 0, "after": 6}
    assert diff["applied"] == 1 and diff["failed"] == []
    # a search inside sees the room made on cn1, outside it does not
    query = "resources=VCPU:8"
    inside = client.simulate_get(f"{box}/allocation_candidates", query_string=query).json
    outside = client.simulate_get("/allocation_candidates", query_string=query).json
    assert {u for r in inside["allocation_requests"] for u in r["allocations"]} == {cn1}
    assert {u for r in outside["allocation_requests"] for u in r["allocations"]} == {cn2}
    shown = client.simulate_get(f"{box}").json
    assert shown["revision"] == 1 and shown["steps"] == 1


def test_an_inventory_shrink_is_refused_as_the_real_write_is(client, cloud):
    box = _sandbox(client)
    cn1 = cloud.uuids["cn1"]
    change = {"kind": "inventory", "provider": cn1, "resource_class": "VCPU", "total": 4}
    (step,) = _change(client, box, change)
    body = {
        "resource_provider_generation": client.simulate_get(f"/resource_providers/{cn1}").json[
            "generation"
        ],
        "inventories": {"VCPU": {"total": 4}, "MEMORY_MB": {"total": 4096}},
    }
    real = client.simulate_put(f"/resource_providers/{cn1}/inventories", json=body)
    assert real.status_code == 409
    error = real.json["errors"][0]
    assert step["applied"] is False
    assert step["error"] == {"status": 409, "code": error["code"], "detail": error["detail"]}
    assert cloud.server in step["error"]["detail"]
    # moved away inside the sandbox first, the same shrink is applied
    _change(client, box, {"kind": "move", "consumer": cloud.server, "to": cloud.uuids["cn2"]})
    (again,) = _change(client, box, change)
    assert again["applied"], again
    failed = client.simulate_get(f"{box}/diff").json["failed"]
    assert [(f["change"], f["kind"], f["error"]["code"]) for f in failed] == [
        (1, "inventory", "placement.inventory.inuse")
    ]


def test_a_drain_moves_every_consumer_or_says_why_not(client, cloud):
    box = _sandbox(client)
    steps = _change(client, box, {"kind": "drain", "provider": cloud.uuids["cn2"]})
    assert [(s["kind"], s["applied"]) for s in steps] == [("disable", True)]
    steps = _change(client, box, {"kind": "drain", "provider": cloud.uuids["cn1"]})
    assert [(s["kind"], s["subject"], s["applied"]) for s in steps] == [
        ("disable", cloud.uuids["cn1"], True),
        ("move", cloud.server, False),  # cn2 is disabled: nowhere to go
    ]
    assert steps[1]["error"]["code"] == "tally.sandbox.no_host"
    why = client.simulate_get(
        f"{box}/allocation_candidates/why",
        query_string="resources=VCPU:1&root_required=!COMPUTE_STATUS_DISABLED",
    ).json
    assert why["fits"] == 0 and why["trees"] == 2


def test_a_commit_applies_what_the_sandbox_showed(client, cloud):
    box = _sandbox(client)
    _change(
        client,
        box,
        {"kind": "move", "consumer": cloud.server, "to": cloud.uuids["cn2"]},
        {"kind": "inventory", "provider": cloud.uuids["cn1"], "resource_class": "VCPU", "total": 2},
        {"kind": "boot", "query": "resources=VCPU:1,SRIOV_NET_VF:1", "count": 2},
        {"kind": "remove", "provider": cloud.uuids["pf0"]},  # refused: a server holds VFs
    )
    shown = client.simulate_get(f"{box}/amounts").json
    done = client.simulate_post(f"{box}/commit")
    assert done.status_code == 200, done.text
    assert done.json == {"committed": True, "steps_written": 4}
    assert client.simulate_get("/tally/v1/amounts").json == shown
    assert client.simulate_get(box).status_code == 404  # committed: gone
    assert client.simulate_post(f"{box}/commit").status_code == 404


def test_a_commit_is_refused_whole_when_what_it_read_moved(client, cloud):
    box = _sandbox(client)
    cn2 = cloud.uuids["cn2"]
    _change(
        client,
        box,
        {"kind": "boot", "query": "resources=VCPU:1", "count": 1},
        {"kind": "move", "consumer": cloud.server, "to": cn2},
    )
    before = client.simulate_get("/tally/v1/amounts").json
    generation = client.simulate_get(f"/resource_providers/{cn2}").json["generation"]
    body = {"resource_provider_generation": generation, "traits": ["CUSTOM_MOVED"]}
    assert client.simulate_put("/traits/CUSTOM_MOVED").status_code in (201, 204)
    assert client.simulate_put(f"/resource_providers/{cn2}/traits", json=body).status_code == 200
    refused = client.simulate_post(f"{box}/commit")
    assert refused.status_code == 409
    error = refused.json["errors"][0]
    assert error["code"] == "placement.concurrent_update"
    assert error["moved"] == [{"provider": cn2, "read": generation, "now": generation + 1}]
    assert cn2 in error["detail"]
    assert client.simulate_get("/tally/v1/amounts").json == before  # nothing written
    assert client.simulate_get(box).status_code == 200  # still there to look at


def test_the_list_shows_those_alive_newest_first(client, cloud, monkeypatch):
    older = _sandbox(client)
    _change(client, older, {"kind": "disable", "provider": cloud.uuids["cn2"]})
    newer = _sandbox(client, ttl_seconds=60)
    listed = client.simulate_get(SANDBOXES).json["sandboxes"]
    assert {f"{SANDBOXES}/{b['id']}" for b in listed} == {newer, older}
    times = [b["created_at"] for b in listed]
    assert times == sorted(times, reverse=True)  # (the same second: by id)
    shown = {f"{SANDBOXES}/{b['id']}": b for b in listed}
    assert shown[older] == client.simulate_get(older).json  # each as GET shows it
    assert (shown[older]["steps"], shown[newer]["steps"]) == (1, 0)
    assert client.simulate_get(SANDBOXES, query_string="x=1").status_code == 400
    import datetime as dt

    from tally.placement.ledger.sandbox import store

    later = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(seconds=120)
    monkeypatch.setattr(store, "utcnow", lambda: later)
    assert [b["id"] for b in client.simulate_get(SANDBOXES).json["sandboxes"]] == [
        older.rsplit("/", 1)[1]
    ]


def test_limits_errors_and_expiry(client, cloud, monkeypatch):
    box = _sandbox(client)
    missing = f"{SANDBOXES}/{uuidlib.uuid4()}"
    assert client.simulate_get(missing).status_code == 404
    assert client.simulate_get(f"{SANDBOXES}/not-a-uuid").status_code == 400
    bad = client.simulate_post(f"{box}/changes", json={"changes": [{"kind": "move"}]})
    assert bad.status_code == 400 and "consumer" in bad.json["errors"][0]["detail"]
    bad = client.simulate_post(f"{box}/changes", json={"changes": [{"kind": "fly"}]})
    assert bad.status_code == 400 and "kind" in bad.json["errors"][0]["detail"]
    (step,) = _change(
        client, box, {"kind": "move", "consumer": str(uuidlib.uuid4()), "to": "anywhere"}
    )
    assert step["error"]["status"] == 404
    assert client.simulate_delete(box).status_code == 204
    assert client.simulate_get(box).status_code == 404
    short = _sandbox(client, ttl_seconds=1)
    import datetime as dt

    from tally.placement.ledger.sandbox import store

    later = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(seconds=5)
    monkeypatch.setattr(store, "utcnow", lambda: later)
    assert client.simulate_get(short).status_code == 404


def test_over_the_memory_cap_nothing_is_kept(api, cloud):
    client = api(sandbox_max_mb=0)  # (0: no cap)
    box = _sandbox(client)
    _change(client, box, {"kind": "boot", "query": "resources=VCPU:1", "count": 2})
    capped = api(sandbox_max_mb=1)
    gone = [{"kind": "remove", "provider": str(uuidlib.uuid4())} for _ in range(3000)]
    result = capped.simulate_post(f"{box}/changes", json={"changes": gone})
    assert result.status_code == 507, result.text
    assert "sandbox_max_mb=1" in result.json["errors"][0]["detail"]
    assert client.simulate_get(box).json["steps"] == 2  # none of them kept


def test_sandboxes_are_for_admins(client, cloud):
    box = _sandbox(client)
    reader = {"x-auth-token": "user", "x-roles": "reader", "x-project-id": "demo"}
    for method, path in (
        ("GET", SANDBOXES),
        ("POST", SANDBOXES),
        ("GET", box),
        ("POST", f"{box}/changes"),
        ("GET", f"{box}/allocation_candidates?resources=VCPU:1"),
        ("POST", f"{box}/commit"),
    ):
        found = client.simulate_request(method, path, headers=reader)
        assert found.status_code == 403, (method, path, found.text)


def _server(client: PlacementClient, host: str, **resources: int) -> str:
    uuid = str(uuidlib.uuid4())
    body = {
        "allocations": {host: {"resources": resources}},
        "project_id": "demo",
        "user_id": "alice",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    assert client.simulate_put(f"/allocations/{uuid}", json=body).status_code == 204
    return uuid


def _commit(client: PlacementClient, box: str) -> tuple[int, list[dict]]:
    done = client.simulate_post(f"{box}/commit")
    return done.status_code, done.json["errors"][0]["moved"] if done.status_code == 409 else []


def test_a_commit_checks_the_trees_a_move_compared_before_it_chose(client):
    """A move anywhere walks the trees in order: `a` (full, passed over), then
    `b` (chosen). What it compared is read: a provider that joined `a`, or a change
    of `a`, refuses the commit; a change in `d` (after the chosen tree) does not."""
    hosts = Cloud(client)
    for name, vcpu in (("a", 4), ("b", 8), ("c", 8), ("d", 8)):
        hosts.provider(name, inventory={"VCPU": vcpu})
    a, b, c, d = (hosts.uuids[n] for n in "abcd")
    _server(client, a, VCPU=4)
    server = _server(client, c, VCPU=2)
    move = {"kind": "move", "consumer": server, "to": "anywhere"}

    box = _sandbox(client)
    (step,) = _change(client, box, move)
    assert list(step["write"]["allocations"]) == [b]
    assert step["reads"]["trees"] == sorted([a, b])
    assert step["reads"]["providers"].keys() == {a, b, c}
    hosts.provider("a-child", "a")  # (its parent's generation stays)
    child = hosts.uuids["a-child"]
    assert _commit(client, box) == (409, [{"provider": child, "read": None, "now": 0}])

    box = _sandbox(client)
    (step,) = _change(client, box, move)
    assert step["reads"]["providers"].keys() == {a, child, b, c}
    generation = client.simulate_get(f"/resource_providers/{a}").json["generation"]
    hosts._put(a, "inventories", {"inventories": {"VCPU": {"total": 4}, "DISK_GB": {"total": 9}}})
    assert _commit(client, box) == (
        409,
        [{"provider": a, "read": generation, "now": generation + 1}],
    )

    box = _sandbox(client)
    _change(client, box, move)
    hosts._put(d, "inventories", {"inventories": {"VCPU": {"total": 16}}})  # (not compared)
    hosts.provider("d-child", "d")
    assert _commit(client, box) == (200, [])
    held = client.simulate_get(f"/allocations/{server}").json["allocations"]
    assert held == {b: {"generation": held[b]["generation"], "resources": {"VCPU": 2}}}


def test_a_commit_makes_the_providers_added_and_the_copies(client, cloud):
    aggregate = str(uuidlib.uuid4())
    cn1, cn2 = cloud.uuids["cn1"], cloud.uuids["cn2"]
    cloud._put(cn1, "aggregates", {"aggregates": [aggregate]})
    box = _sandbox(client)
    new = str(uuidlib.uuid4())
    steps = _change(
        client,
        box,
        {
            "kind": "add",
            "provider": new,
            "name": "gpu-box",
            "parent": cn2,
            "inventories": {"VGPU": {"total": 4, "max_unit": 2}},
            "traits": ["HW_CPU_X86_AVX2"],
        },
        {"kind": "add", "template": cn1, "count": 2},
        {"kind": "boot", "query": "resources=VGPU:2", "count": 1},
        {"kind": "add", "provider": str(uuidlib.uuid4()), "traits": ["CUSTOM_NOPE"]},
    )
    assert [(s["kind"], s["applied"]) for s in steps] == [("add", True)] * 7 + [
        ("boot", True),
        ("add", False),
    ]
    assert steps[-1]["error"]["detail"] == "No such trait CUSTOM_NOPE"
    assert steps[-2]["write"]["allocations"] == {new: {"VGPU": 2}}
    copies = [s["subject"] for s in steps[1:7]]
    # each copy: cn1, then numa0, then pf0 under it (parents first)
    tops = [steps[1 + 3 * i]["write"] for i in range(2)]
    assert all(r["parent"] is None and r["aggregates"] == [aggregate] for r in tops)
    diff = client.simulate_get(f"{box}/diff").json["providers"]
    assert diff[new]["added"] and not diff[new]["removed"]
    assert diff[new]["traits"] == {"before": [], "after": ["HW_CPU_X86_AVX2"]}
    shown = client.simulate_get(f"{box}/amounts").json
    assert set(copies) | {new} <= shown["providers"].keys()
    inside = client.simulate_get(
        f"{box}/allocation_candidates", query_string=f"resources=VCPU:1&member_of={aggregate}"
    ).json
    summaries = inside["provider_summaries"]
    roots = {
        summaries[u]["root_provider_uuid"]
        for r in inside["allocation_requests"]
        for u in r["allocations"]
    }
    assert roots == {cn1, *copies[::3]}

    done = client.simulate_post(f"{box}/commit")
    assert done.status_code == 200, done.text
    assert client.simulate_get("/tally/v1/amounts").json == shown
    made = client.simulate_get(f"/resource_providers/{new}").json
    assert (made["name"], made["parent_provider_uuid"]) == ("gpu-box", cn2)
    assert client.simulate_get(f"/resource_providers/{new}/traits").json["traits"] == [
        "HW_CPU_X86_AVX2"
    ]
    for root in copies[::3]:
        listed = client.simulate_get("/resource_providers", params={"in_tree": root}).json
        assert len(listed["resource_providers"]) == 3
        aggs = client.simulate_get(f"/resource_providers/{root}/aggregates").json
        assert aggs["aggregates"] == [aggregate]


def test_a_sandbox_read_after_the_live_cloud_moved_shows_both(client, cloud):
    cn1, cn2 = cloud.uuids["cn1"], cloud.uuids["cn2"]
    box = _sandbox(client)
    _change(client, box, {"kind": "move", "consumer": cloud.server, "to": cn2})
    query = "resources=VCPU:1"
    before = client.simulate_get(f"{box}/allocation_candidates", query_string=query).json
    assert before["provider_summaries"][cn1]["resources"]["VCPU"]["used"] == 0
    _server(client, cn1, VCPU=1)  # live: the index moves on
    assert _usages(client, cn1, box) == {"VCPU": 1, "MEMORY_MB": 0}
    assert _usages(client, cn2, box) == {"VCPU": 6, "MEMORY_MB": 1024}
    after = client.simulate_get(f"{box}/allocation_candidates", query_string=query).json
    assert after["provider_summaries"][cn1]["resources"]["VCPU"]["used"] == 1
    assert after["provider_summaries"][cn2]["resources"]["VCPU"]["used"] == 6


def test_a_step_whose_reads_came_in_newer_than_its_search_is_tried_again(client, monkeypatch):
    """The cloud moves between a move's search and its reads of what it chose (a
    write fills the chosen host): the step is tried again over the moved index and
    chooses elsewhere, rather than keep a choice judged on the older state."""
    from tally.placement.ledger.sandbox import reads

    hosts = Cloud(client)
    for name in "abcd":
        hosts.provider(name, inventory={"VCPU": 4})
    a, b, c, d = (hosts.uuids[n] for n in "abcd")
    _server(client, a, VCPU=4)
    server = _server(client, c, VCPU=2)
    load, fired = reads.Reader.load_providers, []

    def racing(self, uuids=(), roots=()):  # noqa: ANN001, ANN202
        if roots and not fired:  # (a search's reads, after it)
            fired.append(_server(client, b, VCPU=4))
        return load(self, uuids, roots)

    monkeypatch.setattr(reads.Reader, "load_providers", racing)
    box = _sandbox(client)
    (step,) = _change(client, box, {"kind": "move", "consumer": server, "to": "anywhere"})
    assert fired and step["applied"]
    assert list(step["write"]["allocations"]) == [d]
    assert step["reads"]["trees"] == sorted([a, b, c, d])  # (c: its own, passed over)
