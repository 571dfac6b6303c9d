"""The README's claim history section, run as written against a live `tally serve`
with the lab: a host's history, an orphan that names the compute request that wrote
it, a consumer's story as JSON, and the API underneath."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_readme_tour import live_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def history_script() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Claim history", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def test_readme_history_names_who_wrote_the_orphan(live_server):  # noqa: F811
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", TALLY_URL=live_server)
    script = history_script().replace("export TALLY_URL=http://127.0.0.1:8778", "")
    commands = [line for line in script.splitlines() if line.strip() and not line.startswith("#")]
    marked = "".join(f'{command}\necho "::status::$?"\n' for command in commands)
    done = subprocess.run(
        ["bash", "-c", marked], env=env, capture_output=True, text=True, timeout=300
    )
    chunks = re.split(r"::status::(\d+)\n", done.stdout)
    outputs = [
        (cmd, int(code), text)
        for cmd, text, code in zip(commands, chunks[::2], chunks[1::2], strict=False)
    ]
    if len(outputs) != 7:
        pytest.fail(f"the README history section changed shape: {commands} {done.stderr[-2000:]}")
    assert [code for _, code, _ in outputs] == [0, 0, 0, 3, 0, 0, 0], (outputs, done.stderr)
    _, host, _, audit, _, story, api = (text for _, _, text in outputs)
    assert "inventory" in host and "allocation" in host
    assert "orphan" in audit and "global_request_id=req-" in audit
    story = json.loads(story)
    assert story and {row["action"] for row in story} == {"allocation"}
    assert all(row["global_request_id"].startswith("req-") for row in story)
    assert len(json.loads(api)["history"]) == 2
