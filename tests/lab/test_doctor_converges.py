"""The audit's own fix column puts the books right, for any mix of the lab's faults:
break them on a fresh lab, then round after round run every command `tally audit -c
fix -f value` prints (in a shell, as printed, in its order), at most four rounds; then
`tally audit` exits 0 and Placement holds exactly each ACTIVE server's flavor on its
host's provider, nothing else. Each fix must succeed in the state the audit saw: a
row the doctor cannot fix yet names the step that comes first (free the leaked
provider, bring the compute service back) instead of a command that fails."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.test_doctor_plans import FAULTS, Operator, assert_books_true, lab_up
from tests.live import VENV_TIMEOUT, install_osc, tally_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(VENV_TIMEOUT)]

ROUNDS = 4
# audit: 4 all it found is fixed, 3 some is left (for another row's fix); heal: 4 nothing to do
EXITS = {"tally audit": (0, 3, 4), "tally heal": (0, 4)}
MIXES = [tuple(FAULTS)] + list(itertools.combinations(FAULTS, 2))
# a move is stuck once it has not moved for this long (the lab steps every second)
AUDIT = "tally audit --stuck-after 3s -c fix -f value"


@pytest.fixture
def operator(tmp_path: Path) -> Iterator[Operator]:
    osc = install_osc()
    with tally_serve(tmp_path, lab_step_seconds="1") as url:
        yield lab_up(Operator(url, tmp_path, osc), tmp_path)


def run_fixes(op: Operator) -> list[list[str]]:
    """Run the audit's fix column until it prints none; the commands of each round."""
    rounds: list[list[str]] = []
    for _ in range(ROUNDS + 1):
        op.sh("sleep 4")  # moves the lab settles on its own get their steps
        listed = op.sh(AUDIT)
        assert listed.returncode in (0, 3), listed.stderr
        commands = list(dict.fromkeys(line for line in listed.stdout.splitlines() if line))
        if not commands:
            return rounds
        assert len(rounds) < ROUNDS, f"still fixing after {ROUNDS} rounds: {rounds}"
        for command in commands:
            codes = next((c for prefix, c in EXITS.items() if command.startswith(prefix)), (0,))
            op.ok(command, codes)  # each fix works in the state the audit saw
        rounds.append(commands)
    return rounds


@pytest.mark.parametrize("faults", MIXES, ids="+".join)
def test_the_audits_fixes_converge(operator: Operator, faults: tuple[str, ...]) -> None:
    op = operator
    for fault in faults:
        op.ok(f"tally lab break {fault}")
    rounds = run_fixes(op)
    assert rounds, "the faults left nothing for the audit to fix"
    assert_books_true(op)
