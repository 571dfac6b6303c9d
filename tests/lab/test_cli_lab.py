"""`tally lab ...` commands, in-process against the composed server."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from tally.cli.context import Context
from tally.cli.main import cli


def run(lab, *args: str, code: int = 0) -> str:
    context = Context()
    context.compute = lab.compute
    result = CliRunner().invoke(cli, ["lab", *args], obj=context)
    assert result.exit_code == code, result.output
    return result.output


def test_lab_up_builds_a_demo_cloud_and_prints_its_clouds_yaml(lab):
    out = run(lab, "up", "--hosts", "2", "--servers", "3")
    assert "Lab up: 2 hosts, 3 servers." in out
    cloud = yaml.safe_load(out[out.index("clouds:") :])["clouds"]["tally-lab"]
    assert cloud["auth"]["auth_url"] == "http://lab.test/identity/v3"
    assert (cloud["auth"]["username"], cloud["auth"]["password"]) == ("admin", "admin")
    run(lab, "up", "--hosts", "3", "--servers", "3")  # idempotent: only what is missing
    status = json.loads(run(lab, "status", "-f", "json"))
    assert (status["hosts"], status["servers"]) == (3, 3)
    flavors = [f["name"] for f in lab.compute.get("/flavors")["flavors"]]
    assert flavors == ["m1.tiny", "m1.small", "m1.medium", "m1.large"]
    assert run(lab, "clouds").startswith("clouds:")


def test_hosts_boot_migrate_step(lab):
    lab.flavor()
    hosts = json.loads(
        run(lab, "host", "add", "rack", "--count", "2", "--vcpus", "8", "-f", "json")
    )
    assert [h["name"] for h in hosts] == ["rack-1", "rack-2"] and hosts[0]["vcpus"] == 8
    booted = json.loads(run(lab, "boot", "app", "--count", "2", "--host", "rack-1", "-f", "json"))
    assert [(s["name"], s["status"], s["host"]) for s in booted] == [
        ("app-1", "ACTIVE", "rack-1"),
        ("app-2", "ACTIVE", "rack-1"),
    ]
    moved = json.loads(run(lab, "migrate", booted[0]["id"], "-f", "json"))
    assert (moved["status"], moved["dest_compute"]) == ("preparing", "rack-2")
    stepped = json.loads(run(lab, "step", "--count", "2", "-f", "json"))
    assert [m["status"] for m in stepped] == ["completed"]
    cold = json.loads(run(lab, "migrate", booted[1]["id"], "--cold", "-f", "json"))
    assert cold["migration_type"] == "migration"


def test_boot_from_volume_claims_no_root_disk(lab):
    lab.hosts("cmp")
    lab.flavor()  # m1.small: VCPU 1, MEMORY_MB 2048, DISK_GB 20
    booted = json.loads(run(lab, "boot", "vol", "--boot-from-volume", "20", "-f", "json"))
    server = lab.server_doc(booted[0]["id"])
    assert server["status"] == "ACTIVE" and server["image"] == ""
    assert lab.held(server["id"]) == {
        lab.host("cmp")["provider_uuid"]: {"VCPU": 1, "MEMORY_MB": 2048}
    }
    assert "--boot-from-volume" in run(lab, "boot", "x", "--boot-from-volume", "0", code=127)


def test_boot_that_finds_no_host_exits_1(lab):
    lab.hosts("small", vcpus=1, memory_mb=1024)
    lab.flavor()
    out = run(lab, "boot", "x", code=1)
    assert "ERROR" in out


def test_host_set_and_tracker(lab):
    host = lab.hosts("cmp-1")[0]
    changed = json.loads(
        run(lab, "host", "set", "cmp-1", "--reserved-memory-mb", "2048", "-f", "json")
    )
    assert changed["reserved_memory_mb"] == 2048
    inventory = lab.placement.inventories(host["provider_uuid"])["inventories"]
    assert inventory["MEMORY_MB"]["reserved"] == 2048
    reports = json.loads(run(lab, "tracker", "-f", "json"))
    assert reports == [
        {
            "host": "cmp-1",
            "provider": host["provider_uuid"],
            "inventory_written": False,
            "error": None,
        }
    ]
    listed = json.loads(run(lab, "host", "list", "-f", "json"))
    assert listed[0]["reserved_memory_mb"] == 2048
    run(lab, "host", "set", "cmp-1", code=127)  # nothing to change


def test_errors_from_the_compute_api_exit_1_with_its_message(lab):
    out = run(lab, "migrate", "no-such-server", code=1)
    assert "could not be found" in out


def test_break_takes_format_and_columns_as_every_command(lab):
    """Issue 40, item 7: `-f value -c server` printed the whole record as YAML, and a
    `-c` naming no column injected the fault, then exited 127."""
    lab.hosts("cmp-1", "cmp-2")
    lab.flavor()
    servers = [lab.boot(f"vm-{n}")["id"] for n in range(4)]
    broken = run(lab, "break", "delete-while-down", "-f", "value", "-c", "server")
    assert broken == f"{servers[0]}\n"
    assert "unknown column sever" in run(lab, "break", "delete-while-down", "-c", "sever", code=127)
    assert lab.compute.get("/os-lab")["lab"]["servers"] == 3  # nothing more injected
    picked = json.loads(run(lab, "break", "delete-while-down", "-f", "json", "-c", "kind"))
    assert picked == {"kind": "delete-while-down"}
    whole = json.loads(run(lab, "break", "delete-while-down", "-f", "json"))
    assert {"kind", "server", "providers", "held"} <= set(whole)
    table = run(lab, "break", "delete-while-down", "-c", "server", "-c", "host")
    assert servers[3] in table and "Consumers left" not in table
