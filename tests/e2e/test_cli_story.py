"""The seed's story, told with the `tally` CLI (a subprocess each command) against a live
`tally serve`, and the same story against upstream OpenStack Placement 16.0.0.

Upstream is installed from PyPI into a throw-away venv under /tmp (kept between runs,
TALLY_UPSTREAM_VENV to move it) and served by gunicorn with noauth2 and a SQLite file;
when it cannot be installed the upstream run is skipped with pip's reason.

The difference the story shows: upstream accepts `--force`d shrinks below usage, so
there the CLI's pre-check is the only thing between the operator and an over-committed
host; Tally's server refuses them too, and the CLI explains its 409.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live import VENV_TIMEOUT, free_port, server_process, tally_serve, throwaway_venv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(VENV_TIMEOUT)]

RP = "6f0c3b4e-8d3a-4a55-9c2e-0e1f5a7a4d10"
SERVER = "2d9d4c1e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
UPSTREAM = "openstack-placement==16.0.0"
UPSTREAM_VENV = Path(
    os.environ.get("TALLY_UPSTREAM_VENV", Path(tempfile.gettempdir()) / "tally-upstream-16.0.0")
)
UPSTREAM_CONF = """\
[DEFAULT]
debug = False
[api]
auth_strategy = noauth2
[placement_database]
connection = sqlite:///{dir}/placement.sqlite
sync_on_startup = True
[oslo_policy]
enforce_new_defaults = False
"""


def install_upstream() -> Path:
    """The cached venv with upstream Placement and gunicorn."""
    return throwaway_venv(UPSTREAM_VENV, [UPSTREAM, "gunicorn"], f"upstream {UPSTREAM}")


@pytest.fixture
def tally_server(tmp_path: Path) -> Iterator[str]:
    with tally_serve(tmp_path) as url:
        yield url


@pytest.fixture
def upstream_server(tmp_path: Path) -> Iterator[str]:
    venv = install_upstream()
    (tmp_path / "placement.conf").write_text(UPSTREAM_CONF.format(dir=tmp_path))
    port = free_port()
    env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=str(tmp_path))
    command = [
        str(venv / "bin" / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "1",
        "--chdir", str(tmp_path), "placement.wsgi.api:application",
    ]  # fmt: skip
    with server_process(command, env, tmp_path / "upstream.log", port) as (url, _proc):
        yield url


@pytest.fixture(params=["tally", "upstream"])
def placement(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(flavour, url) of a live Placement endpoint."""
    return request.param, request.getfixturevalue(f"{request.param}_server")


class Tally:
    """The `tally` command as an operator runs it, pointed at one endpoint."""

    def __init__(self, url: str) -> None:
        script = Path(sys.executable).with_name("tally")
        self.command = (
            [str(script)]
            if script.exists()
            else [sys.executable, "-c", "from tally.cli.main import cli; cli()"]
        )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        self.env["TALLY_URL"] = url

    def __call__(self, line: str, code: int | None = 0) -> subprocess.CompletedProcess:
        """Run `tally LINE`; check the exit status unless `code` is None."""
        done = subprocess.run(
            self.command + line.split(), env=self.env, capture_output=True, text=True, timeout=60
        )
        if code is not None:
            assert done.returncode == code, f"tally {line}\n{done.stdout}\n{done.stderr}"
        return done

    def json(self, line: str):  # noqa: ANN201
        return json.loads(self(f"{line} -f json").stdout)


def test_the_seed_story_through_the_cli(placement):
    flavour, url = placement
    tally = Tally(url)

    tally(f"provider create compute-1 --uuid {RP}")
    tally(f"provider inventory set {RP} --resource VCPU=32")
    tally(
        f"provider allocation set {SERVER} --allocation rp={RP},VCPU=20 "
        "--project-id demo --user-id alice --consumer-type INSTANCE"
    )

    # reserve 16: capacity 16 < 20 used -> refused before writing, naming the consumer
    refused = tally(f"provider inventory set {RP} --resource VCPU=32:16", code=1).stdout
    assert "Refused before writing" in refused
    assert SERVER in refused and "INSTANCE" in refused and "demo" in refused
    assert "reserve at most 12 VCPU" in refused
    assert "--resource VCPU=32:12" in refused
    assert f"tally provider allocation unset {SERVER} --provider {RP}" in refused
    assert tally.json(f"provider inventory show {RP} VCPU")["reserved"] == 0

    forced = tally(f"provider inventory set {RP} --resource VCPU=32:16 --force", code=None)
    if flavour == "tally":  # the server's guard refuses too; the CLI explains its 409
        assert forced.returncode == 1
        assert "The server refused" in forced.stdout and SERVER in forced.stdout
    else:  # upstream writes it: the host is now over-committed
        assert forced.returncode == 0
        assert tally.json(f"provider inventory show {RP} VCPU")["capacity"] == 16

    # reserve 8: capacity 24 >= 20 used
    tally(f"provider inventory set {RP} --resource VCPU=32:8")
    assert tally.json(f"provider usage show {RP}") == [
        {"resource_class": "VCPU", "usage": 20, "capacity": 24}
    ]
    assert tally.json("usage show --project demo") == [
        {"consumer_type": "INSTANCE", "consumer_count": 1, "resource_class": "VCPU", "usage": 20}
    ]
    shown = tally.json(f"provider show {RP} --allocations")
    assert shown["allocations"] == {SERVER: {"VCPU": 20}}

    # removing the class is refused by both servers; the CLI explains either answer
    gone = tally(f"provider inventory delete {RP} --resource-class VCPU --force", code=1).stdout
    assert "The server refused" in gone and "0 (class removed)" in gone and SERVER in gone

    # the consumer is confirmed gone: free its part, with its consumer generation
    assert tally.json(f"provider allocation unset {SERVER} --provider {RP}") == []
    tally(f"provider inventory set {RP} --resource VCPU=16")
    (vcpu,) = tally.json(f"provider inventory list {RP}")
    assert (vcpu["total"], vcpu["reserved"], vcpu["used"]) == (16, 0, 0)


def readme_cli_story() -> str:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## The same story with the `tally` CLI", 1)[1].split("\n## ", 1)[0]
    return "\n".join(re.findall(r"```sh\n(.*?)```", section, re.S))


def test_the_readme_cli_story_runs_as_written(tally_server, tmp_path):
    script = readme_cli_story().replace("http://127.0.0.1:8778", tally_server)
    assert "tally provider inventory set $RP --resource VCPU=32:16" in script
    command = tmp_path / "bin" / "tally"  # `tally` on the PATH, whatever the install
    command.parent.mkdir()
    command.write_text(
        f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c "
        "'from tally.cli.main import cli; cli()' \"$@\"\n"
    )
    command.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "TALLY_"))}
    env["PATH"] = f"{command.parent}:{env['PATH']}"
    report = "trap 'echo \"FAILED($?): $BASH_COMMAND\"' ERR\n"
    done = subprocess.run(
        ["bash", "-c", report + script], env=env, capture_output=True, text=True, timeout=300
    )
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED(")]
    assert failed == ["FAILED(1): tally provider inventory set $RP --resource VCPU=32:16"], (
        done.stdout + done.stderr
    )
    assert "Refused before writing" in done.stdout
    assert "--amend --resource VCPU=32:12" in done.stdout
    # the host shrank to 16 once freed (no FAILED line), then left: nothing holds it
    assert "tally provider delete $RP" in script
    assert Tally(tally_server).json("provider list") == []
