"""The README's whole story (break, refuse, explain, audit, fix), run as written
against a live `tally serve` with the lab."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_readme_tour import live_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def story_script() -> str:
    readme = (ROOT / "README.md").read_text()
    story = readme.split("## The whole story", 1)[1]
    return re.search(r"```sh\n(.*?)```", story, re.S).group(1)


def test_readme_story_refuses_then_audits_then_succeeds(live_server):  # noqa: F811
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", TALLY_URL=live_server)
    up = subprocess.run(["tally", "lab", "up"], env=env, capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    script = story_script().replace("export TALLY_URL=http://127.0.0.1:8778", "")
    lines = [line for line in script.splitlines() if line.strip() and not line.startswith("#")]
    # one shell, so RP carries over; a marker with the exit status after each command
    commands, current = [], ""
    for line in lines:
        current += line + "\n"
        if not line.rstrip().endswith(("|", "\\")):
            commands.append(current)
            current = ""
    marked = "".join(f'{command}echo "::status::$?"\n' for command in commands)
    done = subprocess.run(
        ["bash", "-c", marked], env=env, capture_output=True, text=True, timeout=300
    )
    chunks = re.split(r"::status::(\d+)\n", done.stdout)
    outputs = [
        (cmd, int(code), text)
        for cmd, text, code in zip(commands, chunks[::2], chunks[1::2], strict=False)
    ]
    statuses = [code for _, code, _ in outputs]
    if len(statuses) != 7:
        pytest.fail(f"the README story changed shape: {commands} {done.stderr[-2000:]}")
    assert statuses == [0, 0, 1, 1, 4, 0, 0], (outputs, done.stderr[-2000:])
    refused, explained, applied, fixed, audited = (text for _, _, text in outputs[2:])
    assert "Refused before writing" in refused
    assert "orphan" in explained and "live" in explained
    steps = re.findall(r"^ {7}(tally .*)$", explained, re.M)
    assert steps[0] == commands[4].strip().replace("$RP", steps[0].split()[3])
    assert "freed" in applied and "orphan" in applied
    assert "VCPU" in fixed
    assert "orphan" not in audited and "misplaced" not in audited  # nothing found
