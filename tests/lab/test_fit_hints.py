"""`tally explain candidates` on a query that finds nothing says what would make it
fit: each hint's command, run as printed, turns the same query non-empty."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest
from click.testing import CliRunner

from tally.cli.context import Context
from tally.cli.main import cli


def tally(lab, *args: str) -> tuple[int, Any]:  # noqa: ANN001
    context = Context.for_client(lab.placement)
    context.compute = lab.compute
    result = CliRunner().invoke(cli, list(args), obj=context)
    try:
        return result.exit_code, json.loads(result.stdout)
    except ValueError:
        return result.exit_code, result.output


def explain(lab, *query: str) -> dict:  # noqa: ANN001
    code, found = tally(lab, "explain", "candidates", *query, "-f", "json")
    assert code in (0, 1), found
    return found


def follow(lab, found: dict, expected: str) -> None:  # noqa: ANN001
    """Run the first hint's command as printed (it must be `expected`'s)."""
    assert found["candidates"] == 0 and found["hints"], found
    command = found["hints"][0]["command"]
    assert command.startswith(expected), found["hints"]
    words = shlex.split(command)
    assert words[0] == "tally"
    code, output = tally(lab, *words[1:])
    assert code in (0, 4), output  # (4: `audit --delete --apply` fixed all it found)


@pytest.fixture
def hosts(cloud):  # noqa: ANN001
    cloud.rp = {h["name"]: h["provider_uuid"] for h in cloud.compute.get("/os-lab/hosts")["hosts"]}
    return cloud


def reserve_vcpu(lab, rp: str, reserved: int) -> None:  # noqa: ANN001
    """Leave little room on the host (an amount asked stays within max_unit)."""
    path = f"/resource_providers/{rp}/inventories/VCPU"
    record = lab.placement.get(path)
    lab.placement.put(path, {**record, "reserved": reserved})


def free_vcpu(lab, rp: str) -> int:  # noqa: ANN001
    record = lab.placement.get(f"/resource_providers/{rp}/inventories")["inventories"]["VCPU"]
    used = lab.placement.usages(rp).get("VCPU", 0)
    return int((record["total"] - record["reserved"]) * record["allocation_ratio"]) - used


def test_holds_of_a_deleted_server_freed_by_the_audit(hosts):
    web = hosts.boot("web", availability_zone="nova:cmp-1")
    rp = hosts.rp["cmp-1"]
    hosts.compute.post(
        "/os-lab/faults", {"fault": {"kind": "delete-while-down", "server": web["id"]}}
    )
    reserve_vcpu(hosts, rp, 12)  # (16 - 12) x 4 = 16, one held by the orphan
    want = free_vcpu(hosts, rp) + 1  # one more than is free
    query = ["--resource", f"VCPU={want}", "--in-tree", rp]
    found = explain(hosts, *query)
    follow(hosts, found, f"tally audit --provider {rp} --delete --apply")
    assert explain(hosts, *query)["candidates"] == 1
    # the host is still down (the fault's): a boot needs it up as well, and the hint says so
    text = found["hints"][0]["text"]
    assert f"orphan {web['id']}" in text
    assert text.endswith(
        "and cmp-1: its compute service is down (forced down): nothing is scheduled there "
        "until it is up (openstack compute service set --up cmp-1 nova-compute)"
    )


def test_a_used_up_device(hosts):
    hosts.placement.put("/resource_classes/CUSTOM_FPGA")
    rp = hosts.rp["cmp-2"]
    made = hosts.placement.post(
        "/resource_providers", {"name": "fpga0", "parent_provider_uuid": rp}
    ).json()
    hosts.placement.put_inventories(made["uuid"], 0, {"CUSTOM_FPGA": {"total": 1, "reserved": 1}})
    query = ["--resource", "CUSTOM_FPGA=1"]
    follow(hosts, explain(hosts, *query), f"tally provider inventory set {made['uuid']}")
    assert explain(hosts, *query)["candidates"] == 1


def test_an_allocation_ratio(hosts):
    rp = hosts.rp["cmp-3"]
    reserve_vcpu(hosts, rp, 14)  # (16 - 14) x 4 = 8
    query = ["--resource", f"VCPU={free_vcpu(hosts, rp) + 2}", "--in-tree", rp]
    found = explain(hosts, *query)
    assert "allocation_ratio" in found["hints"][0]["command"], found
    follow(hosts, found, f"tally provider inventory set {rp}")
    assert explain(hosts, *query)["candidates"] == 1


def test_a_missing_trait(hosts):
    hosts.placement.put("/traits/CUSTOM_FAST")
    rp = hosts.rp["cmp-1"]
    query = ["--resource", "VCPU=1", "--required", "CUSTOM_FAST", "--in-tree", rp]
    follow(hosts, explain(hosts, *query), f"tally provider trait set {rp}")
    assert explain(hosts, *query)["candidates"] == 1


def test_a_disabled_host_names_the_service_to_enable(hosts):
    rp = hosts.rp["cmp-1"]
    traits = hosts.placement.get(f"/resource_providers/{rp}/traits")
    body = {
        "resource_provider_generation": traits["resource_provider_generation"],
        "traits": [*traits["traits"], "COMPUTE_STATUS_DISABLED"],
    }
    hosts.placement.put(f"/resource_providers/{rp}/traits", body)
    found = explain(
        hosts, "--resource", "VCPU=1", "--forbidden", "COMPUTE_STATUS_DISABLED", "--in-tree", rp
    )
    assert (
        found["hints"][0]["command"] == "openstack compute service set --enable cmp-1 nova-compute"
    )
