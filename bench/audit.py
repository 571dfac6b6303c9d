#!/usr/bin/env python3
"""How long `tally audit` takes over a big lab: 200 compute hosts and 5,000 servers
(defaults), built in-process through the lab compute API, then broken once by each
fault of the seed; prints the build time, the audit's wall time and its counts
(the issue asks for seconds).

  .venv/bin/python bench/audit.py
  .venv/bin/python bench/audit.py --hosts 50 --servers 1000
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time

import httpx

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.db.engine import make_engine
from tally.doctor.audit import audit
from tally.placement.ledger.bootstrap import prepare_database
from tally.serve.compose import create_server

FAULTS = ("delete-while-down", "migration-error", "migration-hang", "evacuation")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--servers", type=int, default=5000)
    args = parser.parse_args()
    logging.getLogger("tally").setLevel(logging.CRITICAL)  # the faults log their errors
    url = f"sqlite:///{tempfile.mkdtemp(prefix='tally-audit-bench-')}/t.sqlite"
    engine = make_engine(url)
    prepare_database(engine)
    settings = Settings.of(database_url=url, lab="on", lab_step_seconds=0, lab_tracker_seconds=0)
    transport = httpx.WSGITransport(app=create_server(settings, engine))
    compute = ComputeClient("http://lab/compute/v2.1", transport=transport)
    placement = PlacementClient("http://lab/placement", transport=transport)

    started = time.perf_counter()
    compute.post("/flavors", {"flavor": {"name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20}})
    hosts = [{"name": f"cmp-{n:04d}"} for n in range(1, args.hosts + 1)]
    compute.post("/os-lab/hosts", {"hosts": hosts})
    left = args.servers
    while left:
        count = min(1000, left)
        spec = {"name": "bench", "flavorRef": "m1.small", "min_count": count, "max_count": count}
        compute.post("/servers", {"server": spec})
        left -= count
    for kind in FAULTS:
        compute.post("/os-lab/faults", {"fault": {"kind": kind}})
    print(f"built {args.hosts} hosts, {args.servers} servers, {len(FAULTS)} faults", end=" ")
    print(f"in {time.perf_counter() - started:.2f} s", flush=True)

    started = time.perf_counter()
    report = audit(placement, compute)
    elapsed = time.perf_counter() - started
    counts = ", ".join(f"{n} {kind}" for kind, n in report.counts().items() if n)
    print(f"tally audit: {len(report.consumers)} consumers in {elapsed:.2f} s ({counts})")


if __name__ == "__main__":
    main()
