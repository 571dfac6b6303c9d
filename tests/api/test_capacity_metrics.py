"""`/metrics` with `capacity_shapes`: how many more of each shape fit, the same
counts as `tally capacity` (read_capacity) reads over the API, in all and per host.

    cn1  8 VCPU, 16384 MB (3 VCPU held)     cn2  4 VCPU, 4096 MB
    cn3  2 VCPU, no memory (fits nothing with memory)

VCPU=2+MEMORY_MB=2048: cn1 2 (5 // 2), cn2 2; VCPU=1: cn1 5, cn2 4, cn3 2.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.doctor.fill import Shape, read_capacity
from tally.serve.compose import create_server

BASE = "http://tally.test"
ADMIN = {"x-auth-token": "admin"}


class Served:
    def __init__(self, settings: Settings, engine: sa.Engine) -> None:
        transport = httpx.WSGITransport(app=create_server(settings, engine))
        self.http = httpx.Client(transport=transport, base_url=BASE)
        self.placement = PlacementClient(BASE, transport=transport, version="1.39")

    def provider(self, name: str, held: dict[str, int] | None = None, **inventory: int) -> str:
        rp = str(uuid.uuid4())
        self.placement.post("/resource_providers", {"name": name, "uuid": rp})
        records = {rc: {"total": total} for rc, total in inventory.items()}
        self.placement.put_inventories(rp, 0, records)
        if held:
            claim = {
                "allocations": {rp: {"resources": held}},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
            self.placement.put(f"/allocations/{uuid.uuid4()}", claim)
        return rp

    def gauges(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        answer = self.http.get("/metrics", headers=ADMIN)
        assert answer.status_code == 200, answer.text
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text)
            if family.name.startswith("tally_capacity_fits")
            for s in family.samples
        }


@pytest.fixture
def served(sqlite_engine: sa.Engine) -> Iterator[Any]:
    made: list[Served] = []

    def make(**settings: Any) -> Served:
        made.append(Served(Settings.of(lab="off", **settings), sqlite_engine))
        return made[-1]

    yield make
    for s in made:
        s.http.close()


def expected(served: Served, label: str, shape: Shape) -> dict:
    report = read_capacity(served.placement, shape)
    found = {("tally_capacity_fits", (("shape", label),)): float(report.total)}
    for row in report.rows:
        labels = (("name", row.provider), ("provider", row.uuid), ("shape", label))
        found["tally_capacity_fits_provider", labels] = float(row.fits)
    return found


def test_gauges_count_what_read_capacity_counts(served):
    s = served(capacity_shapes="VCPU=2+MEMORY_MB=2048, VCPU=1", capacity_cache_seconds=0)
    s.provider("cn1", held={"VCPU": 3}, VCPU=8, MEMORY_MB=16384)
    s.provider("cn2", VCPU=4, MEMORY_MB=4096)
    s.provider("cn3", VCPU=2)
    gauges = s.gauges()
    want = {
        **expected(s, "VCPU=2+MEMORY_MB=2048", Shape({"VCPU": 2, "MEMORY_MB": 2048})),
        **expected(s, "VCPU=1", Shape({"VCPU": 1})),
    }
    assert gauges == want
    assert gauges["tally_capacity_fits", (("shape", "VCPU=2+MEMORY_MB=2048"),)] == 4
    assert gauges["tally_capacity_fits", (("shape", "VCPU=1"),)] == 11

    s.provider("cn4", VCPU=2, MEMORY_MB=2048)  # no cache: the next scrape counts it
    assert s.gauges()["tally_capacity_fits", (("shape", "VCPU=2+MEMORY_MB=2048"),)] == 5


def test_per_provider_gauges_are_bounded_and_counts_cached(served):
    s = served(capacity_shapes="VCPU=1", metrics_max_providers=2, capacity_cache_seconds=3600)
    for n in range(3):
        s.provider(f"cn{n}", VCPU=2)
    gauges = s.gauges()
    assert gauges["tally_capacity_fits", (("shape", "VCPU=1"),)] == 6  # the total counts all
    assert sum(name == "tally_capacity_fits_provider" for name, _ in gauges) == 2
    s.provider("cn9", VCPU=2)
    assert s.gauges() == gauges  # counted an hour ago: the same


def test_shapes_that_cannot_be_counted_are_logged_once_and_skipped(served, caplog):
    s = served(
        capacity_shapes="flavor:m1.small,VCPU=two,NOT_A_CLASS=1,VCPU=1", capacity_cache_seconds=0
    )
    s.provider("cn1", VCPU=2)
    with caplog.at_level(logging.WARNING, logger="tally.metrics"):
        for _ in range(2):
            gauges = s.gauges()
            assert {dict(labels)["shape"] for _, labels in gauges} == {"VCPU=1"}
    skipped = [r.getMessage() for r in caplog.records if "is skipped" in r.getMessage()]
    assert len(skipped) == 3, skipped  # once each, not per scrape
    assert "flavor shapes need the lab compute" in skipped[0]
    assert "'VCPU=two': the amount 'two' is not a whole number" in skipped[1]
    assert "NOT_A_CLASS" in skipped[2]


def test_no_shapes_no_capacity_samples_and_admins_only(served):
    s = served()
    s.provider("cn1", VCPU=2)
    assert s.gauges() == {}
    assert s.http.get("/metrics").status_code == 401
    assert s.http.get("/metrics", headers={"x-auth-token": "alice"}).status_code == 403
