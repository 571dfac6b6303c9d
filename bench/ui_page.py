#!/usr/bin/env python3
"""The operator page's latency, in-process: `GET /tally/ui/` (the provider list, by
name and by fullness, and one filtered by name) and one provider's page, p50/p95
over K requests, through the composed server (`create_server`, the lab off).

The lab: N root providers (VCPU 16, MEMORY_MB 65536, DISK_GB 1000; every third in
one aggregate, every fifth with CUSTOM_FAST), each holding 1-3 consumers, written
through the Placement API.

  .venv/bin/python bench/ui_page.py                 # N=300, K=20, SQLite
  .venv/bin/python bench/ui_page.py --n 1000 -k 10
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid as uuidlib
from pathlib import Path

import httpx

from tally.config import Settings
from tally.db.engine import make_engine
from tally.placement.ledger.bootstrap import prepare_database
from tally.serve.compose import create_server

ADMIN = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}


def build(http: httpx.Client, n: int) -> str:
    """N providers with inventory and claims; the uuid of the first."""
    agg = str(uuidlib.uuid4())
    assert http.put("/traits/CUSTOM_FAST", headers=ADMIN).status_code in (201, 204)
    first = ""
    for i in range(n):
        rp = str(uuidlib.uuid4())
        first = first or rp
        body = {"name": f"cn-{i:05d}", "uuid": rp}
        assert http.post("/resource_providers", json=body, headers=ADMIN).status_code == 200
        inventories = {
            "VCPU": {"total": 16, "allocation_ratio": 4.0},
            "MEMORY_MB": {"total": 65536, "reserved": 512},
            "DISK_GB": {"total": 1000},
        }
        put = {"resource_provider_generation": 0, "inventories": inventories}
        path = f"/resource_providers/{rp}/inventories"
        assert http.put(path, json=put, headers=ADMIN).status_code == 200
        generation = 1
        if i % 3 == 0:
            put = {"aggregates": [agg], "resource_provider_generation": generation}
            path = f"/resource_providers/{rp}/aggregates"
            assert http.put(path, json=put, headers=ADMIN).status_code == 200
            generation += 1
        if i % 5 == 0:
            put = {"traits": ["CUSTOM_FAST"], "resource_provider_generation": generation}
            path = f"/resource_providers/{rp}/traits"
            assert http.put(path, json=put, headers=ADMIN).status_code == 200
        for _ in range(1 + i % 3):
            claim = {
                "allocations": {rp: {"resources": {"VCPU": 2, "MEMORY_MB": 4096}}},
                "project_id": "proj",
                "user_id": "user",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
            path = f"/allocations/{uuidlib.uuid4()}"
            assert http.put(path, json=claim, headers=ADMIN).status_code == 204
    return first


def timed(http: httpx.Client, path: str, k: int) -> tuple[float, float]:
    """p50 and p95 in milliseconds of K GETs of `path` (after one warm-up)."""
    assert http.get(path, headers=ADMIN).status_code == 200
    seconds = []
    for _ in range(k):
        start = time.perf_counter()
        answer = http.get(path, headers=ADMIN)
        seconds.append(time.perf_counter() - start)
        assert answer.status_code == 200, answer.text[:300]
    seconds.sort()
    return statistics.median(seconds) * 1000, seconds[int(0.95 * (len(seconds) - 1))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="providers")
    parser.add_argument("-k", type=int, default=20, help="timed requests per page")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'tally.sqlite'}"
        engine = make_engine(url)
        prepare_database(engine)
        server = create_server(Settings.of(database_url=url, lab="off"), engine)
        transport = httpx.WSGITransport(app=server)
        with httpx.Client(transport=transport, base_url="http://bench") as http:
            first = build(http, args.n)
            pages = [
                ("list, by name", "/tally/ui/"),
                ("list, by fullness", "/tally/ui/?sort=fullness"),
                ("list, name filter", "/tally/ui/?name=cn-0001"),
                ("one provider", f"/tally/ui/providers/{first}"),
            ]
            print(f"{args.n} providers, {args.k} requests each")
            for name, path in pages:
                p50, p95 = timed(http, path, args.k)
                print(f"  {name:<20} p50 {p50:8.1f} ms   p95 {p95:8.1f} ms")
        engine.dispose()


if __name__ == "__main__":
    main()
