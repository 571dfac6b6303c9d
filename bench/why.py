#!/usr/bin/env python3
"""What explaining an empty answer costs: the perf workload's query shapes made
empty, asked of GET /allocation_candidates with failed searches kept and not, and
of GET /tally/v1/allocation_candidates/why, in-process.

Builds the deployment of ../shared/tools/perf/loadgen.py as bench/candidates.py
does, then for each of loadgen's query shapes asks it with every amount
multiplied by 1,000 (no tree has room: an empty answer, as a boot that finds no
host) K times through an app that keeps failed searches and K times through one
that does not (the difference is what the record adds to the request: its
verdict, worked out from the state that search read, on the first ask of a shape;
the index keeps it until anything changes, so the asks after it reuse it; the row
is written off the request's path), and the verdict alone (`/why`, which searches
first), printing the first ask and the p50 of the others, and the verdict's
dominant constraint.

  .venv/bin/python bench/why.py --n 10000 -k 5
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import falcon.testing

sys.path.insert(0, str(Path(__file__).resolve().parent))
from candidates import PERF, deployment, import_loadgen, percentile  # noqa: E402

from tally.config import Settings  # noqa: E402
from tally.placement.app import create_app  # noqa: E402
from tally.placement.context import new_index  # noqa: E402


def emptied(path: str) -> str:
    """The query with every amount of every class 1,000 times larger."""
    return re.sub(
        r"(resources[^=&]*=)([^&]*)",
        lambda m: (
            m.group(1) + re.sub(r":(\d+)", lambda a: f":{int(a.group(1)) * 1000}", m.group(2))
        ),
        path,
    )


def timed(client: falcon.testing.TestClient, path: str, reps: int) -> tuple[float, float, dict]:
    """The first ask's time, the p50 of the `reps` after it, and the answer."""
    lat, doc = [], {}
    for _ in range(reps + 1):
        start = time.perf_counter()
        resp = client.simulate_get(path)
        if resp.status_code != 200:
            raise SystemExit(f"{path}: HTTP {resp.status_code} {resp.text[:300]}")
        lat.append((time.perf_counter() - start) * 1000)
        doc = resp.json
    return lat[0], percentile(lat[1:], 50) if reps else lat[0], doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", "-n", type=int, default=1000, help="compute trees [1000]")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("-k", "--reps", type=int, default=5)
    ap.add_argument("--database-url", help="an EMPTY database (default: a temporary SQLite)")
    ap.add_argument("--loadgen", default=str(PERF), help="folder of loadgen.py")
    ap.add_argument("--setting", action="append", default=[], help="NAME=VALUE (repeatable)")
    a = ap.parse_args(argv)

    loadgen = import_loadgen(Path(a.loadgen))
    found = deployment(loadgen, a.database_url, a.n, a.seed)
    if found is None:
        return 2
    engine, topo = found
    settings = dict(s.split("=", 1) for s in a.setting)
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
    index = new_index(Settings.of(**settings))  # one index, two apps
    app = create_app(Settings.of(**settings), engine, index)
    client = falcon.testing.TestClient(app, headers=headers)
    client.simulate_get("/allocation_candidates?resources=VCPU:1&limit=1")  # loads the index
    quiet = create_app(Settings.of(**settings, failures=False), engine, index)
    plain = falcon.testing.TestClient(quiet, headers=headers)
    gen = loadgen.LoadGen.__new__(loadgen.LoadGen)
    gen.topo, gen.mv = topo, (1, 39)
    gen.a = argparse.Namespace(queries="")
    gen.out = {"warnings": []}
    print(f"# N={a.n}: {len(topo.providers)} providers, db {engine.dialect.name}")
    print(f"{'shape':26} {'empty ms':>9} {'kept, first':>11} {'again':>6} {'why ms':>7}  dominant")
    first_extra, again_extra = [], []
    for name, path in gen.query_shapes():
        path = emptied(path)
        _, empty_ms, doc = timed(plain, path, a.reps)
        assert not doc["allocation_requests"], (name, path)
        first_ms, again_ms, _ = timed(client, path, a.reps)
        query = path.split("?", 1)[1]
        why_ms, _, verdict = timed(client, "/tally/v1/allocation_candidates/why?" + query, 0)
        first_extra.append(first_ms - empty_ms)
        again_extra.append(again_ms - empty_ms)
        line = f"{name:26} {empty_ms:9.1f} {first_ms:11.1f} {again_ms:6.1f} {why_ms:7.1f}"
        print(f"{line}  {verdict['dominant']}")
    for label, extra in (("first", first_extra), ("again", again_extra)):
        print(
            f"# keeping the failure adds, {label} ask of a shape: "
            f"p50 {percentile(extra, 50):.1f} ms, most {max(extra):.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
