"""`tally drain HOST` checks its plan before anything is written (issue 40, item 9: a
dry run said "planned" for a host whose nova-compute was down, and exited 1 when the
plan was fine; `--apply` then failed every live migration and left the host
disabled). Whatever would stop the apply is said by the dry run, exit 1, and makes
the apply write nothing; a plan that holds exits 5 (a dry run with writes to make).

    cmp-1  web        cmp-2  db        cmp-3  (empty)
"""

from __future__ import annotations

import json

from tally.clients.compute import ComputeError
from tally.doctor import drain
from tests.lab.conftest import tally_on

DRY_RUN = "dry run: nothing written; add --apply"


tally = tally_on


def force_down(lab, host: str) -> None:
    lab.compute.put(f"/os-services/{lab.service(host)['id']}", {"forced_down": True})


def test_a_host_whose_compute_is_down_fails_the_plan_and_the_apply_writes_nothing(two):
    force_down(two, "cmp-1")
    dry = tally(two, "drain", "cmp-1")
    assert dry.exit_code == 1, dry.output
    assert "cannot drain cmp-1: nova-compute on cmp-1 is down" in dry.stdout
    assert "planned" not in dry.stdout
    assert dry.stderr.splitlines()[-1] == DRY_RUN
    applied = tally(two, "drain", "cmp-1", "--apply")
    assert applied.exit_code == 1, applied.output
    assert "nova-compute on cmp-1 is down" in applied.stdout
    assert applied.stdout.splitlines()[-1] == "not drained: nothing changed on cmp-1"
    assert two.service("cmp-1")["status"] == "enabled"  # was left disabled
    assert two.migrations() == []


def test_a_plan_that_holds_exits_5_names_a_target_and_the_apply_drains(two):
    dry = tally(two, "drain", "cmp-1", "-f", "json")
    assert dry.exit_code == 5, dry.output
    plan = json.loads(dry.stdout)
    assert plan["feasible"] and not plan["applied"] and plan["blockers"] == []
    ((move,),) = [plan["moves"]]
    assert (move["server"], move["status"]) == (two.web["id"], "planned")
    assert plan["left"] == {}  # the server's own hold goes with it
    assert two.service("cmp-1")["status"] == "enabled"
    report = drain.drain(two.placement, two.compute, "cmp-1", apply=True, wait=two.step)
    assert report.drained, report
    # where the check found room is where the lab's scheduler (RAM weigher) put it
    assert two.server_doc(two.web["id"])["OS-EXT-SRV-ATTR:host"] == move["target"] == "cmp-3"


def test_a_server_with_no_room_elsewhere_fails_the_plan(two):
    for host in ("cmp-2", "cmp-3"):  # 1 VCPU each, cmp-2's taken by db
        two.compute.put(f"/os-lab/hosts/{host}", {"host": {"vcpus": 1, "cpu_allocation_ratio": 1}})
    two.compute.put(f"/os-services/{two.service('cmp-3')['id']}", {"status": "disabled"})
    dry = tally(two, "drain", "cmp-1")
    assert dry.exit_code == 1, dry.output
    assert f"no other enabled host has room for server web ({two.web['id']})" in dry.stdout
    assert tally(two, "drain", "cmp-1", "--apply").exit_code == 1
    assert two.service("cmp-1")["status"] == "enabled" and two.migrations() == []


def test_a_server_in_a_move_and_its_hold_fail_the_plan(two):
    fault = {"kind": "migration-hang", "server": two.web["id"]}
    two.compute.post("/os-lab/faults", {"fault": fault})
    result = tally(two, "drain", "cmp-1", "-f", "json")
    assert result.exit_code == 1, result.output
    plan = json.loads(result.stdout)
    assert [m["status"] for m in plan["moves"]] == ["blocked"]
    assert "a live migration needs it ACTIVE or PAUSED" in plan["moves"][0]["error"]
    (migration,) = two.migrations(instance_uuid=two.web["id"])
    assert list(plan["left"]) == [migration["uuid"]]  # the move's hold stays behind
    assert any("no migration takes it away" in b for b in plan["blockers"])


def test_an_empty_host_already_disabled_is_nothing_to_do(two):
    two.compute.put(f"/os-services/{two.service('cmp-3')['id']}", {"status": "disabled"})
    result = tally(two, "drain", "cmp-3")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == DRY_RUN


def test_an_apply_whose_every_migration_is_refused_enables_the_host_again(two, monkeypatch):
    post = two.compute.post

    def refusing(path: str, body):  # a race the check could not see
        if "os-migrateLive" in body:
            raise ComputeError("POST", path, 409, "Cannot os-migrateLive: raced")
        return post(path, body)

    monkeypatch.setattr(two.compute, "post", refusing)
    result = tally(two, "drain", "cmp-1", "--apply")
    assert result.exit_code == 1, result.output
    assert "cmp-1 is enabled again, as it was" in result.stdout
    assert two.service("cmp-1")["status"] == "enabled"
