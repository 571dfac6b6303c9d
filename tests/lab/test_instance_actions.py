"""Instance actions (os-instance-actions), as Nova records them: every server
operation is found by the compute API request id the caller was given, and the global
request id its calls to Placement carried is in Placement's claim history.

Each test draws its servers on the three-host `cloud` (cmp-1..3, m1.small)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.lab.conftest import InProcessLab

LATEST = "2.96"
LIVE = {"os-migrateLive": {"host": "cmp-2", "block_migration": "auto"}}


def call(
    cloud: InProcessLab,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str = "admin",
    version: str = LATEST,
    **headers: str,
) -> httpx.Response:
    """One compute API call, its answer checked only for a 2xx (the caller asserts more)."""
    answer = cloud.http.request(
        method,
        f"/compute/v2.1{path}",
        json=body,
        headers={"x-auth-token": token, "openstack-api-version": f"compute {version}", **headers},
    )
    assert answer.status_code < 300, answer.text
    return answer


def boot(
    cloud: InProcessLab,
    name: str = "vm",
    flavor: str = "m1.small",
    token: str = "demo:proj",
    **spec,
) -> tuple[str, str]:
    """(server id, the request id of its create), booted by `token`'s user."""
    body = {"server": {"name": name, "flavorRef": flavor, **spec}}
    answer = call(cloud, "POST", "/servers", body, token=token)
    return answer.json()["server"]["id"], answer.headers["x-openstack-request-id"]


def actions(cloud: InProcessLab, server: str, version: str = LATEST, **params: str) -> list:
    path = f"/servers/{server}/os-instance-actions"
    return cloud.http.get(
        f"/compute/v2.1{path}",
        params=params,
        headers={"x-auth-token": "admin", "openstack-api-version": f"compute {version}"},
    ).json()["instanceActions"]


def action(
    cloud: InProcessLab, server: str, request_id: str, token: str = "admin", version: str = LATEST
) -> dict[str, Any]:
    path = f"/servers/{server}/os-instance-actions/{request_id}"
    return call(cloud, "GET", path, token=token, version=version).json()["instanceAction"]


def placement_history(cloud: InProcessLab, consumer: str) -> list[dict[str, Any]]:
    return cloud.placement.get("/tally/v1/history", params={"consumer": consumer})["history"]


def test_a_boot_is_found_by_its_request_id_and_placement_saw_that_id(cloud):
    server, request_id = boot(cloud)
    assert request_id.startswith("req-")
    found = action(cloud, server, request_id)
    events = found.pop("events")
    assert found == {
        "action": "create",
        "instance_uuid": server,
        "message": None,
        "project_id": "proj",
        "request_id": request_id,
        "user_id": "demo",
        "start_time": found["start_time"],
        "updated_at": found["updated_at"],
    }
    host = cloud.server_doc(server)["OS-EXT-SRV-ATTR:host"]
    assert [(e["event"], e["result"], e["host"], e["traceback"]) for e in events] == [
        ("conductor_schedule_and_build_instances", "Success", "lab-conductor", None),
        ("compute__do_build_and_run_instance", "Success", host, None),
    ]
    assert events[1]["hostId"] == cloud.server_doc(server)["hostId"] != ""
    assert set(events[0]) == {
        "event",
        "start_time",
        "finish_time",
        "result",
        "traceback",
        "host",
        "hostId",
        "details",
    }
    claims = placement_history(cloud, server)
    assert claims and {c["global_request_id"] for c in claims} == {request_id}


def test_the_callers_global_id_goes_to_placement_and_the_action_keeps_the_computes(cloud):
    inbound = f"req-{uuid.uuid4()}"
    body = {"server": {"name": "vm", "flavorRef": "m1.small"}}
    answer = call(cloud, "POST", "/servers", body, **{"x-openstack-request-id": inbound})
    server, own = answer.json()["server"]["id"], answer.headers["x-openstack-request-id"]
    assert own != inbound
    assert [a["request_id"] for a in actions(cloud, server)] == [own]
    assert {c["global_request_id"] for c in placement_history(cloud, server)} == {inbound}


def test_a_failed_boot_says_error_with_the_schedulers_event(cloud):
    cloud.flavor("huge", vcpus=1, ram=10**6, disk=1)
    server, request_id = boot(cloud, "big", "huge")
    assert cloud.server_doc(server)["status"] == "ERROR"
    found = action(cloud, server, request_id)
    assert (found["action"], found["message"]) == ("create", "Error")
    (event,) = found["events"]
    assert (event["event"], event["result"], event["host"]) == (
        "conductor_schedule_and_build_instances",
        "Error",
        "lab-conductor",
    )
    assert event["details"] == ("No valid host was found. There are not enough hosts available.")
    assert "NoValidHost" in event["traceback"]
    # the owner (not an admin) sees the events, without traceback or host
    owned = action(cloud, server, request_id, token="demo:proj")
    assert set(owned["events"][0]) == {
        "event",
        "start_time",
        "finish_time",
        "result",
        "hostId",
        "details",
    }


def test_every_operation_records_its_action(cloud):
    server, created = boot(cloud, token="admin", availability_zone="nova:cmp-1")
    done = [created]

    def act(body: dict[str, Any]) -> None:
        answer = call(cloud, "POST", f"/servers/{server}/action", body)
        done.append(answer.headers["x-openstack-request-id"])

    act({"migrate": {"host": "cmp-2"}})
    cloud.step(3)
    act({"revertResize": None})
    act({"migrate": {"host": "cmp-3"}})
    cloud.step(3)
    act({"confirmResize": None})
    act(LIVE)
    cloud.step()
    migration = cloud.migrations(status="running")[0]
    path = f"/servers/{server}/migrations/{migration['id']}"
    done.append(call(cloud, "DELETE", path).headers["x-openstack-request-id"])
    act(LIVE)
    cloud.step()
    migration = cloud.migrations(status="running")[0]
    path = f"/servers/{server}/migrations/{migration['id']}/action"
    answer = call(cloud, "POST", path, {"force_complete": None})
    done.append(answer.headers["x-openstack-request-id"])
    act({"shelve": None})
    act({"unshelve": None})
    host = cloud.server_doc(server)["OS-EXT-SRV-ATTR:host"]
    call(cloud, "PUT", f"/os-services/{cloud.service(host)['id']}", {"forced_down": True})
    act({"evacuate": {}})
    done.append(call(cloud, "DELETE", f"/servers/{server}").headers["x-openstack-request-id"])

    listed = actions(cloud, server)
    assert [a["action"] for a in listed] == [
        "delete",
        "evacuate",
        "unshelve",
        "shelve",
        "live_migration_force_complete",
        "live-migration",
        "live_migration_cancel",
        "live-migration",
        "confirmResize",
        "migrate",
        "revertResize",
        "migrate",
        "create",
    ]
    assert [a["request_id"] for a in listed] == done[::-1]
    assert {a["message"] for a in listed} == {None}
    events = {
        a["action"]: [e["event"] for e in action(cloud, server, a["request_id"])["events"]]
        for a in listed[:4]
    }
    assert events == {
        "delete": ["compute_terminate_instance"],
        "evacuate": ["conductor_rebuild_server", "compute_rebuild_instance"],
        "unshelve": ["schedule_instances", "compute_unshelve_instance"],
        "shelve": ["compute_shelve_instance"],
    }
    assert cloud.held(server) == {}  # the server is gone, its actions remain (2.21)


def test_a_move_that_found_no_host_says_error(cloud):
    server, _ = boot(cloud, token="admin", availability_zone="nova:cmp-1")
    for host in ("cmp-2", "cmp-3"):
        cloud.compute.put(f"/os-services/{cloud.service(host)['id']}", {"status": "disabled"})
    answer = call(cloud, "POST", f"/servers/{server}/action", {"migrate": None})
    request_id = answer.headers["x-openstack-request-id"]
    found = action(cloud, server, request_id)
    assert (found["action"], found["message"]) == ("migrate", "Error")
    assert [(e["event"], e["result"]) for e in found["events"]] == [
        ("conductor_migrate_server", "Error")
    ]


def test_fields_by_microversion(cloud):
    server, request_id = boot(cloud)
    at = {v: action(cloud, server, request_id, version=v) for v in ("2.1", "2.58", "2.62", "2.84")}
    assert "updated_at" not in at["2.1"] and "updated_at" in at["2.58"]
    assert set(at["2.1"]["events"][0]) == {
        "event",
        "start_time",
        "finish_time",
        "result",
        "traceback",
    }
    assert set(at["2.62"]["events"][0]) == set(at["2.1"]["events"][0]) | {"host", "hostId"}
    assert set(at["2.84"]["events"][0]) == set(at["2.62"]["events"][0]) | {"details"}
    # a user who is not an admin sees no events before 2.51, then without the traceback
    owner = {v: action(cloud, server, request_id, "demo:proj", v) for v in ("2.50", "2.51")}
    assert "events" not in owner["2.50"]
    assert set(owner["2.51"]["events"][0]) == {"event", "start_time", "finish_time", "result"}
    assert actions(cloud, server, "2.1")[0]["start_time"].endswith(".000000")


def test_paging_and_changes_since(cloud):
    server, created = boot(cloud)
    shelved = call(cloud, "POST", f"/servers/{server}/action", {"shelve": None})
    shelved_id = shelved.headers["x-openstack-request-id"]
    page = cloud.http.get(
        f"/compute/v2.1/servers/{server}/os-instance-actions",
        params={"limit": "1"},
        headers={"x-auth-token": "admin", "openstack-api-version": "compute 2.58"},
    ).json()
    assert [a["request_id"] for a in page["instanceActions"]] == [shelved_id]
    assert f"marker={shelved_id}" in page["links"][0]["href"]
    rest = actions(cloud, server, "2.58", marker=shelved_id)
    assert [a["request_id"] for a in rest] == [created]
    assert actions(cloud, server, "2.58", **{"changes-since": "2999-01-01T00:00:00"}) == []
    assert len(actions(cloud, server, "2.57", **{"changes-since": "2999-01-01T00:00:00"})) == 2
    assert actions(cloud, server, "2.66", **{"changes-before": "2000-01-01T00:00:00"}) == []


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/servers/{missing}/os-instance-actions", 404, "Instance {missing} could not be found."),
        (
            "/servers/{server}/os-instance-actions/req-nope",
            404,
            "Action req-nope not found",
        ),
        (
            "/servers/{server}/os-instance-actions?marker=req-nope",
            400,
            "Marker req-nope could not be found.",
        ),
    ],
)
def test_not_found_as_nova_words_it(cloud, path, status, message):
    server, _ = boot(cloud)
    names = {"server": server, "missing": str(uuid.uuid4())}
    answer = cloud.http.get(
        "/compute/v2.1" + path.format(**names),
        headers={"x-auth-token": "admin", "openstack-api-version": "compute 2.58"},
    )
    key = "itemNotFound" if status == 404 else "badRequest"
    assert answer.status_code == status
    assert answer.json() == {key: {"code": status, "message": message.format(**names)}}


def test_a_deleted_servers_actions_stay_readable_from_2_21(cloud):
    server, created = boot(cloud)
    deleted = call(cloud, "DELETE", f"/servers/{server}", token="demo:proj")
    gone = deleted.headers["x-openstack-request-id"]
    listed = call(cloud, "GET", f"/servers/{server}/os-instance-actions", token="demo:proj")
    assert [a["request_id"] for a in listed.json()["instanceActions"]] == [gone, created]
    before = cloud.http.get(
        f"/compute/v2.1/servers/{server}/os-instance-actions",
        headers={"x-auth-token": "demo:proj", "openstack-api-version": "compute 2.20"},
    )
    assert before.status_code == 404
    # another project's user finds nothing
    other = cloud.http.get(
        f"/compute/v2.1/servers/{server}/os-instance-actions/{created}",
        headers={"x-auth-token": "eve:other", "openstack-api-version": f"compute {LATEST}"},
    )
    assert other.status_code == 404


def test_a_multi_create_records_one_action_per_server_under_one_request_id(cloud):
    body = {"server": {"name": "many", "flavorRef": "m1.small", "min_count": 2, "max_count": 2}}
    answer = call(cloud, "POST", "/servers", body)
    request_id = answer.headers["x-openstack-request-id"]
    found = cloud.compute.get("/servers/detail", {"name": "many"})["servers"]
    assert len(found) == 2
    for server in found:
        (listed,) = actions(cloud, server["id"])
        assert (listed["action"], listed["request_id"]) == ("create", request_id)
        events = action(cloud, server["id"], request_id)["events"]
        assert events[-1]["host"] == server["OS-EXT-SRV-ATTR:host"]
