#!/usr/bin/env python3
"""How long the lab takes to build a big cloud: 200 compute hosts and 5,000 servers
(defaults), in-process through the lab compute API (which claims through Placement's
API), then a full `GET /servers/detail` walk, a few live migrations stepped to the
end and one fault. Prints the wall time of each phase and checks Placement's usage
adds up to what was booted.

  .venv/bin/python bench/lab.py
  .venv/bin/python bench/lab.py --hosts 50 --servers 1000 --batch 250
  .venv/bin/python bench/lab.py --database-url postgresql+psycopg://u@h/empty_db
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections.abc import Callable
from typing import Any

import httpx

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.db.engine import make_engine
from tally.placement.ledger.bootstrap import prepare_database
from tally.serve.compose import create_server


def timed(label: str, work: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = work()
    print(f"{label:<48} {time.perf_counter() - started:8.2f} s", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--servers", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1000, help="servers per POST /servers")
    parser.add_argument("--database-url", default="", help="an empty database (default SQLite)")
    args = parser.parse_args()
    logging.getLogger("tally").setLevel(logging.CRITICAL)  # the fault logs its error
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp(prefix='tally-lab-bench-')}/t.sqlite"
    engine = make_engine(url)
    prepare_database(engine)
    settings = Settings.of(database_url=url, lab="on", lab_step_seconds=0, lab_tracker_seconds=0)
    transport = httpx.WSGITransport(app=create_server(settings, engine))
    compute = ComputeClient("http://lab/compute/v2.1", transport=transport)
    placement = PlacementClient("http://lab/placement", transport=transport)
    print(
        f"lab bench: {args.hosts} hosts, {args.servers} servers, {engine.dialect.name}", flush=True
    )

    compute.post("/flavors", {"flavor": {"name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20}})
    names = [{"name": f"cmp-{n:04d}"} for n in range(1, args.hosts + 1)]
    timed(
        f"add {args.hosts} hosts (providers + inventories)",
        lambda: compute.post("/os-lab/hosts", {"hosts": names}),
    )

    def boot() -> None:
        left = args.servers
        while left:
            count = min(args.batch, left)
            compute.post(
                "/servers",
                {
                    "server": {
                        "name": "bench",
                        "flavorRef": "m1.small",
                        "min_count": count,
                        "max_count": count,
                    }
                },
            )
            left -= count

    timed(f"boot {args.servers} servers ({args.batch} per request)", boot)

    def walk() -> list[dict]:
        found, params = [], {"all_tenants": "1"}
        while True:
            page = compute.get("/servers/detail", params)
            found += page["servers"]
            if "servers_links" not in page:
                return found
            params = {"all_tenants": "1", "marker": found[-1]["id"]}

    servers = timed("list every server (GET /servers/detail pages)", walk)
    errors = sum(1 for s in servers if s["status"] != "ACTIVE")
    hosts = compute.get("/os-lab/hosts")["hosts"]
    used = timed(
        "read usage of every provider (Placement)",
        lambda: sum(placement.usages(h["provider_uuid"]).get("VCPU", 0) for h in hosts),
    )
    print(f"  servers {len(servers)}, not ACTIVE {errors}, VCPU used in Placement {used}")

    def migrate() -> None:
        for server in servers[:20]:
            compute.post(
                f"/servers/{server['id']}/action",
                {"os-migrateLive": {"host": None, "block_migration": "auto"}},
            )
        compute.post("/os-lab/step", {"count": 2})

    timed("20 live migrations, stepped to completion", migrate)
    timed(
        "one fault (migration-error)",
        lambda: compute.post("/os-lab/faults", {"fault": {"kind": "migration-error"}}),
    )
    timed("resource tracker over every host", lambda: compute.post("/os-lab/tracker", {}))


if __name__ == "__main__":
    main()
