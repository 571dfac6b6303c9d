"""`tally lab break KIND`: each fault leaves in Placement exactly the traces the real
failure leaves, checked through the Placement API."""

from __future__ import annotations

import json
import logging

import pytest
from click.testing import CliRunner

from tally.cli.context import Context
from tally.cli.main import cli
from tally.clients.compute import ComputeError

SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}


def tally_lab(lab, *args: str) -> dict:
    """Run `tally lab ARGS -f json` in-process against the lab; the parsed output."""
    context = Context()
    context.compute = lab.compute
    result = CliRunner().invoke(cli, ["lab", *args, "-f", "json"], obj=context)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture
def lab_engine(engine):
    """Faults on every backend (SQLite; PostgreSQL and MySQL when configured)."""
    return engine


@pytest.fixture
def broken(cloud):
    """The cloud with web on cmp-1 and db on cmp-2."""
    cloud.web = cloud.boot("web", availability_zone="nova:cmp-1")
    cloud.db = cloud.boot("db", availability_zone="nova:cmp-2")
    cloud.rp = {h["name"]: h["provider_uuid"] for h in cloud.compute.get("/os-lab/hosts")["hosts"]}
    return cloud


def test_delete_while_down_leaves_an_orphan(broken):
    report = tally_lab(broken, "break", "delete-while-down", "--server", broken.web["id"])
    assert report["kind"] == "delete-while-down" and report["server"] == broken.web["id"]
    assert report["providers"]["source"] == broken.rp["cmp-1"]
    assert report["held"] == [
        {
            "consumer": broken.web["id"],
            "consumer_type": "INSTANCE",
            "allocations": {broken.rp["cmp-1"]: SMALL},
        }
    ]
    # Placement: the consumer still holds its allocation on cmp-1 ...
    assert broken.held(broken.web["id"]) == {broken.rp["cmp-1"]: SMALL}
    assert broken.provider_consumers(broken.rp["cmp-1"]) == {broken.web["id"]}
    assert broken.placement.usages(broken.rp["cmp-1"])["VCPU"] == 1
    # ... but there is no such server any more, and its compute is down
    with pytest.raises(ComputeError) as caught:
        broken.compute.get(f"/servers/{broken.web['id']}")
    assert caught.value.status == 404
    assert broken.service("cmp-1")["state"] == "down"
    assert broken.held(broken.db["id"]) == {broken.rp["cmp-2"]: SMALL}  # untouched


def test_migration_error_leaves_a_double_allocation(broken):
    report = tally_lab(
        broken, "break", "migration-error", "--server", broken.web["id"], "--target", "cmp-3"
    )
    migration = report["migration"]
    assert report["migration_status"] == "error"
    # the instance holds the destination, the migration still holds the source
    assert broken.held(broken.web["id"]) == {broken.rp["cmp-3"]: SMALL}
    assert broken.consumer_type(broken.web["id"]) == "INSTANCE"
    assert broken.held(migration) == {broken.rp["cmp-1"]: SMALL}
    assert broken.consumer_type(migration) == "MIGRATION"
    assert {c["consumer"] for c in report["held"]} == {broken.web["id"], migration}
    row = broken.migrations(instance_uuid=broken.web["id"])[0]
    assert (row["uuid"], row["status"]) == (migration, "error")
    server = broken.server_doc(broken.web["id"])
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "cmp-1")
    broken.step(3)  # nothing moves an errored migration on
    assert broken.held(migration) == {broken.rp["cmp-1"]: SMALL}


def test_migration_hang_stays_running_until_aborted(broken):
    report = tally_lab(broken, "break", "migration-hang", "--server", broken.web["id"])
    migration = report["migration"]
    dest = report["providers"]["destination"]
    assert dest in (broken.rp["cmp-2"], broken.rp["cmp-3"])
    assert broken.held(migration) == {broken.rp["cmp-1"]: SMALL}
    assert broken.held(broken.web["id"]) == {dest: SMALL}
    broken.step(5)
    running = broken.migrations(status="running")
    assert [m["uuid"] for m in running] == [migration]
    path = f"/servers/{broken.web['id']}/migrations/{running[0]['id']}"
    broken.compute.post(f"{path}/action", {"force_complete": None})  # nobody answers
    assert broken.migrations(status="running")[0]["uuid"] == migration
    broken.compute.delete(path)  # the operator's way out
    assert broken.held(migration) == {}
    assert broken.held(broken.web["id"]) == {broken.rp["cmp-1"]: SMALL}


def test_service_delete_leaves_the_provider_and_its_allocations(broken, caplog):
    with caplog.at_level(logging.ERROR, logger="tally.compute"):
        report = tally_lab(broken, "break", "service-delete", "--host", "cmp-2")
    assert "Unable to delete compute node" in caplog.text
    rp = broken.rp["cmp-2"]
    assert report["providers"]["source"] == rp
    assert [c["consumer"] for c in report["held"]] == [broken.db["id"]]
    # Placement still has the provider, its inventory and the server's allocation
    assert broken.placement.provider(rp)["name"] == "cmp-2"
    assert broken.provider_consumers(rp) == {broken.db["id"]}
    assert broken.placement.inventories(rp)["inventories"]["VCPU"]["total"] == 16
    # the compute side has no such service or hypervisor any more
    assert broken.compute.get("/os-services", {"host": "cmp-2"})["services"] == []
    names = {h["hypervisor_hostname"] for h in broken.compute.get("/os-hypervisors")["hypervisors"]}
    assert names == {"cmp-1", "cmp-3"}


def test_evacuation_leaves_the_instance_on_two_hosts(broken):
    report = tally_lab(
        broken, "break", "evacuation", "--server", broken.web["id"], "--target", "cmp-3"
    )
    assert report["migration_status"] == "done"
    assert broken.held(broken.web["id"]) == {broken.rp["cmp-1"]: SMALL, broken.rp["cmp-3"]: SMALL}
    assert broken.held(report["migration"]) == {}
    assert report["held"][0]["allocations"] == broken.held(broken.web["id"])
    server = broken.server_doc(broken.web["id"])
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "cmp-3")
    assert broken.service("cmp-1")["state"] == "down"
    row = broken.migrations(migration_type="evacuation")[0]
    assert (row["uuid"], row["status"]) == (report["migration"], "done")


def test_faults_pick_a_server_when_none_is_named(broken):
    report = tally_lab(broken, "break", "migration-error")
    assert report["server"] == broken.web["id"]  # the oldest ACTIVE one


def test_an_unknown_fault_is_a_usage_error(broken):
    result = CliRunner().invoke(cli, ["lab", "break", "meteor"], obj=Context())
    assert result.exit_code == 127
    with pytest.raises(ComputeError) as caught:
        broken.compute.post("/os-lab/faults", {"fault": {"kind": "meteor"}})
    assert caught.value.status == 400 and "Unknown fault" in caught.value.detail


def test_break_prints_a_table_too(broken):
    context = Context()
    context.compute = broken.compute
    result = CliRunner().invoke(cli, ["lab", "break", "migration-hang"], obj=context)
    assert result.exit_code == 0, result.output
    assert "Consumers left holding allocations" in result.output
    assert "MIGRATION" in result.output and "INSTANCE" in result.output
