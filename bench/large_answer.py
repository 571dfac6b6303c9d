#!/usr/bin/env python3
"""What one big GET /allocation_candidates costs a serving worker, and what it
keeps afterwards.

Starts `tally serve` (one worker, a fresh SQLite file, noauth) on a private
port, builds one root with ten children of 1,000 VCPU each (issue 28's shape),
and asks, in turn: N groups of `VCPU:1` with `group_policy=none` (10^N
candidates) for N in --groups, each with and without `limit=50`. For each ask
it prints the status, the wall time, the body size, and the worker's resident
memory (VmRSS) right after the answer and, two seconds later, after 100 small
requests; the baseline first.

  .venv/bin/python bench/large_answer.py                      # default budget
  .venv/bin/python bench/large_answer.py --budget -1 --groups 4,5
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import uuid

import httpx
from served import rss_mib, tally_serve

HEADERS = {"OpenStack-API-Version": "placement 1.39", "X-Auth-Token": "admin"}


def start(budget: int | None, workdir: str) -> tuple[subprocess.Popen, httpx.Client]:
    settings = {} if budget is None else {"candidates_answer_budget": str(budget)}
    proc, base = tally_serve(workdir, **settings)
    return proc, httpx.Client(base_url=base, headers=HEADERS, timeout=600)


def build(client: httpx.Client) -> None:
    root = str(uuid.uuid4())
    client.post("/resource_providers", json={"name": "root", "uuid": root}).raise_for_status()
    for i in range(10):
        child = str(uuid.uuid4())
        body = {"name": f"child{i}", "uuid": child, "parent_provider_uuid": root}
        client.post("/resource_providers", json=body).raise_for_status()
        inventories = {"inventories": {"VCPU": {"total": 1000}}, "resource_provider_generation": 0}
        client.put(f"/resource_providers/{child}/inventories", json=inventories).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--budget", type=int, help="candidates_answer_budget (default: the setting's)"
    )
    parser.add_argument("--groups", default="4,5,6", help="group counts to ask, comma-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        proc, client = start(args.budget, workdir)
        try:
            build(client)
            client.get("/allocation_candidates", params={"resources": "VCPU:1"})
            print(f"baseline RSS {rss_mib(proc.pid):.0f} MiB")
            print(
                f"{'ask':<28} {'status':>6} {'seconds':>8} {'body MB':>8} "
                f"{'RSS after':>10} {'RSS 2 s later':>15}"
            )
            for n in map(int, args.groups.split(",")):
                groups = "&".join(f"resources{i}=VCPU:1" for i in range(1, n + 1))
                for limit in ("", "&limit=50"):
                    query = f"{groups}&group_policy=none{limit}"
                    started = time.perf_counter()
                    answer = client.get(f"/allocation_candidates?{query}")
                    seconds = time.perf_counter() - started
                    after = rss_mib(proc.pid)
                    time.sleep(2)  # the server's maintenance tick (every second)
                    for _ in range(100):
                        client.get("/resource_providers?name=root")
                    settled = rss_mib(proc.pid)
                    label = f"{n} groups{' limit=50' if limit else ''}"
                    print(
                        f"{label:<28} {answer.status_code:>6} {seconds:>8.2f} "
                        f"{len(answer.content) / 1e6:>8.1f} {after:>9.0f}M {settled:>14.0f}M"
                    )
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
