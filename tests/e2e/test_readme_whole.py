"""The README from top to bottom, in one shell, as a new user runs it: every `sh`
block in order (the migration's, which needs the operator's own databases, is
test_readme_move.py's), against one `tally serve` started as `bin/serve` starts it.
Each command exits as the README says (0 unless it says otherwise), and each
section's stated result is there: the 409 naming the consumer, the refusal before
writing, the books true at the end of the whole story (`tally audit` exits 0)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import VENV_TIMEOUT, install_osc, tally_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(VENV_TIMEOUT)]

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_SECTIONS = ("Move an existing cloud",)
MARK = "::status::"
# what the README says a command exits with, per occurrence (all others: 0)
EXPECTED = {
    "tally provider inventory set $RP --resource VCPU=32:16": [1],
    "tally provider inventory set $RP --amend --resource VCPU=16:15 "
    "--resource VCPU:allocation_ratio=1": [1, 0],
    "tally explain $RP --resource VCPU=16:15 --resource VCPU:allocation_ratio=1": [1],
    "tally audit --provider $RP --delete --apply": [4],
    "tally lab break delete-while-down": [0],
    "tally audit -c consumer -c kind -c history": [3],
    "tally lab boot web-3 -c status -f value": [1],
    "tally drain lab-compute-1 --what-if": [1],
    "tally plan plan.json": [5],
    "tally drain lab-compute-1 --apply": [1, 0],
}
NO_ROOM = r"no other enabled host has room for server (\S+ \([0-9a-f-]{36}\))"


def readme_blocks(only: tuple[str, ...] = ()) -> list[str]:
    """The `sh` blocks of the README, in order, but those of skipped sections; with
    `only`, those of the sections whose titles start so."""
    found = []
    for section in re.split(r"^## ", (ROOT / "README.md").read_text(), flags=re.M):
        if section.startswith(SKIPPED_SECTIONS) or (only and not section.startswith(only)):
            continue
        found += re.findall(r"```sh\n(.*?)```", section, re.S)
    return found


def commands(block: str) -> list[str]:
    """The block's commands, as the shell reads them: a line continues after `\\`,
    a `|` or `&&`, or inside quotes or `$( )`; comment lines dropped."""
    found, current = [], ""
    quote, depth = "", 0
    for line in block.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line + "\n"
        i = 0
        while i < len(line):
            c = line[i]
            if quote == "'":
                quote = "" if c == "'" else quote
            elif c == "\\":
                i += 1
            elif quote == '"':
                quote = "" if c == '"' else quote
            elif c in "'\"":
                quote = c
            elif line.startswith("$(", i):
                depth += 1
                i += 1
            elif c == ")" and depth:
                depth -= 1
            elif c == "#" and (i == 0 or line[i - 1] in " \t"):
                break  # a comment to the end of the line
            i += 1
        code = line.split(" #", 1)[0].rstrip()
        if not quote and not depth and not code.endswith(("\\", "|", "&&")):
            found.append(current.strip())
            current = ""
    assert not current, f"unterminated command: {current}"
    return found


def test_the_readme_runs_top_to_bottom(tmp_path: Path) -> None:
    osc = install_osc()
    (tmp_path / "data").mkdir()
    # the lab's clocks as `bin/serve` runs them (the fixture stops them by default)
    with tally_serve(tmp_path / "data", lab_step_seconds="2", lab_tracker_seconds="60") as url:
        done, run = _run_readme(url, osc, tmp_path)
    _check(done, run)


def marked(run: list[str], url: str) -> str:
    """A script of the commands `run`, each followed by a line with its exit status
    (`statuses` reads them), the README's address replaced by `url`."""
    # on a line of its own, also after an answer without a newline (curl's)
    script = "".join(f"{command}\nprintf '\\n{MARK}%s\\n' \"$?\"\n" for command in run)
    return script.replace("http://127.0.0.1:8778", url)


def statuses(stdout: str) -> list[int]:
    return [int(s) for s in re.findall(rf"^{MARK}(\d+)$", stdout, re.M)]


def expected_statuses(run: list[str]) -> list[int]:
    """What the README says each command of `run` exits with (EXPECTED; else 0)."""
    seen: dict[str, int] = {}
    found = []
    for command in run:
        flat = " ".join(command.replace("\\\n", " ").split())
        occurrence = seen[flat] = seen.get(flat, -1) + 1
        wanted = EXPECTED.get(flat, [])
        found.append(wanted[occurrence] if occurrence < len(wanted) else 0)
    return found


def _run_readme(url: str, osc: Path, work: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    run = [c for block in readme_blocks() for c in commands(block)]
    script = marked(run, url)
    script = script.replace(".venv/bin/pip install -q python-openstackclient osc-placement", ":")
    path = f"{Path(sys.executable).parent}:{osc / 'bin'}:{os.environ['PATH']}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "TALLY_"))}
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env={**env, "PATH": path},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, run


def _check(done: subprocess.CompletedProcess, run: list[str]) -> None:
    found = statuses(done.stdout)
    assert len(found) == len(run), done.stdout[-3000:] + done.stderr[-3000:]
    seen: dict[str, int] = {}
    said: dict[tuple[str, int], str] = {}  # (command, occurrence) -> what it printed
    printed = re.split(rf"^{MARK}\d+$", done.stdout, flags=re.M)[: len(run)]
    wanted = expected_statuses(run)
    for command, status, expected, out in zip(run, found, wanted, printed, strict=True):
        flat = " ".join(command.replace("\\\n", " ").split())
        occurrence = seen[flat] = seen.get(flat, -1) + 1
        said[(flat, occurrence)] = out
        assert status == expected, (
            f"$ {command}\nexit {status}, not {expected}\n{done.stderr[-3000:]}"
        )
    out = done.stdout
    assert '"code": "placement.inventory.inuse"' in out or "placement.inventory.inuse" in out
    assert "Refused before writing" in out
    assert "OK" in out.splitlines()
    assert "Tally Placement API" in out.splitlines()
    _check_what_if(said)


def _check_what_if(said: dict[tuple[str, int], str]) -> None:
    """The drain predicted with one server failing; the real drain refusing, before
    writing, for that server and that reason; room made; then both agreeing."""
    drain = "tally drain lab-compute-1"
    predicted = said[(f"{drain} --what-if", 0)]
    assert re.search(r"^would not drain lab-compute-1: 1 of 2 servers would fail", predicted, re.M)
    (failing,) = re.findall(NO_ROOM, predicted)
    refused = said[(f"{drain} --apply", 0)]
    assert re.findall(rf"^cannot drain lab-compute-1: {NO_ROOM}", refused, re.M) == [failing]
    assert "\nnot drained: nothing changed on lab-compute-1\n" in refused
    again = said[(f"{drain} --what-if -c name -c outcome -c to", 0)]
    assert "\nwould drain lab-compute-1\n" in again
    targets = dict(re.findall(r"^\| (\S+) +\| moves +\| (\S+) +\|$", again, re.M))
    assert len(targets) == 2 and failing.split()[0] in targets
    assert "\ndrained\n" in said[(f"{drain} --apply", 1)]
    listed = said[("openstack server list --long -c Name -c Host", 0)]
    hosts = dict(re.findall(r"^\| (\S+) +\| (\S+) +\|$", listed, re.M))
    assert {name: hosts[name] for name in targets} == targets
