"""Each fault of the seed end to end, as an operator meets it: break it on a live
`tally serve` lab, see an inventory change refused, ask `tally explain` about the
provider, run every command of its plan in order exactly as printed (in a shell, with
`tally` and the real `openstack` on PATH), then read the books back through the APIs:
`tally audit` exits 0, every ACTIVE server holds its flavor on its host's provider and
nothing else, no migration holds anything, and the refused change has gone through.

On SQLite, and on PostgreSQL when TALLY_TEST_DATABASE names a server; and as a real
cloud is reached: Placement and compute on separate servers (`--compute-url`), or both
found in the Keystone catalog of `--os-cloud`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tally.nova.flavors import claimed_resources
from tests.conftest import PG_SERVER
from tests.live import VENV_TIMEOUT, install_osc, tally_serve

sys.path.insert(0, str(Path(__file__).parents[1] / "conformance"))
from fresh_db import create_database  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(VENV_TIMEOUT)]

# fault -> which provider of its report the operator shrinks, and how far
FAULTS = {
    "delete-while-down": ("source", "to what its servers hold"),
    "migration-error": ("destination", "to what its servers hold"),
    "migration-hang": ("destination", "to what its servers hold"),
    "evacuation": ("source", "to what its servers hold"),
    "service-delete": ("source", "to nothing"),
}
ACCEPTED = {"tally audit": (0, 4)}  # nova-manage's 4: everything found was fixed


class Operator:
    """A shell on the operator's machine: TALLY_URL and the lab's clouds.yaml set;
    `placement` and `compute` read the books over HTTP."""

    def __init__(self, url: str, work: Path, osc: Path, placement: str | None = None) -> None:
        self.url = url
        self.placement_url = placement or f"{url}/placement"
        path = f"{Path(sys.executable).parent}:{osc / 'bin'}:{os.environ.get('PATH', '')}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "TALLY_"))}
        self.env.update(PATH=path, TALLY_URL=placement or url, OS_CLOUD="tally-lab")
        if placement:  # Placement on its own: compute is elsewhere
            self.env["TALLY_COMPUTE_URL"] = f"{url}/compute/v2.1"
        self.env["OS_CLIENT_CONFIG_FILE"] = str(work / "clouds.yaml")
        self.api = httpx.Client(headers={"x-auth-token": "admin"}, timeout=60, trust_env=False)

    def sh(self, line: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-c", line], env=self.env, capture_output=True, text=True, timeout=300
        )

    def ok(self, line: str, codes: tuple[int, ...] = (0,)) -> str:
        done = self.sh(line)
        assert done.returncode in codes, f"$ {line}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def placement(self, path: str) -> Any:
        answer = self.api.get(
            f"{self.placement_url}{path}", headers={"openstack-api-version": "placement 1.39"}
        )
        answer.raise_for_status()
        return answer.json()

    def compute(self, path: str) -> Any:
        answer = self.api.get(  # at whatever the lab speaks (it may be capped)
            f"{self.url}/compute/v2.1{path}", headers={"openstack-api-version": "compute latest"}
        )
        answer.raise_for_status()
        return answer.json()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The settings of the lab's database (a fresh PostgreSQL database, or SQLite)."""
    if request.param == "sqlite":
        yield {}
        return
    if not PG_SERVER:
        pytest.skip("PostgreSQL tests need TALLY_TEST_DATABASE=postgresql+psycopg://.../")
    url, drop = create_database(PG_SERVER, f"tally_plans_{uuid.uuid4().hex[:10]}")
    yield {"database_url": url, "lab": "on"}
    drop()


def lab_up(op: Operator, work: Path, cloud_only: bool = False) -> Operator:
    op.ok("tally lab up --hosts 3 --servers 6")
    op.ok(f"tally lab clouds > {work / 'clouds.yaml'}")
    if cloud_only:  # from here on, only the catalog says where things are
        op.env.pop("TALLY_URL")
    return op


@pytest.fixture
def operator(backend: dict[str, str], tmp_path: Path) -> Iterator[Operator]:
    osc = install_osc()
    with tally_serve(tmp_path, lab_step_seconds="1", **backend) as url:
        yield lab_up(Operator(url, tmp_path, osc), tmp_path)


def active_servers(op: Operator) -> list[dict[str, Any]]:
    found = op.compute("/servers/detail?all_tenants=1")["servers"]
    return [s for s in found if s["status"] == "ACTIVE"]


def provider_named(op: Operator, name: str) -> str | None:
    found = op.placement(f"/resource_providers?name={name}")["resource_providers"]
    return found[0]["uuid"] if found else None


def flavor(op: Operator, server: dict[str, Any]) -> dict[str, int]:
    """What the server's flavor claims (embedded from 2.47, looked up before)."""
    found = server["flavor"]
    if "vcpus" not in found:
        found = op.compute(f"/flavors/{found['id']}")["flavor"]
    return claimed_resources(found, volume_backed=server["image"] == "")


def the_change(op: Operator, rp: str, how: str) -> tuple[str, int]:
    """The --resource options of the operator's change to VCPU, and the reserved asked."""
    host = op.placement(f"/resource_providers/{rp}")["name"]
    total = op.placement(f"/resource_providers/{rp}/inventories")["inventories"]["VCPU"]["total"]
    held = sum(
        flavor(op, s)["VCPU"] for s in active_servers(op) if s["OS-EXT-SRV-ATTR:host"] == host
    )
    reserved = total if how == "to nothing" else total - held
    return f"--resource VCPU:reserved={reserved} --resource VCPU:allocation_ratio=1", reserved


def assert_books_true(op: Operator) -> None:
    """Audit finds nothing, and Placement holds exactly each ACTIVE server's flavor on
    its host's provider: no other consumer (no migration, no orphan) holds anything."""
    op.ok("tally audit")
    servers = active_servers(op)
    consumers = set()
    for rp in op.placement("/resource_providers")["resource_providers"]:
        found = op.placement(f"/resource_providers/{rp['uuid']}/allocations")["allocations"]
        consumers |= set(found)
    assert consumers == {s["id"] for s in servers}
    for server in servers:
        host_rp = provider_named(op, server["OS-EXT-SRV-ATTR:host"])
        held = op.placement(f"/allocations/{server['id']}")["allocations"]
        mine = {rp: a["resources"] for rp, a in held.items()}
        assert mine == {host_rp: flavor(op, server)}, server["name"]


@pytest.mark.parametrize("fault", FAULTS)
def test_the_plan_of_explain_puts_the_books_right(operator: Operator, fault: str) -> None:
    """The newest compute API has a command for every step, and the plan run puts the
    books right."""
    assert run_the_plan(operator, fault) is None


def run_the_plan(op: Operator, fault: str) -> list[str] | None:
    """Run the plan; None when it put the books right, else the steps it could not
    give a command for (only an older compute API may leave some)."""
    which, how = FAULTS[fault]
    report = json.loads(op.ok(f"tally lab break {fault} -f json"))
    rp = report["providers"][which]
    host = op.placement(f"/resource_providers/{rp}")["name"]
    change, reserved = the_change(op, rp, how)
    refused = op.sh(f"tally provider inventory set {rp} --amend {change}")
    assert refused.returncode == 1, refused.stdout + refused.stderr

    explained = op.sh(f"tally explain {rp} {change} -f json")
    assert explained.returncode == 1, explained.stderr
    plan = json.loads(explained.stdout)
    commands = [s["command"] for s in plan["steps"]]
    if None in commands:  # an older compute API cannot do that step: it must say why
        blocked = [s["text"] for s in plan["steps"] if s["command"] is None]
        return blocked
    assert commands[-1].startswith("tally provider inventory set ")
    text = json.dumps(plan)
    assert "THAT" not in text and "HOST" not in text  # names, never placeholders
    for command in commands:
        codes = next((c for prefix, c in ACCEPTED.items() if command.startswith(prefix)), (0,))
        op.ok(command, codes)

    assert_books_true(op)
    now = provider_named(op, host)
    vcpu = op.placement(f"/resource_providers/{now}/inventories")["inventories"]["VCPU"]
    assert (vcpu["reserved"], vcpu["allocation_ratio"]) == (reserved, 1.0)
    return None


@pytest.mark.parametrize("fault", ["migration-hang", "service-delete"])
def test_placement_and_compute_on_separate_servers(tmp_path: Path, fault: str) -> None:
    """Placement alone (Tally with the lab off, as every PostgreSQL deployment) and a
    compute API elsewhere that claims through it: the doctor gets --compute-url."""
    osc = install_osc()
    (tmp_path / "placement").mkdir()
    (tmp_path / "compute").mkdir()
    with tally_serve(tmp_path / "placement", lab="off") as placement:
        lab = {"lab_step_seconds": "1", "lab_placement_url": f"{placement}/placement"}
        with tally_serve(tmp_path / "compute", **lab) as compute:
            op = lab_up(Operator(compute, tmp_path, osc, placement=placement), tmp_path)
            assert run_the_plan(op, fault) is None


@pytest.mark.parametrize("fault", ["migration-hang", "service-delete"])
def test_both_endpoints_from_the_catalog(tmp_path: Path, fault: str) -> None:
    """No TALLY_URL: `--os-cloud` (OS_CLOUD) finds Placement and compute in the lab
    identity's catalog, for the doctor and for the plan's commands."""
    osc = install_osc()
    with tally_serve(tmp_path, lab_step_seconds="1") as url:
        op = lab_up(Operator(url, tmp_path, osc), tmp_path, cloud_only=True)
        assert run_the_plan(op, fault) is None


@pytest.mark.parametrize("cap", ["2.53", "2.1"])
@pytest.mark.parametrize("fault", FAULTS)
def test_plans_against_an_older_nova(tmp_path: Path, cap: str, fault: str) -> None:
    """The lab capped at an older compute microversion: what it lacks degrades the
    doctor (said on stderr), never makes it wrong. Below 2.24 a live migration cannot be
    aborted, so the hung one's plan says so instead of offering a command."""
    osc = install_osc()
    settings = {"lab_step_seconds": "1", "lab_compute_max_version": cap}
    with tally_serve(tmp_path, **settings) as url:
        op = lab_up(Operator(url, tmp_path, osc), tmp_path)
        blocked = run_the_plan(op, fault)
    if fault == "migration-hang" and cap == "2.1":
        assert blocked and "aborting it needs compute 2.24" in blocked[0], blocked
    else:
        assert blocked is None, blocked
