"""`tally audit` and `tally heal` end as nova-manage's `placement audit` and
`placement heal_allocations` do, each status of tally.cli.exits.TABLE reached
against the lab (issue 29, item 2: `heal --instance <missing uuid>` was 255).

    cmp-1  web        cmp-2  db        cmp-3  (empty)
"""

from __future__ import annotations

import re
import shlex
import uuid as uuidlib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tally.cli import exits
from tally.cli.context import Context
from tally.cli.main import cli

MISSING = "11111111-2222-4333-8444-555555555555"


@pytest.fixture
def two(cloud):
    cloud.web = cloud.boot("web", availability_zone="nova:cmp-1")
    cloud.db = cloud.boot("db", availability_zone="nova:cmp-2")
    cloud.rp = {h["name"]: h["provider_uuid"] for h in cloud.compute.get("/os-lab/hosts")["hosts"]}
    return cloud


def tally(lab, *args: str) -> Result:
    context = Context.for_client(lab.placement)
    context.compute = lab.compute
    return CliRunner().invoke(cli, list(args), obj=context)


def test_audit_0_nothing_found_3_found_4_all_fixed(two):
    assert tally(two, "audit").exit_code == exits.DONE == 0
    fault = {"kind": "delete-while-down", "server": two.web["id"]}
    two.compute.post("/os-lab/faults", {"fault": fault})
    assert tally(two, "audit").exit_code == exits.FOUND == 3
    dry = tally(two, "audit", "--delete")  # a dry run that would fix all of it
    assert dry.exit_code == exits.PENDING == 5, dry.output
    fixed = tally(two, "audit", "--delete", "--apply")
    assert fixed.exit_code == exits.ALL_FIXED == 4, fixed.output
    assert tally(two, "audit").exit_code == 0


def test_heal_0_healed_1_more_left_4_nothing(two):
    assert tally(two, "heal").exit_code == exits.NOTHING_TO_HEAL == 4
    for server in (two.web, two.db):
        two.placement.delete(f"/allocations/{server['id']}")
    more = tally(two, "heal", "--apply", "--max-count", "1")
    assert more.exit_code == exits.MORE_LEFT == 1, more.output
    assert tally(two, "heal", "--apply").exit_code == exits.DONE == 0
    assert tally(two, "heal").exit_code == 4


def test_heal_2_a_host_without_provider(two):
    two.compute.post("/os-lab/faults", {"fault": {"kind": "service-delete", "host": "cmp-2"}})
    assert tally(two, "audit", "--delete", "--apply").exit_code == exits.ALL_FIXED
    stranded = tally(two, "heal")
    assert stranded.exit_code == exits.NO_PROVIDER == 2, stranded.output
    assert f"Cannot heal {two.db['id']}" in stranded.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["heal", "--instance", MISSING],
        ["heal", "--instance", "not-a-server"],
        ["audit", "--provider", MISSING],
        ["audit", "--provider", "no-such-host"],
        ["explain", "candidates", "--resource", "VCPU:1,VCPU:2"],
    ],
)
def test_127_for_input_that_names_nothing(two, args):
    result = tally(two, *args)
    assert result.exit_code == exits.BAD_INPUT == 127, result.output
    assert "Traceback" not in result.output


def test_a_provider_that_exists_is_audited(two):
    assert tally(two, "audit", "--provider", two.rp["cmp-1"]).exit_code == 0
    assert tally(two, "audit", "--provider", "cmp-1").exit_code == 0
    assert tally(two, "heal", "--instance", two.web["id"]).exit_code == 4
    assert tally(two, "audit", "--provider", str(uuidlib.uuid4()).upper()).exit_code == 127


REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"


def reference_rows() -> list[tuple[int, list[str]]]:
    """docs/reference.md's exit table: each status with its example's commands."""
    text = REFERENCE.read_text()
    section = text[text.index("\n## Exit status\n") :]
    found = []
    for code, example in re.findall(r"^\| (\d+) \| .* \| (.*) \|$", section, re.M):
        commands = re.findall(r"`([^`]*)`", example)
        found.append((int(code), commands[0].split("; ") if commands else []))
    return found


@pytest.mark.parametrize(("status", "commands"), reference_rows(), ids=lambda v: str(v))
def test_each_row_of_the_reference_exit_table_runs_as_written(lab, status, commands):
    """Issue 40, item 6: the table is checked against the CLI, row by row, on a lab
    made by `tally lab up`: each example's commands in order, the last one exiting
    with the row's status (255, a bug, and 141, a pipeline's reader gone, have none:
    tests/unit/test_exit_codes.py closes the pipe)."""
    if status in (exits.UNEXPECTED, exits.CLOSED_PIPE):
        assert commands == []
        return
    assert commands and all(command.startswith("tally ") for command in commands)
    assert tally(lab, "lab", "up").exit_code == 0
    for command in commands:
        result = tally(lab, *shlex.split(command)[1:])
    assert result.exit_code == status, (commands, result.output)
    assert "Traceback" not in result.output
