"""The README's tour, run as written against a live `tally serve`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live import tally_serve

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[str]:
    with tally_serve(tmp_path) as url:
        yield url


def tour_script() -> str:
    readme = (ROOT / "README.md").read_text()
    tour = readme.split("## A five-minute tour", 1)[1]
    return re.search(r"```sh\n(.*?)```", tour, re.S).group(1)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README tour uses curl")
def test_readme_tour_refuses_the_shrink_naming_the_consumer(live_server):
    script = tour_script().replace("P=http://127.0.0.1:8778", f"P={live_server}")
    # print each command's answer on its own line so we can check them in order
    script = script.replace("curl -s ", "curl -s -w '\\n' ")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    refusal, accepted = answers[-2], answers[-1]
    error = refusal["errors"][0]
    assert error["status"] == 409
    assert error["code"] == "placement.inventory.inuse"
    assert "20 used, new capacity 16" in error["detail"]
    assert "2d9d4c1e-5a6b-4c7d-8e9f-0a1b2c3d4e5f" in error["detail"]
    assert accepted["inventories"]["VCPU"]["reserved"] == 8
