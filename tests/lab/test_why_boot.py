"""A boot that finds no host, asked later by the server's name: `tally why SERVER`
finds the search of its create request (through the instance actions' request id,
the global request id the compute API sent Placement), says which constraint ruled
out which host, and what would make it fit; its first hint's command, run as
printed, makes the same boot succeed."""

from __future__ import annotations

import shlex

from tests.lab.conftest import tally_lab
from tests.lab.test_fit_hints import tally

HOSTS = ("cmp-1", "cmp-2", "cmp-3")


def one_vcpu_each(lab) -> None:  # noqa: ANN001
    """Hosts of one VCPU (no oversubscription): one m1.small fills a host."""
    for host in HOSTS:
        tally_lab(lab, "host", "set", host, "--vcpus", "1", "--cpu-ratio", "1")


def why(lab, server: str) -> dict:  # noqa: ANN001
    code, found = tally(lab, "why", server, "-f", "json")
    assert code == 0, found
    (record,) = found
    assert record["action"] == "create"
    return record


def follow_first_hint(lab, record: dict, expected: str) -> None:  # noqa: ANN001
    command = record["hints"][0]["command"]
    assert command.startswith(expected), record["hints"]
    code, output = tally(lab, *shlex.split(command)[1:])
    assert code in (0, 4), output


def test_a_failed_move_holds_the_last_room(cloud):
    one_vcpu_each(cloud)
    a = cloud.boot("a", availability_zone="nova:cmp-1")
    cloud.boot("b", availability_zone="nova:cmp-2")
    fault = {"fault": {"kind": "migration-error", "server": a["id"], "target": "cmp-3"}}
    cloud.compute.post("/os-lab/faults", fault)
    assert cloud.boot("c")["status"] == "ERROR"  # No valid host was found
    record = why(cloud, "c")
    assert record["reason"] == "resources=VCPU:1"
    ruled = {c["constraint"]: c["rules_out"] for c in record["verdict"]["constraints"]}
    assert ruled["resources=VCPU:1"] == 3
    follow_first_hint(cloud, record, f"tally heal --instance {a['id']}")
    assert cloud.boot("c")["status"] == "ACTIVE"


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


def test_a_full_cloud_and_its_allocation_ratio(cloud):
    one_vcpu_each(cloud)
    for n, host in enumerate(HOSTS):
        cloud.boot(f"s{n}", availability_zone=f"nova:{host}")
    assert cloud.boot("more")["status"] == "ERROR"
    record = why(cloud, "more")
    follow_first_hint(cloud, record, "tally provider inventory set")
    assert "allocation_ratio=2.0" in record["hints"][0]["command"]
    assert cloud.boot("more")["status"] == "ACTIVE"
