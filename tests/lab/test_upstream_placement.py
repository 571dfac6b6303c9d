"""The lab compute against upstream OpenStack Placement 16.0.0 (`lab_placement_url`):
it speaks only Placement's public API, so scheduling, moves and faults leave the same
traces there. Upstream runs from the throw-away venv the e2e story test installs
(skipped with pip's reason when it cannot be installed)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path

import httpx
import pytest

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.serve.compose import create_server
from tests.live import VENV_TIMEOUT, server_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(VENV_TIMEOUT)]

STORY = Path(__file__).resolve().parents[1] / "e2e" / "test_cli_story.py"
SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}


def story():  # noqa: ANN201 - the e2e module: its upstream installer and server helpers
    spec = importlib.util.spec_from_file_location("tally_e2e_story", STORY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def upstream_placement(tmp_path: Path):
    e2e = story()
    venv = e2e.install_upstream()
    (tmp_path / "placement.conf").write_text(e2e.UPSTREAM_CONF.format(dir=tmp_path))
    port = e2e.free_port()
    env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=str(tmp_path))
    command = [
        str(venv / "bin" / "gunicorn"),
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "1",
        "--chdir",
        str(tmp_path),
        "placement.wsgi.api:application",
    ]
    with server_process(command, env, tmp_path / "upstream.log", port) as (url, _proc):
        yield url


def test_the_lab_claims_through_upstream_placement(tmp_path, sqlite_engine):
    with upstream_placement(tmp_path) as url:
        settings = Settings.of(
            lab="on", lab_placement_url=url, lab_step_seconds=0, lab_tracker_seconds=0
        )
        transport = httpx.WSGITransport(app=create_server(settings, sqlite_engine))
        compute = ComputeClient("http://lab.test/compute/v2.1", transport=transport)
        upstream = PlacementClient(url)  # noauth admin
        hosts = compute.post("/os-lab/hosts", {"hosts": [{"name": "cmp-1"}, {"name": "cmp-2"}]})
        rp = {h["name"]: h["provider_uuid"] for h in hosts["hosts"]}
        assert upstream.inventories(rp["cmp-1"])["inventories"]["MEMORY_MB"]["reserved"] == 512
        compute.post(
            "/flavors", {"flavor": {"name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20}}
        )
        server = compute.post(
            "/servers",
            {"server": {"name": "vm", "flavorRef": "m1.small", "availability_zone": "nova:cmp-1"}},
        )["server"]
        held = upstream.consumer_allocations(server["id"])
        assert held["consumer_type"] == "INSTANCE"
        assert {k: v["resources"] for k, v in held["allocations"].items()} == {rp["cmp-1"]: SMALL}

        body = {"os-migrateLive": {"host": None, "block_migration": "auto"}}
        compute.post(f"/servers/{server['id']}/action", body)
        migration = compute.get("/os-migrations")["migrations"][0]
        moved = upstream.consumer_allocations(migration["uuid"])
        assert moved["consumer_type"] == "MIGRATION" and list(moved["allocations"]) == [rp["cmp-1"]]
        assert list(upstream.consumer_allocations(server["id"])["allocations"]) == [rp["cmp-2"]]
        compute.post("/os-lab/step", {"count": 2})
        assert upstream.consumer_allocations(migration["uuid"])["allocations"] == {}

        report = compute.post(
            "/os-lab/faults", {"fault": {"kind": "service-delete", "host": "cmp-2"}}
        )["fault"]
        assert [c["consumer"] for c in report["held"]] == [server["id"]]
        assert upstream.provider(rp["cmp-2"])["name"] == "cmp-2"  # left behind, as in Nova
        assert set(upstream.provider_allocations(rp["cmp-2"])) == {server["id"]}
