"""The README's tour, run as written against a live `tally serve`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.live import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def live_server(tmp_path):
    port = free_port()
    env = dict(
        os.environ,
        TALLY_DATA_DIR=str(tmp_path),
        TALLY_PORT=str(port),
        TALLY_DATABASE_URL="",
    )
    tally = [sys.executable, "-c", "from tally.cli.main import cli; cli()", "serve"]
    proc = subprocess.Popen(tally, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"tally serve did not start: {proc.stderr.read().decode()[-2000:]}")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


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
