"""The real `openstack` CLI (python-openstackclient + osc-placement) against a live
`tally serve` lab, through the clouds.yaml `tally lab up` prints.

The client is installed from PyPI into a throw-away venv under /tmp (kept between
runs; TALLY_OSC_VENV moves it); when it cannot be installed the test is skipped with
pip's reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tally.compute.ops.servers import LAB_IMAGE
from tests.live import VENV_TIMEOUT, install_osc, tally_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(VENV_TIMEOUT)]


class Shell:
    def __init__(self, venv: Path, url: str, clouds: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "TALLY_"))}
        self.env.update(OS_CLIENT_CONFIG_FILE=str(clouds), OS_CLOUD="tally-lab", TALLY_URL=url)
        self.openstack_bin = str(venv / "bin" / "openstack")

    def run(self, command: list[str]) -> str:
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def fails(self, command: list[str]) -> str:
        """Runs a command that must fail; what it printed (stdout and stderr)."""
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, f"{' '.join(command)} succeeded:\n{done.stdout}"
        return done.stdout + done.stderr

    def tally(self, line: str) -> str:
        return self.run(
            [sys.executable, "-c", "from tally.cli.main import cli; cli()", *line.split()]
        )

    def openstack(self, line: str) -> object:
        """`openstack LINE -f json`, parsed (None when the command prints nothing)."""
        out = self.run([self.openstack_bin, *line.split(), "-f", "json"])
        return json.loads(out) if out.strip() else None

    def openstack_plain(self, line: str) -> str:
        return self.run([self.openstack_bin, *line.split()])


def test_the_openstack_cli_drives_the_lab(tmp_path):
    venv = install_osc()
    with tally_serve(tmp_path) as url:
        clouds = tmp_path / "clouds.yaml"
        sh = Shell(venv, url, clouds)
        printed = sh.tally("lab up --hosts 3 --servers 4")
        clouds.write_text(printed[printed.index("clouds:") :])

        servers = sh.openstack("server list")
        assert len(servers) == 4 and {s["Status"] for s in servers} == {"ACTIVE"}
        server = servers[0]["ID"]
        shown = sh.openstack(f"server show {server}")
        source = shown["OS-EXT-SRV-ATTR:host"]
        assert shown["status"] == "ACTIVE" and source.startswith("lab-compute-")
        assert "m1.small" in json.dumps(shown["flavor"])

        hypervisors = sh.openstack("hypervisor list")
        assert sorted(h["Hypervisor Hostname"] for h in hypervisors) == [
            "lab-compute-1",
            "lab-compute-2",
            "lab-compute-3",
        ]
        rp = {h["Hypervisor Hostname"]: h["ID"] for h in hypervisors}
        providers = sh.openstack("resource provider list")
        assert {p["uuid"] for p in providers} == set(rp.values())

        # a live migration held in `running`, seen and aborted with the openstack CLI
        sh.tally(f"lab migrate {server}")
        sh.tally("lab step")
        running = sh.openstack("server migration list --status running")
        assert [m["Server UUID"] for m in running] == [server]
        migration = running[0]["UUID"]
        held = sh.openstack(f"resource provider show --allocations {rp[source]}")["allocations"]
        assert migration in held and server not in held  # the migration holds the source
        sh.openstack_plain(f"server migration abort {server} {migration}")
        assert sh.openstack("server migration list --status running") == []
        held = sh.openstack(f"resource provider show --allocations {rp[source]}")["allocations"]
        assert server in held and migration not in held
        usage = {
            u["resource_class"]: u["usage"]
            for u in sh.openstack(f"resource provider usage show {rp[source]}")
        }
        assert usage["VCPU"] >= 1 and usage["MEMORY_MB"] >= 2048

        services = sh.openstack("compute service list")
        assert {s["Host"] for s in services} == set(rp) and {s["State"] for s in services} == {"up"}
        sh.openstack_plain(
            "compute service set --disable --disable-reason drain lab-compute-2 nova-compute"
        )
        status = {s["Host"]: s["Status"] for s in sh.openstack("compute service list")}
        assert status == {
            "lab-compute-1": "enabled",
            "lab-compute-2": "disabled",
            "lab-compute-3": "enabled",
        }

        sh.openstack_plain(f"server delete {server}")
        assert server not in {s["ID"] for s in sh.openstack("server list")}
        held = sh.openstack(f"resource provider show --allocations {rp[source]}")["allocations"]
        assert server not in held

        # the seed's refusal, read through osc-placement (which shows the detail's last
        # line): provider, class, used and capacity are all in that one line
        busy = next(
            h
            for h, uuid in rp.items()
            if sh.openstack(f"resource provider show --allocations {uuid}")["allocations"]
        )
        usage = {
            u["resource_class"]: u["usage"]
            for u in sh.openstack(f"resource provider usage show {rp[busy]}")
        }
        total = sh.openstack(f"resource provider inventory show {rp[busy]} VCPU")["total"]
        reserved = total - usage["VCPU"] + 1  # capacity one short of what is used
        shrink = (
            f"resource provider inventory set {rp[busy]} --amend "
            f"--resource VCPU:reserved={reserved} --resource VCPU:allocation_ratio=1"
        )
        refused = sh.fails([sh.openstack_bin, *shrink.split()])
        assert (
            f"update conflict: Inventory for 'VCPU' on resource provider '{rp[busy]}' in use. "
            f"{usage['VCPU']} used, new capacity {usage['VCPU'] - 1}, held by "
        ) in refused
        removal = f"resource provider inventory delete {rp[busy]} --resource-class VCPU"
        refused = sh.fails([sh.openstack_bin, *removal.split()])
        assert (
            f"Unable to delete inventory of class VCPU: Inventory for 'VCPU' on resource provider "
            f"'{rp[busy]}' in use. {usage['VCPU']} used, the inventory cannot be removed, held by "
        ) in refused
        after = sh.openstack(f"resource provider inventory show {rp[busy]} VCPU")
        assert (after["total"], after["reserved"]) == (total, 0)  # nothing was written


def test_a_boot_is_found_by_its_request_id_with_the_openstack_cli(tmp_path):
    """Issue 39: boot from a catalog image by name, read the server's events, and find
    the request id the user holds in Placement's claim history. (The command for no
    network is `--no-network`: `--network none` names a network called "none", which
    python-openstackclient looks up, on a real cloud as on the lab.)"""
    venv = install_osc()
    with tally_serve(tmp_path) as url:
        clouds = tmp_path / "clouds.yaml"
        sh = Shell(venv, url, clouds)
        printed = sh.tally("lab up --hosts 2 --servers 0")
        clouds.write_text(printed[printed.index("clouds:") :])

        images = {i["Name"]: i["ID"] for i in sh.openstack("image list")}
        assert images["cirros"] == LAB_IMAGE
        assert sh.openstack("image show cirros")["id"] == LAB_IMAGE
        server = sh.openstack(
            "server create --image cirros --flavor m1.small --no-network srv1 --wait"
        )
        assert server["status"] == "ACTIVE"
        assert server["image"] == f"cirros ({LAB_IMAGE})"

        (listed,) = sh.openstack("server event list srv1")
        request_id = listed["Request ID"]
        assert (listed["Action"], listed["Server ID"]) == ("create", server["id"])
        shown = sh.openstack(f"server event show srv1 {request_id}")
        assert (shown["action"], shown["message"]) == ("create", None)
        assert [(e["event"], e["result"]) for e in shown["events"]] == [
            ("conductor_schedule_and_build_instances", "Success"),
            ("compute__do_build_and_run_instance", "Success"),
        ]

        # the books: the server holds its flavor on its host, claimed under that id
        host = shown["events"][1]["host"]
        rp = {h["Hypervisor Hostname"]: h["ID"] for h in sh.openstack("hypervisor list")}
        held = sh.openstack(f"resource provider allocation show {server['id']}")
        assert [(a["resource_provider"], a["resources"]) for a in held] == [
            (rp[host], {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20})
        ]
        history = httpx.get(
            f"{url}/placement/tally/v1/history",
            params={"consumer": server["id"]},
            headers={"x-auth-token": "admin"},
            trust_env=False,
        ).json()["history"]
        assert history and {h["global_request_id"] for h in history} == {request_id}

        # a boot that finds no host: ERROR, and its action says why
        sh.openstack("flavor create --ram 1000000 --vcpus 1 --disk 1 huge")
        create = "server create --image cirros --flavor huge --no-network big --wait"
        assert "Error creating server" in sh.fails([sh.openstack_bin, *create.split()])
        (failed,) = sh.openstack("server event list big")
        shown = sh.openstack(f"server event show big {failed['Request ID']}")
        assert shown["message"] == "Error"
        (event,) = shown["events"]
        assert (event["event"], event["result"]) == (
            "conductor_schedule_and_build_instances",
            "Error",
        )
        assert event["details"].startswith("No valid host was found.")
