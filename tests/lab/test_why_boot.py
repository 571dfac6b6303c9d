"""A boot that finds no host, asked later by the server's name: `tally why SERVER`
finds the search of its create request (through the instance actions' request id,
the global request id the compute API sent Placement), says which constraint ruled
out which host, and what would make it fit; its first hint's command, run as
printed, makes the same boot succeed, and the books are right after.

One case per cause of issue 39: the lab's five faults (`tally lab break KIND`), a
disabled compute service and a used-up device, each arranged so that what it left
behind is what blocks the boot (hosts of one VCPU, not oversubscribed: one m1.small
fills one), and a full cloud (an allocation ratio) besides. A hint that prints an
`openstack` command (compute-side actions: enable or bring up a service, abort a
migration) is run with the real openstack CLI against the lab served on a thread;
those cases are slow (they may first build the CLI's venv) and skip, saying why,
when it cannot be installed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tally.clients.compute import ComputeClient
from tests.lab.conftest import tally_lab
from tests.lab.test_fit_hints import tally
from tests.live import VENV_TIMEOUT, install_osc, serving_thread, wait_until

HOSTS = ("cmp-1", "cmp-2", "cmp-3")
WITH_OSC = (pytest.mark.slow, pytest.mark.timeout(VENV_TIMEOUT))


def with_osc(test: Callable) -> Callable:
    for mark in WITH_OSC:
        test = mark(test)
    return test


def one_vcpu_each(lab) -> None:  # noqa: ANN001
    """Hosts of one VCPU (no oversubscription): one m1.small fills a host."""
    for host in HOSTS:
        tally_lab(lab, "host", "set", host, "--vcpus", "1", "--cpu-ratio", "1")


def why(lab, server: str) -> dict:  # noqa: ANN001
    """The record of the server's create request, once the writer has written it
    (it writes off the request's path)."""
    found: list[Any] = []

    def recorded() -> bool:
        found[:] = tally(lab, "why", server, "-f", "json")
        return found[0] == 0

    assert wait_until(recorded, seconds=10, every=0.1), found
    (record,) = found[1]
    assert record["action"] == "create"
    return record


def constraints(record: dict) -> dict[str, int]:
    return {c["constraint"]: c["rules_out"] for c in record["verdict"]["constraints"]}


def follow_first_hint(lab, record: dict, expected: str, osc=None) -> dict:  # noqa: ANN001
    """Run the first hint's command as printed (it must start as `expected`): a
    `tally` command in-process, an `openstack` one with the real CLI (`osc`)."""
    hint = record["hints"][0]
    assert hint["command"].startswith(expected), record["hints"]
    words = shlex.split(hint["command"])
    if words[0] == "openstack":
        assert osc is not None, "an openstack command needs the osc fixture"
        osc(words[1:])
    else:
        assert words[0] == "tally", hint
        code, output = tally(lab, *words[1:])
        assert code in (0, 4), output  # (4: `audit --delete --apply` fixed all it found)
    return hint


def books(lab) -> dict[str, dict[str, int]]:  # noqa: ANN001
    """Who holds VCPU where, read from Placement: server name (or the consumer's
    uuid when it is no server's) -> host (provider name) -> VCPU."""
    servers = lab.compute.get("/servers/detail", {"all_tenants": 1})["servers"]
    names = {s["id"]: s["name"] for s in servers}
    found: dict[str, dict[str, int]] = {}
    for rp in lab.placement.get("/resource_providers")["resource_providers"]:
        for consumer, held in lab.placement.provider_allocations(rp["uuid"]).items():
            if held.get("VCPU"):
                who = found.setdefault(names.get(consumer, consumer), {})
                who[rp["name"]] = held["VCPU"]
    return found


@pytest.fixture
def osc(cloud, tmp_path) -> Iterator[Callable[[list[str]], str]]:  # noqa: ANN001
    """`osc(words)`: the real `openstack` CLI against the lab, served on a thread, as
    the clouds.yaml the lab prints reaches it; its output (it must succeed)."""
    venv = install_osc()
    with serving_thread(cloud.server) as (url, _):
        clouds = tmp_path / "clouds.yaml"
        with ComputeClient(f"{url}/compute/v2.1", token="admin") as lab:
            clouds.write_text(lab.get("/os-lab")["lab"]["clouds_yaml"])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "TALLY_"))}
        env.update(OS_CLIENT_CONFIG_FILE=str(clouds), OS_CLOUD="tally-lab")

        def run(words: list[str]) -> str:
            command = [str(venv / "bin" / "openstack"), *words]
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, f"{shlex.join(command)}\n{done.stdout}\n{done.stderr}"
            return done.stdout

        yield run


# -- the five faults ----------------------------------------------------------


def test_a_failed_move_holds_the_last_room(cloud):
    """migration-error: the instance holds the destination, its migration the source."""
    one_vcpu_each(cloud)
    a = cloud.boot("a", availability_zone="nova:cmp-1")
    cloud.boot("b", availability_zone="nova:cmp-2")
    fault = {"fault": {"kind": "migration-error", "server": a["id"], "target": "cmp-3"}}
    cloud.compute.post("/os-lab/faults", fault)
    assert cloud.boot("c")["status"] == "ERROR"  # No valid host was found
    record = why(cloud, "c")
    assert record["reason"] == "resources=VCPU:1"
    assert constraints(record)["resources=VCPU:1"] == 3
    hint = follow_first_hint(cloud, record, f"tally heal --instance {a['id']}")
    assert hint["name"] == "cmp-3" and "misplaced" in hint["text"]  # where the room appears
    assert cloud.boot("c")["status"] == "ACTIVE"
    assert books(cloud) == {"a": {"cmp-1": 1}, "b": {"cmp-2": 1}, "c": {"cmp-3": 1}}


@with_osc
def test_a_hung_move_holds_the_last_room(cloud, osc):
    """migration-hang: a live migration stuck in `running`; aborting it frees its
    destination (the server stays on its source)."""
    one_vcpu_each(cloud)
    a = cloud.boot("a", availability_zone="nova:cmp-1")
    cloud.boot("b", availability_zone="nova:cmp-2")
    fault = {"fault": {"kind": "migration-hang", "server": a["id"], "target": "cmp-3"}}
    cloud.compute.post("/os-lab/faults", fault)
    (migration,) = cloud.migrations(instance_uuid=a["id"])
    assert cloud.boot("c")["status"] == "ERROR"
    record = why(cloud, "c")
    assert record["reason"] == "resources=VCPU:1"
    abort = f"openstack --os-compute-api-version 2.24 server migration abort {a['id']} "
    hint = follow_first_hint(cloud, record, f"{abort}{migration['id']}", osc)
    assert hint["name"] == "cmp-3" and "aborting it frees" in hint["text"]
    assert cloud.migrations(instance_uuid=a["id"])[0]["status"] == "cancelled"
    assert cloud.boot("c")["status"] == "ACTIVE"
    assert books(cloud) == {"a": {"cmp-1": 1}, "b": {"cmp-2": 1}, "c": {"cmp-3": 1}}


def test_an_orphan_of_a_server_deleted_while_its_host_was_down(cloud):
    """delete-while-down: the host comes back (as an operator brings it back up),
    the deleted server's hold stays."""
    one_vcpu_each(cloud)
    a = cloud.boot("a", availability_zone="nova:cmp-1")
    cloud.boot("b", availability_zone="nova:cmp-2")
    cloud.boot("x", availability_zone="nova:cmp-3")
    fault = {"fault": {"kind": "delete-while-down", "server": a["id"]}}
    rp = cloud.compute.post("/os-lab/faults", fault)["fault"]["providers"]["source"]
    cloud.compute.put(f"/os-services/{cloud.service('cmp-1')['id']}", {"forced_down": False})
    assert cloud.boot("c")["status"] == "ERROR"
    record = why(cloud, "c")
    assert record["reason"] == "resources=VCPU:1"
    hint = follow_first_hint(cloud, record, f"tally audit --provider {rp} --delete --apply")
    assert f"orphan {a['id']}" in hint["text"]
    assert cloud.boot("c")["status"] == "ACTIVE"
    assert books(cloud) == {"b": {"cmp-2": 1}, "x": {"cmp-3": 1}, "c": {"cmp-1": 1}}


def test_a_host_whose_compute_service_was_deleted(cloud):
    """service-delete: the provider stays, held by the server still on the host.
    The host's compute service is created again (with room for one more) and cannot
    report its provider: the old one has the host's name. Freed and deleted, the new
    one comes at the service's next periodic update (`tally lab tracker` here, where
    the lab's clock is stopped)."""
    one_vcpu_each(cloud)
    a = cloud.boot("a", availability_zone="nova:cmp-1")
    cloud.boot("b", availability_zone="nova:cmp-2")
    cloud.boot("x", availability_zone="nova:cmp-3")
    fault = {"fault": {"kind": "service-delete", "host": "cmp-1"}}
    old = cloud.compute.post("/os-lab/faults", fault)["fault"]["providers"]["source"]
    tally_lab(cloud, "host", "add", "cmp-1", "--vcpus", "2", "--cpu-ratio", "1")
    assert cloud.host("cmp-1")["provider_uuid"] != old  # not reported: the name is taken
    assert cloud.boot("c")["status"] == "ERROR"
    record = why(cloud, "c")
    assert record["reason"] == "resources=VCPU:1"
    hint = follow_first_hint(cloud, record, f"tally audit --provider {old} --delete --apply")
    assert "left from a deleted compute service" in hint["text"]
    assert f"leaked-host {a['id']}" in hint["text"]
    tally_lab(cloud, "tracker", "--host", "cmp-1")
    assert cloud.boot("c")["status"] == "ACTIVE"
    assert books(cloud) == {"b": {"cmp-2": 1}, "x": {"cmp-3": 1}, "c": {"cmp-1": 1}}
    code, found = tally(cloud, "audit", "-f", "json")  # a runs on cmp-1 holding nothing
    assert code == 3 and [(f["consumer"], f["kind"]) for f in found] == [(a["id"], "unallocated")]
    assert tally(cloud, *shlex.split(found[0]["fix"])[1:])[0] == 0
    assert books(cloud)["a"] == {"cmp-1": 1} and tally(cloud, "audit")[0] == 0


@with_osc
def test_an_evacuated_server_still_holds_its_dead_host(cloud, osc):
    """evacuation: the source is down (forced down); the server holds both hosts
    until nova-compute starts on the source again and releases its hold there."""
    one_vcpu_each(cloud)
    a = cloud.boot("a", availability_zone="nova:cmp-1")
    cloud.boot("b", availability_zone="nova:cmp-2")
    fault = {"fault": {"kind": "evacuation", "server": a["id"], "target": "cmp-3"}}
    cloud.compute.post("/os-lab/faults", fault)
    assert books(cloud)["a"] == {"cmp-1": 1, "cmp-3": 1}
    assert cloud.boot("c")["status"] == "ERROR"
    record = why(cloud, "c")
    assert record["reason"] == "resources=VCPU:1"
    hint = follow_first_hint(cloud, record, "openstack compute service set --up cmp-1", osc)
    assert "forced down" in hint["text"] and f"a ({a['id']}): 1" in hint["text"]
    assert cloud.service("cmp-1")["state"] == "up"
    assert cloud.boot("c")["status"] == "ACTIVE"
    assert books(cloud) == {"a": {"cmp-3": 1}, "b": {"cmp-2": 1}, "c": {"cmp-1": 1}}


# -- a disabled host, a used-up device ------------------------------------------


@with_osc
def test_a_disabled_host_holds_the_last_room(cloud, osc):
    """Drained and never enabled again: the scheduler asks Placement for hosts
    without COMPUTE_STATUS_DISABLED, as Nova does since Train."""
    one_vcpu_each(cloud)
    cloud.boot("a", availability_zone="nova:cmp-1")
    cloud.boot("b", availability_zone="nova:cmp-2")
    code, _ = tally(cloud, "drain", "cmp-3", "--apply")
    assert code == 0 and cloud.service("cmp-3")["status"] == "disabled"
    assert cloud.boot("c")["status"] == "ERROR"
    record = why(cloud, "c")
    assert "required=%21COMPUTE_STATUS_DISABLED" in record["query"]
    assert constraints(record)["required=!COMPUTE_STATUS_DISABLED"] == 1
    hint = follow_first_hint(
        cloud, record, "openstack compute service set --enable cmp-3 nova-compute", osc
    )
    assert hint["reason"] == "required=!COMPUTE_STATUS_DISABLED: not met"
    assert cloud.service("cmp-3")["status"] == "enabled"
    assert cloud.boot("c")["status"] == "ACTIVE"
    assert books(cloud) == {"a": {"cmp-1": 1}, "b": {"cmp-2": 1}, "c": {"cmp-3": 1}}


def test_a_used_up_device(cloud):
    """An FPGA the host reports itself (the lab's hosts are single providers), its
    one use spent: `reserved` = `total` until an operator makes it ready again."""
    cloud.placement.put("/resource_classes/CUSTOM_FPGA")
    rp = cloud.host("cmp-2")["provider_uuid"]
    held = cloud.placement.get(f"/resource_providers/{rp}/inventories")
    inventories = {**held["inventories"], "CUSTOM_FPGA": {"total": 1, "reserved": 1}}
    cloud.placement.put_inventories(rp, held["resource_provider_generation"], inventories)
    flavor = {"name": "fpga", "vcpus": 1, "ram": 512, "disk": 1, "id": "fpga"}
    flavor["extra_specs"] = {"resources:CUSTOM_FPGA": "1"}  # (the lab takes them inline)
    cloud.compute.post("/flavors", {"flavor": flavor})
    assert cloud.boot("f", flavor="fpga")["status"] == "ERROR"
    record = why(cloud, "f")
    assert record["reason"] == "resources=CUSTOM_FPGA:1"
    follow_first_hint(cloud, record, f"tally provider inventory set {rp}")
    assert "CUSTOM_FPGA:reserved=0" in record["hints"][0]["command"]
    booted = cloud.boot("f", flavor="fpga")
    assert booted["status"] == "ACTIVE"
    held = cloud.placement.get(f"/allocations/{booted['id']}")["allocations"]
    assert held[rp]["resources"]["CUSTOM_FPGA"] == 1


# -- and a full cloud -------------------------------------------------------------


def test_a_full_cloud_and_its_allocation_ratio(cloud):
    one_vcpu_each(cloud)
    for n, host in enumerate(HOSTS):
        cloud.boot(f"s{n}", availability_zone=f"nova:{host}")
    assert cloud.boot("more")["status"] == "ERROR"
    record = why(cloud, "more")
    follow_first_hint(cloud, record, "tally provider inventory set")
    assert "allocation_ratio=2.0" in record["hints"][0]["command"]
    assert cloud.boot("more")["status"] == "ACTIVE"
    placed, raised = books(cloud), record["hints"][0]["name"]
    assert placed.pop("more") == {raised: 1}  # on the host whose ratio was raised
    assert placed == {"s0": {"cmp-1": 1}, "s1": {"cmp-2": 1}, "s2": {"cmp-3": 1}}
