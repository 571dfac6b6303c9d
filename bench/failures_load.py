#!/usr/bin/env python3
"""Are failed searches found later by the id the caller holds, under load?

Two API hosts (two `tally serve --workers N` over one database, default
PostgreSQL: --database-url, an EMPTY database) serve a mixed load at a fixed rate
(--rate requests/s for --seconds, spread over both hosts): claims and releases,
candidates that fit, and candidates that find nothing, each sent with its own
`X-OpenStack-Request-Id` as Nova sends it. Afterwards every empty answer's id is
looked up (`GET /tally/v1/failures?request_id=`) on the other host than the one
that answered it: found or not, and how long the look-up took. The claims'
acknowledged writes are checked in the database through the API too (each
acknowledged claim's allocations are there).

  .venv/bin/python bench/failures_load.py --database-url postgresql+psycopg://u@h:p/db
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from served import tally_serve  # noqa: E402

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}


def cloud(client: httpx.Client, hosts: int) -> list[str]:
    uuids = []
    for n in range(hosts):
        u = str(uuid.uuid4())
        client.post("/resource_providers", json={"name": f"cn{n}", "uuid": u}).raise_for_status()
        inv = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 16384}}
        body = {"resource_provider_generation": 0, "inventories": inv}
        client.put(f"/resource_providers/{u}/inventories", json=body).raise_for_status()
        uuids.append(u)
    return uuids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--database-url", required=True, help="an EMPTY database")
    ap.add_argument("--workers", type=int, default=2, help="workers of each host")
    ap.add_argument("--rate", type=float, default=50.0, help="requests a second, in all")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--hosts", type=int, default=20, help="providers of the cloud")
    ap.add_argument("--seed", type=int, default=39)
    a = ap.parse_args(argv)

    servers = [
        tally_serve(database_url=a.database_url, workers=a.workers, lab="off") for _ in range(2)
    ]
    clients = [httpx.Client(base_url=url, headers=HEADERS, timeout=30) for _, url in servers]
    rng = random.Random(a.seed)
    try:
        rps = cloud(clients[0], a.hosts)
        empty: list[tuple[str, int]] = []  # (global id, host that answered)
        claimed: list[str] = []
        counts = {"claim": 0, "release": 0, "fits": 0, "empty": 0, "errors": 0}
        lock = threading.Lock()

        def one(n: int) -> None:
            host = n % 2
            client = clients[host]
            gid = f"req-{uuid.uuid4()}"
            headers = {"x-openstack-request-id": gid}
            kind = rng.choice(["claim", "claim", "release", "fits", "empty"])
            try:
                if kind == "empty":
                    q = f"resources=VCPU:{rng.choice([9, 16, 64])},MEMORY_MB:1024"
                    r = client.get("/allocation_candidates", params=q, headers=headers)
                    assert r.json()["allocation_requests"] == [], r.text
                    with lock:
                        empty.append((gid, host))
                elif kind == "fits":
                    r = client.get(
                        "/allocation_candidates", params="resources=VCPU:1", headers=headers
                    )
                elif kind == "claim":
                    consumer = str(uuid.uuid4())
                    body = {
                        "allocations": {
                            rng.choice(rps): {"resources": {"VCPU": 1, "MEMORY_MB": 512}}
                        },
                        "project_id": "p",
                        "user_id": "u",
                        "consumer_generation": None,
                        "consumer_type": "INSTANCE",
                    }
                    r = client.put(f"/allocations/{consumer}", json=body, headers=headers)
                    if r.status_code == 204:
                        with lock:
                            claimed.append(consumer)
                else:
                    with lock:
                        consumer = claimed.pop(0) if claimed else None
                    if consumer is None:
                        return
                    r = client.delete(f"/allocations/{consumer}", headers=headers)
                with lock:
                    counts[kind] += 1
            except Exception:  # noqa: BLE001 - counted, the load goes on
                with lock:
                    counts["errors"] += 1

        threads = []
        start = time.monotonic()
        for n in itertools.count():
            due = start + n / a.rate
            if due - start >= a.seconds:
                break
            time.sleep(max(0.0, due - time.monotonic()))
            t = threading.Thread(target=one, args=(n,))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        took = time.monotonic() - start
        print(
            f"# {sum(counts.values())} requests in {took:.1f}s over 2 hosts "
            f"x {a.workers} workers: {counts}"
        )

        found, waits, missing = 0, [], []
        for gid, host in empty:
            other = clients[1 - host]
            t0 = time.monotonic()
            while True:  # the record is written off the answer's path: it may lag
                rows = other.get("/tally/v1/failures", params={"request_id": gid}).json()[
                    "failures"
                ]
                if rows or time.monotonic() - t0 > 5:
                    break
                time.sleep(0.02)
            waits.append((time.monotonic() - t0) * 1000)
            if rows and rows[0]["global_request_id"] == gid and rows[0]["verdict"]["constraints"]:
                found += 1
            else:
                missing.append(gid)
        if waits:
            print(
                f"empty answers {len(empty)}: found by their id on the other host {found} "
                f"({100 * found / len(empty):.1f}%); "
                f"look-up p50 {statistics.median(waits):.1f} ms, "
                f"most {max(waits):.1f} ms"
            )
        still = sum(1 for c in claimed if clients[0].get(f"/allocations/{c}").json()["allocations"])
        print(f"acknowledged claims still held: {still} of {len(claimed)} in the database")
        return 0 if found == len(empty) and still == len(claimed) else 1
    finally:
        for proc, _ in servers:
            proc.terminate()
        for proc, _ in servers:
            proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
