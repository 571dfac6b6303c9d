"""`tally lab break KIND` without `--server` never picks a server an earlier fault
touched, and says so (exit 1) when no clean one is left."""

from __future__ import annotations

import json

from tests.lab.conftest import tally_lab

KINDS = ("delete-while-down", "migration-error", "migration-hang", "service-delete", "evacuation")


def names(lab) -> dict[str, str]:
    """server id -> name, deleted servers too."""
    found = {}
    for deleted in ("false", "true"):
        params = {"all_tenants": "1", "deleted": deleted}
        found.update({s["id"]: s["name"] for s in lab.compute.get("/servers", params)["servers"]})
    return found


def test_five_faults_in_a_row_pick_five_different_clean_servers(lab):
    tally_lab(lab, "up")  # 3 hosts, 4 flavors, 6 servers demo-1..6 spread over them
    picked: list[str] = []
    for kind in KINDS:
        report = json.loads(tally_lab(lab, "break", kind, "-f", "json"))
        assert report["kind"] == kind
        assert report["server"] is not None, kind
        assert report["server"] not in picked, f"{kind} reused {report['server']}"
        picked.append(report["server"])
    # the oldest clean one each time: service-delete takes demo-4, on the host that
    # delete-while-down left down; evacuation demo-5, the next on a host still up
    called = names(lab)
    assert [called[p] for p in picked] == ["demo-1", "demo-2", "demo-3", "demo-4", "demo-5"]

    # one server is still clean: the next fault takes it, the one after finds none
    last = json.loads(tally_lab(lab, "break", "delete-while-down", "-f", "json"))
    assert called[last["server"]] == "demo-6"
    out = tally_lab(lab, "break", "migration-error", code=1)
    assert "No server left to break: every server is already involved in a fault" in out
    assert "tally lab reset" in out
    assert lab.migrations(status="error") != [] and len(lab.migrations()) == 3  # none added


def test_the_migration_faults_need_a_clean_server_on_a_host_that_is_up(lab):
    lab.hosts("cmp-1", "cmp-2", "cmp-3")
    lab.flavor()
    web = lab.boot("web", availability_zone="nova:cmp-1")
    db = lab.boot("db", availability_zone="nova:cmp-1")
    first = json.loads(tally_lab(lab, "break", "delete-while-down", "-f", "json"))
    assert first["server"] == web["id"]  # cmp-1 is down now, with db on it
    out = tally_lab(lab, "break", "migration-hang", code=1)
    assert "(db) are on compute hosts that are down" in out
    report = json.loads(tally_lab(lab, "break", "evacuation", "-f", "json"))
    assert report["server"] == db["id"] and report["host"] == "cmp-1"
    assert report["migration_status"] == "done"


def test_a_server_holding_allocations_elsewhere_is_not_picked(lab):
    lab.hosts("cmp-1", "cmp-2")
    lab.flavor()
    web = lab.boot("web", availability_zone="nova:cmp-1")
    db = lab.boot("db", availability_zone="nova:cmp-2")
    # a stale claim on cmp-2 beside web's own (as a half-done move would leave)
    rp = {h["name"]: h["provider_uuid"] for h in lab.compute.get("/os-lab/hosts")["hosts"]}
    found = lab.placement.consumer_allocations(web["id"])
    lab.placement.put(
        f"/allocations/{web['id']}",
        {
            "allocations": {
                rp["cmp-1"]: {"resources": {"VCPU": 1}},
                rp["cmp-2"]: {"resources": {"VCPU": 1}},
            },
            "project_id": found["project_id"],
            "user_id": found["user_id"],
            "consumer_generation": found["consumer_generation"],
            "consumer_type": "INSTANCE",
        },
    )
    report = json.loads(tally_lab(lab, "break", "migration-error", "-f", "json"))
    assert report["server"] == db["id"]
