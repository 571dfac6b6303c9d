"""The lab in-process: the whole `tally serve` composition (Placement, lab compute,
lab identity) over a fresh database, reached through httpx's WSGI transport.

Placement's traces are always read through its public API (the project's
PlacementClient), never its tables."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from tally.cli.context import Context
from tally.cli.main import cli
from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.serve.compose import create_server

BASE = "http://lab.test"


class InProcessLab:
    """A composed server and clients to it: `compute` (admin, noauth token), `placement`."""

    def __init__(self, server: Any, settings: Settings) -> None:
        self.server = server
        self.settings = settings
        self.transport = httpx.WSGITransport(app=server)
        self.http = httpx.Client(transport=self.transport, base_url=BASE)
        self.compute = self.compute_as("admin")
        self.placement = PlacementClient(f"{BASE}/placement", transport=self.transport)

    def compute_as(self, token: str, version: str | None = None) -> ComputeClient:
        """A client at `version` (default: the lab's `lab_compute_max_version`)."""
        return ComputeClient(
            f"{BASE}/compute/v2.1",
            token=token,
            version=version or self.settings.lab_compute_max_version,
            transport=self.transport,
        )

    # ------------------------------------------------------------ building a lab

    def hosts(self, *names: str, **config: Any) -> list[dict[str, Any]]:
        body = {"hosts": [{"name": n, **config} for n in names]}
        return self.compute.post("/os-lab/hosts", body)["hosts"]

    def flavor(
        self, name: str = "m1.small", vcpus: int = 1, ram: int = 2048, disk: int = 20, **extra: Any
    ) -> dict[str, Any]:
        spec = {"name": name, "vcpus": vcpus, "ram": ram, "disk": disk, **extra}
        return self.compute.post("/flavors", {"flavor": spec})["flavor"]

    def boot(self, name: str = "vm", flavor: str = "m1.small", **spec: Any) -> dict[str, Any]:
        body = {"server": {"name": name, "flavorRef": flavor, **spec}}
        created = self.compute.post("/servers", body)["server"]
        return self.server_doc(created["id"])

    def server_doc(self, server: str) -> dict[str, Any]:
        return self.compute.get(f"/servers/{server}")["server"]

    def host(self, name: str) -> dict[str, Any]:
        return next(h for h in self.compute.get("/os-lab/hosts")["hosts"] if h["name"] == name)

    def service(self, name: str) -> dict[str, Any]:
        return self.compute.get("/os-services", {"host": name})["services"][0]

    def action(self, server: str, body: dict[str, Any]) -> None:
        self.compute.post(f"/servers/{server}/action", body)

    def migrations(self, **params: str) -> list[dict[str, Any]]:
        return self.compute.get("/os-migrations", params)["migrations"]

    def step(self, count: int = 1) -> list[dict[str, Any]]:
        return self.compute.post("/os-lab/step", {"count": count})["migrations"]

    # ------------------------------------------------------------ Placement's view

    def held(self, consumer: str) -> dict[str, dict[str, int]]:
        """provider -> resources the consumer holds, read from Placement."""
        found = self.placement.consumer_allocations(consumer)["allocations"]
        return {rp: a["resources"] for rp, a in found.items()}

    def consumer_type(self, consumer: str) -> str | None:
        return self.placement.consumer_allocations(consumer).get("consumer_type")

    def provider_consumers(self, provider: str) -> set[str]:
        return set(self.placement.provider_allocations(provider))


@pytest.fixture
def lab_engine(sqlite_engine: sa.Engine) -> sa.Engine:
    """The lab's database: SQLite here; test_faults.py runs on every backend."""
    return sqlite_engine


@pytest.fixture
def make_lab(lab_engine: sa.Engine) -> Iterator[Callable[..., InProcessLab]]:
    """`make_lab(**settings)`: the composed server over a fresh database, with the lab
    on and its clock stopped (migrations advance only on explicit steps)."""
    made: list[InProcessLab] = []

    def make(**settings: Any) -> InProcessLab:
        values = {"lab": "on", "lab_step_seconds": 0, "lab_tracker_seconds": 0, **settings}
        config = Settings.of(**values)
        lab = InProcessLab(create_server(config, lab_engine), config)
        made.append(lab)
        return lab

    yield make
    for lab in made:
        lab.http.close()


@pytest.fixture
def lab(make_lab: Callable[..., InProcessLab]) -> InProcessLab:
    return make_lab()


@pytest.fixture
def cloud(lab: InProcessLab) -> InProcessLab:
    """Three hosts (16 VCPU, 64 GiB, 1000 GB; 512 MB reserved), m1.small, no servers."""
    lab.hosts("cmp-1", "cmp-2", "cmp-3")
    lab.flavor()
    return lab


@pytest.fixture
def two(cloud: InProcessLab) -> InProcessLab:
    """`cloud` with a server on cmp-1 (`web`) and one on cmp-2 (`db`); cmp-3 empty."""
    cloud.web = cloud.boot("web", availability_zone="nova:cmp-1")
    cloud.db = cloud.boot("db", availability_zone="nova:cmp-2")
    return cloud


def tally_on(lab: InProcessLab, *args: str) -> Result:
    """Run `tally ARGS` in-process against the lab's Placement and compute API."""
    context = Context.for_client(lab.placement)
    context.compute = lab.compute
    return CliRunner().invoke(cli, list(args), obj=context)


def new_uuid() -> str:
    return str(uuid.uuid4())


def tally_lab(lab: InProcessLab, *args: str, code: int = 0) -> str:
    """Run `tally lab ARGS` in-process against the lab; its output (exit status `code`)."""
    context = Context()
    context.compute = lab.compute
    result = CliRunner().invoke(cli, ["lab", *args], obj=context)
    assert result.exit_code == code, result.output
    return result.output
