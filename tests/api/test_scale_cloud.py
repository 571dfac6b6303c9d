"""bench/scale_cloud.py's cloud (devices as child providers, sharing storage, most
hosts 60-90% full), small: the in-memory index and the database answer every shape
of the benchmark with the same candidates, and a six-group isolated device request
with a limit stays within the answer budget."""

from __future__ import annotations

import sys
from pathlib import Path

import falcon.testing
import httpx
import pytest

from tally.config import Settings
from tally.placement.app import create_app

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import scale_cloud  # noqa: E402
from candidates import populate  # noqa: E402

HOSTS = 60  # enough for hosts holding all six device classes


@pytest.fixture
def cloud(sqlite_engine):
    built = scale_cloud.generate(HOSTS, seed=7)
    maker = create_app(Settings.of(candidates_index_max_mb=0), sqlite_engine)
    with httpx.Client(transport=httpx.WSGITransport(app=maker), base_url="http://x") as api:
        for name in scale_cloud.PCI_CLASSES:
            api.put(f"/resource_classes/{name}", headers=scale_cloud.ADMIN).raise_for_status()
    populate(sqlite_engine, built, "project", "user")
    return built


def answers(engine, index_mb: int, query: str) -> list:
    app = create_app(Settings.of(candidates_index_max_mb=index_mb), engine)
    client = falcon.testing.TestClient(app, headers=scale_cloud.ADMIN)
    found = client.simulate_get("/allocation_candidates", query_string=query)
    assert found.status_code == 200, found.text
    return sorted(
        repr(sorted((rp, sorted(a["resources"].items())) for rp, a in r["allocations"].items()))
        for r in found.json["allocation_requests"]
    )


def test_the_index_and_the_database_answer_alike(cloud, sqlite_engine):
    shapes = dict(scale_cloud.SHAPES)
    shapes["shared_disk"] += ",".join(cloud.aggregates)
    for name, query in shapes.items():
        from_index = answers(sqlite_engine, 2048, query)
        assert from_index, f"{name}: the workload should have candidates for every shape"
        assert from_index == answers(sqlite_engine, 0, query), name


def test_six_isolated_device_groups_with_a_limit_stay_within_the_budget(cloud, sqlite_engine):
    query = scale_cloud.SHAPES["six_devices_isolate"] + "&limit=5"
    app = create_app(Settings.of(candidates_answer_budget=1000), sqlite_engine)
    client = falcon.testing.TestClient(app, headers=scale_cloud.ADMIN)
    found = client.simulate_get("/allocation_candidates", query_string=query)
    assert found.status_code == 200, found.text
    assert len(found.json["allocation_requests"]) == 5
