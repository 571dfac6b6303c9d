"""Every command that writes only with --apply says, without it, that it wrote
nothing, and ends with a status its --apply never gives (issue 40, item 9: `heal`
and `audit --delete` printed the same summary and status with and without --apply,
and nova-manage's commands write unless told --dry-run). The rule, in
tally.cli.exits: a dry run ends as its --apply would, but where the --apply would
say it wrote (0 healed, 4 everything fixed, 0 drained, 0 a plan committed), the dry
run says 5.

    cmp-1  web        cmp-2  db        cmp-3  (empty)
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from tally.cli import exits
from tally.cli.main import cli
from tally.cli.scripting import DRY_RUN
from tests.lab.conftest import tally_on

ORPHAN = "delete-while-down"
PLAN = "plan.json"


tally = tally_on


def unallocate(lab, server: dict) -> None:
    lab.placement.delete(f"/allocations/{server['id']}")


def orphan(lab, server: dict) -> None:
    lab.compute.post("/os-lab/faults", {"fault": {"kind": ORPHAN, "server": server["id"]}})


def write_plan(lab, server: dict) -> None:
    """A plan with a change to make (in the test's own directory)."""
    change = {"kind": "inventory", "provider": "cmp-3", "resource_class": "MEMORY_MB"}
    Path(PLAN).write_text(json.dumps([{**change, "allocation_ratio": 1.5}]))


# command, how to give it something to write, and what its --apply then exits with
PENDING_WRITES = {
    "heal": (unallocate, exits.DONE),
    "audit --delete": (orphan, exits.ALL_FIXED),
    "drain cmp-1": (lambda lab, server: None, exits.DONE),
    f"plan {PLAN}": (write_plan, exits.DONE),
}


def commands_with_apply(group: click.Group, prefix: str = "") -> set[str]:
    found = set()
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found |= commands_with_apply(command, f"{prefix}{name} ")
        elif any("--apply" in p.opts for p in command.params):
            found.add(f"{prefix}{name}")
    return found


def test_every_command_with_apply_is_checked_here():
    assert commands_with_apply(cli) == {c.split()[0] for c in PENDING_WRITES}


@pytest.mark.parametrize("command", PENDING_WRITES)
def test_a_dry_run_with_writes_to_make_says_so_and_exits_5(two, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_work, applied = PENDING_WRITES[command]
    make_work(two, two.web)
    dry = tally(two, *command.split())
    assert dry.exit_code == exits.PENDING == 5, dry.output
    assert dry.stderr.splitlines()[-1] == DRY_RUN
    again = tally(two, *command.split())  # it wrote nothing: the same again
    assert (again.exit_code, again.stdout) == (dry.exit_code, dry.stdout)
    done = tally(two, *command.split(), "--apply", *(["--timeout", "0"] * ("drain" in command)))
    assert DRY_RUN not in done.output
    if "drain" in command:  # its migration completes in steps: the lab's clock
        assert done.exit_code == exits.FAILED and two.service("cmp-1")["status"] == "disabled"
    else:
        assert done.exit_code == applied, done.output


@pytest.mark.parametrize(
    ("command", "status"),
    [("heal", exits.NOTHING_TO_HEAL), ("audit --delete", exits.DONE)],
)
def test_a_dry_run_with_nothing_to_write_ends_as_the_apply_would(two, command, status):
    dry = tally(two, *command.split())
    assert dry.exit_code == status, dry.output
    assert dry.stderr.splitlines()[-1] == DRY_RUN
    assert tally(two, *command.split(), "--apply").exit_code == status


def test_a_dry_run_that_the_apply_could_not_finish_says_what_the_apply_would(two):
    """An orphan (freed by --delete) and a stuck move (not): 3 with or without --apply."""
    orphan(two, two.web)
    two.compute.post(
        "/os-lab/faults", {"fault": {"kind": "migration-hang", "server": two.db["id"]}}
    )
    dry = tally(two, "audit", "--delete", "--stuck-after", "0s")
    assert dry.exit_code == exits.FOUND, dry.output
    assert dry.stderr.splitlines()[-1] == DRY_RUN
    assert tally(two, "audit", "--delete", "--stuck-after", "0s", "--apply").exit_code == 3


def test_heal_says_what_it_did_not_what_it_would(two):
    unallocate(two, two.web)
    assert "1 to heal" in tally(two, "heal").stderr
    done = tally(two, "heal", "--apply").stderr
    assert "1 healed" in done and "to heal" not in done


def test_heal_stops_at_max_count_in_a_dry_run_too(two):
    unallocate(two, two.web)
    unallocate(two, two.db)
    assert tally(two, "heal", "--max-count", "1").exit_code == exits.MORE_LEFT
