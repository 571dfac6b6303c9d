"""Moves as Nova makes them since Queens, seen through Placement at every step."""

from __future__ import annotations

import datetime as dt

import pytest

from tally.clients.compute import ComputeError
from tally.compute.context import Lab as LabContext
from tally.compute.ops import lab as lab_ops

SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
LIVE = {"os-migrateLive": {"host": "cmp-2", "block_migration": "auto"}}


@pytest.fixture
def on_cmp1(cloud):
    return cloud.boot(availability_zone="nova:cmp-1")


def providers(cloud):
    return {h["name"]: h["provider_uuid"] for h in cloud.compute.get("/os-lab/hosts")["hosts"]}


def test_live_migration_moves_the_source_to_the_migration_then_completes(cloud, on_cmp1):
    rp = providers(cloud)
    cloud.action(on_cmp1["id"], LIVE)
    migration = cloud.migrations()[0]
    assert (migration["status"], migration["migration_type"]) == ("preparing", "live-migration")
    assert cloud.held(migration["uuid"]) == {rp["cmp-1"]: SMALL}
    assert cloud.consumer_type(migration["uuid"]) == "MIGRATION"
    assert cloud.held(on_cmp1["id"]) == {rp["cmp-2"]: SMALL}
    assert cloud.server_doc(on_cmp1["id"])["status"] == "MIGRATING"

    cloud.step()
    running = cloud.migrations(status="running")
    assert [m["uuid"] for m in running] == [migration["uuid"]]
    in_progress = cloud.compute.get(f"/servers/{on_cmp1['id']}/migrations")["migrations"]
    assert in_progress[0]["status"] == "running" and in_progress[0]["uuid"] == migration["uuid"]

    cloud.step()
    assert cloud.migrations()[0]["status"] == "completed"
    assert cloud.held(migration["uuid"]) == {}
    assert cloud.held(on_cmp1["id"]) == {rp["cmp-2"]: SMALL}
    server = cloud.server_doc(on_cmp1["id"])
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "cmp-2")
    assert cloud.compute.get(f"/servers/{on_cmp1['id']}/migrations")["migrations"] == []


def test_abort_gives_the_source_back(cloud, on_cmp1):
    rp = providers(cloud)
    cloud.action(on_cmp1["id"], LIVE)
    cloud.step()
    migration = cloud.migrations()[0]
    cloud.compute.delete(f"/servers/{on_cmp1['id']}/migrations/{migration['id']}")
    assert cloud.migrations()[0]["status"] == "cancelled"
    assert cloud.held(on_cmp1["id"]) == {rp["cmp-1"]: SMALL}
    assert cloud.held(migration["uuid"]) == {}
    server = cloud.server_doc(on_cmp1["id"])
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "cmp-1")
    with pytest.raises(ComputeError) as caught:  # not in progress any more
        cloud.compute.delete(f"/servers/{on_cmp1['id']}/migrations/{migration['id']}")
    assert caught.value.status == 400


def test_force_complete_finishes_a_running_migration(cloud, on_cmp1):
    cloud.action(on_cmp1["id"], LIVE)
    migration = cloud.migrations()[0]
    path = f"/servers/{on_cmp1['id']}/migrations/{migration['id']}/action"
    with pytest.raises(ComputeError):
        cloud.compute.post(path, {"force_complete": None})  # still preparing
    cloud.step()
    cloud.compute.post(path, {"force_complete": None})
    assert cloud.migrations()[0]["status"] == "completed"
    assert cloud.held(migration["uuid"]) == {}


def test_a_move_is_refused_while_another_runs(cloud, on_cmp1):
    cloud.action(on_cmp1["id"], LIVE)
    with pytest.raises(ComputeError) as caught:
        cloud.action(on_cmp1["id"], {"migrate": None})
    assert caught.value.status == 409 and "task_state migrating" in caught.value.detail


def test_no_destination_ends_the_migration_in_error_and_keeps_the_source(cloud):
    cloud.flavor("big", vcpus=1, ram=60000, disk=1)
    servers = [cloud.boot(f"b{n}", "big") for n in range(3)]  # one per host: full
    cloud.action(servers[0]["id"], {"os-migrateLive": {"host": None, "block_migration": "auto"}})
    migration = cloud.migrations()[0]
    assert migration["status"] == "error"
    assert cloud.held(migration["uuid"]) == {}
    host = cloud.host(servers[0]["OS-EXT-SRV-ATTR:host"])
    assert list(cloud.held(servers[0]["id"])) == [host["provider_uuid"]]
    assert cloud.server_doc(servers[0]["id"])["status"] == "ACTIVE"


def test_cold_migration_confirm(cloud, on_cmp1):
    rp = providers(cloud)
    cloud.action(on_cmp1["id"], {"migrate": {"host": "cmp-3"}})
    migration = cloud.migrations()[0]
    assert (migration["status"], migration["migration_type"]) == ("pre-migrating", "migration")
    assert cloud.server_doc(on_cmp1["id"])["status"] == "RESIZE"
    assert cloud.held(migration["uuid"]) == {rp["cmp-1"]: SMALL}
    cloud.step(3)
    assert cloud.migrations()[0]["status"] == "finished"
    server = cloud.server_doc(on_cmp1["id"])
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("VERIFY_RESIZE", "cmp-3")
    cloud.action(on_cmp1["id"], {"confirmResize": None})
    assert cloud.migrations()[0]["status"] == "confirmed"
    assert cloud.held(migration["uuid"]) == {}
    assert cloud.held(on_cmp1["id"]) == {rp["cmp-3"]: SMALL}
    assert cloud.server_doc(on_cmp1["id"])["status"] == "ACTIVE"


def test_cold_migration_revert(cloud, on_cmp1):
    rp = providers(cloud)
    cloud.action(on_cmp1["id"], {"migrate": {"host": "cmp-3"}})
    with pytest.raises(ComputeError) as caught:
        cloud.action(on_cmp1["id"], {"confirmResize": None})
    assert caught.value.status == 409
    cloud.step(3)
    cloud.action(on_cmp1["id"], {"revertResize": None})
    migration = cloud.migrations()[0]
    assert migration["status"] == "reverted"
    assert cloud.held(migration["uuid"]) == {}
    assert cloud.held(on_cmp1["id"]) == {rp["cmp-1"]: SMALL}
    assert cloud.server_doc(on_cmp1["id"])["OS-EXT-SRV-ATTR:host"] == "cmp-1"


def test_evacuation_holds_both_until_the_source_comes_back(cloud, on_cmp1):
    rp = providers(cloud)
    with pytest.raises(ComputeError) as caught:
        cloud.action(on_cmp1["id"], {"evacuate": {"host": "cmp-2"}})
    assert caught.value.status == 409 and "still in use" in caught.value.detail
    service = cloud.service("cmp-1")
    cloud.compute.put(f"/os-services/{service['id']}", {"forced_down": True})
    cloud.action(on_cmp1["id"], {"evacuate": {"host": "cmp-2"}})
    cloud.step(2)
    migration = cloud.migrations(migration_type="evacuation")[0]
    assert migration["status"] == "done"
    assert cloud.held(on_cmp1["id"]) == {rp["cmp-1"]: SMALL, rp["cmp-2"]: SMALL}
    assert cloud.server_doc(on_cmp1["id"])["OS-EXT-SRV-ATTR:host"] == "cmp-2"
    cloud.compute.put(f"/os-services/{service['id']}", {"forced_down": False})  # restarts
    assert cloud.held(on_cmp1["id"]) == {rp["cmp-2"]: SMALL}
    assert cloud.migrations(migration_type="evacuation")[0]["status"] == "completed"


def test_migrations_advance_with_time(make_lab, monkeypatch):
    lab = make_lab(lab_step_seconds=5)
    lab.hosts("cmp-1", "cmp-2")
    lab.flavor()
    server = lab.boot(availability_zone="nova:cmp-1")
    lab.action(server["id"], LIVE)
    clock = lab.server.lab
    lab_ops.tick(clock)
    assert lab.migrations()[0]["status"] == "preparing"  # not due yet
    later = clock.now() + dt.timedelta(seconds=6)
    monkeypatch.setattr(LabContext, "now", lambda self: later)
    lab_ops.tick(clock)
    assert lab.migrations()[0]["status"] == "running"


def test_the_tracker_runs_with_time(make_lab, monkeypatch):
    lab = make_lab(lab_tracker_seconds=60)
    rp = lab.hosts("cmp-1")[0]["provider_uuid"]
    inventory = lab.placement.inventories(rp)
    inventory["inventories"]["MEMORY_MB"]["reserved"] = 0
    lab.placement.put_inventories(
        rp, inventory["resource_provider_generation"], inventory["inventories"]
    )
    clock = lab.server.lab
    lab_ops.tick(clock)
    assert lab.placement.inventories(rp)["inventories"]["MEMORY_MB"]["reserved"] == 0
    later = clock.now() + dt.timedelta(seconds=61)
    monkeypatch.setattr(LabContext, "now", lambda self: later)
    lab_ops.tick(clock)
    assert lab.placement.inventories(rp)["inventories"]["MEMORY_MB"]["reserved"] == 512
