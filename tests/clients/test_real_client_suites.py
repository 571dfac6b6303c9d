"""Real clients' own functional tests, run against a live `tally serve`.

- osc-placement's `osc_placement/tests/functional/test_inventory.py`, whole module; its
  `TestAggregateInventory.test_with_aggregate_one_fails` matches upstream's sentence
  "Inventory for 'CUSTOM_FOO' on resource provider '<uuid>' in use." in the 409.
- nova's `SchedulerReportClientTests.test_set_inventory_for_provider`, on nova's own
  functional base (`nova.test.TestCase`: its database, RPC, policy and logging
  fixtures); SchedulerReportClient must raise InventoryInUse on "update conflict:
  Inventory for 'SRIOV_NET_VF' on resource provider '<uuid>' in use.".

Each client is installed from PyPI, with the test dependencies those tests import,
into a throw-away venv under /tmp (kept between runs; TALLY_OSC_SUITE_VENV and
TALLY_NOVA_VENV move them); the test is skipped with pip's reason when it cannot be
installed. The tests run in that venv under `upstream_runner.py`, which replaces one
thing: upstream Placement's in-process `PlacementFixture` becomes a fixture whose
`endpoint` and `token` are the live server's (nova's PlacementFixture, a subclass of
it, then sends nova's report client there too). Upstream gives each test a fresh
in-RAM database; here each run gets a fresh server (a run of the osc module shares
one: its tests delete the providers they make, and one of them makes a resource
class)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.live import VENV_TIMEOUT, tally_serve, throwaway_venv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(VENV_TIMEOUT)]

RUNNER = Path(__file__).with_name("upstream_runner.py")
TMP = Path(tempfile.gettempdir())

# upstream Placement's test fixtures (the tests import them) and what they import
FIXTURES = ["openstack-placement", "oslotest", "wsgi-intercept"]
OSC = ["python-openstackclient", "osc-placement", *FIXTURES]
OSC_VENV = Path(os.environ.get("TALLY_OSC_SUITE_VENV", TMP / "tally-osc-suite-venv"))
NOVA = ["nova", "ddt", *FIXTURES]
NOVA_VENV = Path(os.environ.get("TALLY_NOVA_VENV", TMP / "tally-nova-venv"))

OSC_MODULE = "osc_placement.tests.functional.test_inventory"
OSC_ONE_FAILS = f"{OSC_MODULE}.TestAggregateInventory.test_with_aggregate_one_fails"
NOVA_SET_INVENTORY = (
    "nova.tests.functional.test_report_client."
    "SchedulerReportClientTests.test_set_inventory_for_provider"
)


def run_upstream(venv: Path, endpoint: str, names: list[str], work: Path) -> dict:
    """Runs upstream tests by name in `venv` against `endpoint`; the runner's outcome."""
    result = work / "outcome.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "TALLY_"))}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    command = [str(venv / "bin" / "python"), str(RUNNER), "--endpoint", endpoint]
    done = subprocess.run(
        [*command, "--token", "admin", "--result", str(result), *names],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    if not result.exists():
        pytest.fail(f"the runner ended ({done.returncode}) without an outcome:\n{output[-6000:]}")
    return {**json.loads(result.read_text()), "output": output}


def broken(outcome: dict) -> list[dict]:
    return outcome["failures"] + outcome["errors"]


def assert_passed(outcome: dict, must_pass: list[str], serve_log: Path) -> None:
    """Every test that ran passed, `must_pass` among them; else upstream's tracebacks
    (osc-placement's hold the server's error detail) and both sides' logs."""
    failed = broken(outcome) + [
        {"id": test, "traceback": "unexpected success"} for test in outcome["unexpected_successes"]
    ]
    report = "".join(f"\n--- {f['id']}\n{f['traceback']}" for f in failed)
    assert outcome["run"] and not failed, (
        f"{len(failed)} of {outcome['run']} upstream tests failed:{report}\n"
        f"--- runner output (tail)\n{outcome['output'][-4000:]}\n"
        f"--- tally serve log (tail)\n{serve_log.read_text()[-3000:]}"
    )
    assert set(must_pass) <= set(outcome["passed"]), (
        f"did not run: {sorted(set(must_pass) - set(outcome['passed']))}"
    )


def test_osc_placement_inventory_suite(tmp_path):
    venv = throwaway_venv(OSC_VENV, OSC, " ".join(OSC))
    with tally_serve(tmp_path) as url:
        # at the root: behind /placement, see the test below
        outcome = run_upstream(venv, url, [OSC_MODULE], tmp_path)
    assert_passed(outcome, [OSC_ONE_FAILS], tmp_path / "serve.log")
    assert len(outcome["passed"]) >= 20  # the whole module ran, not just one class


def test_osc_placement_behind_the_placement_prefix(tmp_path):
    """Upstream's fixture serves Placement at http://<host>/placement, as devstack
    does; osc-placement's `resource provider create` follows the 201's location, which
    must be absolute (a path would get the prefix twice: it did, a 404)."""
    venv = throwaway_venv(OSC_VENV, OSC, " ".join(OSC))
    with tally_serve(tmp_path) as url:
        outcome = run_upstream(venv, f"{url}/placement", [OSC_ONE_FAILS], tmp_path)
    assert_passed(outcome, [OSC_ONE_FAILS], tmp_path / "serve.log")


def test_nova_report_client_set_inventory(tmp_path):
    venv = throwaway_venv(NOVA_VENV, NOVA, " ".join(NOVA))
    with tally_serve(tmp_path) as url:
        outcome = run_upstream(venv, f"{url}/placement", [NOVA_SET_INVENTORY], tmp_path)
    assert_passed(outcome, [NOVA_SET_INVENTORY], tmp_path / "serve.log")
