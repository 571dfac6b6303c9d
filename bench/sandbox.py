#!/usr/bin/env python3
"""What if (issue 41): sandboxes over the perf deployment, in-process.

Builds the deployment of ../shared/tools/perf/loadgen.py (bench/candidates.py's,
10,000 trees by default) and prints:
  - a sandbox made (POST /tally/v1/sandboxes), ms (median of K);
  - a plan of M moves (`to: anywhere`) validated (POST .../changes), ms;
  - GET /allocation_candidates inside that sandbox and outside, p50 ms each, and
    the ratio (every loadgen query shape);
  - memory per provider the plan touched: the worker's overlay and patch, measured
    by tracemalloc while they are built, over the providers they change;
  - whether the live answers are unchanged while sandboxes exist (every shape's
    answer outside, before the sandboxes and after, byte for byte).

  .venv/bin/python bench/sandbox.py                 # N=10000, 200 moves
  .venv/bin/python bench/sandbox.py --n 1000 --moves 50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import falcon.testing
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from candidates import PERF, deployment, import_loadgen  # noqa: E402

from tally.config import Settings  # noqa: E402
from tally.db import schema as t  # noqa: E402
from tally.placement.app import create_app  # noqa: E402
from tally.placement.context import new_index  # noqa: E402
from tally.placement.ledger.sandbox.overlay import Overlay  # noqa: E402
from tally.placement.ledger.sandbox.patch import Patch  # noqa: E402


def timed(call) -> tuple[float, object]:  # noqa: ANN001
    start = time.perf_counter()
    found = call()
    return (time.perf_counter() - start) * 1000, found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", "-n", type=int, default=10000, help="compute trees [10000]")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--moves", type=int, default=200, help="moves in the plan [200]")
    ap.add_argument("-k", "--reps", type=int, default=5)
    ap.add_argument("--database-url", help="an EMPTY database (default: a temporary SQLite)")
    ap.add_argument("--loadgen", default=str(PERF), help="folder of loadgen.py")
    a = ap.parse_args(argv)

    loadgen = import_loadgen(Path(a.loadgen))
    t0 = time.perf_counter()
    found = deployment(loadgen, a.database_url, a.n, a.seed)
    if found is None:
        return 2
    engine, topo = found
    print(
        f"# N={a.n}: {len(topo.providers)} providers, {len(topo.prepop)} consumers, "
        f"setup {time.perf_counter() - t0:.1f}s, db {engine.dialect.name}",
        flush=True,
    )
    settings = Settings.of()
    index = new_index(settings)
    app = create_app(settings, engine, index)
    client = falcon.testing.TestClient(
        app, headers={"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
    )
    gen = loadgen.LoadGen.__new__(loadgen.LoadGen)
    gen.topo, gen.mv = topo, (1, 39)
    gen.a = argparse.Namespace(queries="")
    gen.out = {"warnings": []}
    shapes = list(gen.query_shapes())
    live_before = {name: client.simulate_get(path).content for name, path in shapes}

    made = []
    for _ in range(a.reps):
        ms, result = timed(lambda: client.simulate_post("/tally/v1/sandboxes", json={}))
        assert result.status_code == 201, result.text
        made.append(ms)
    box = f"/tally/v1/sandboxes/{result.json['id']}"
    print(f"sandbox made: {statistics.median(made):.1f} ms (median of {a.reps})")

    with engine.connect() as conn:
        consumers = (
            conn.execute(sa.select(t.consumers.c.uuid).order_by(t.consumers.c.uuid).limit(a.moves))
            .scalars()
            .all()
        )
    plan = [{"kind": "move", "consumer": c, "to": "anywhere"} for c in consumers]
    ms, result = timed(lambda: client.simulate_post(f"{box}/changes", json={"changes": plan}))
    assert result.status_code == 200, result.text
    steps = result.json["steps"]
    applied = sum(step["applied"] for step in steps)
    print(f"plan of {len(plan)} moves validated: {ms:.0f} ms ({applied} applied)")

    print(f"{'shape':26} {'outside p50':>11} {'inside p50':>10} {'ratio':>6}")
    ratios = []
    for name, path in shapes:
        query = path.split("?", 1)[1]
        outside, inside = [], []
        for i in range(a.reps + 1):
            ms_out, _ = timed(lambda path=path: client.simulate_get(path))
            ms_in, got = timed(
                lambda q=query: client.simulate_get(f"{box}/allocation_candidates", query_string=q)
            )
            assert got.status_code == 200, got.text
            if i:  # (the first of each: warm-up)
                outside.append(ms_out)
                inside.append(ms_in)
        p_out, p_in = statistics.median(outside), statistics.median(inside)
        ratios.append(p_in / p_out)
        print(f"{name:26} {p_out:11.2f} {p_in:10.2f} {p_in / p_out:6.2f}")
    print(f"ratio inside/outside: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")

    tracemalloc.start()  # (the overlay as a worker builds it from the stored steps)
    before = tracemalloc.take_snapshot()
    overlay = Overlay(1, steps)
    patch = Patch(overlay, index)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    touched = (
        len(patch.used.keys() | patch.inventories.keys() | patch.traits.keys() | patch.removed) or 1
    )
    print(
        f"memory: {size / 1024:.0f} KiB for {touched} providers touched "
        f"({size / touched:.0f} B each; steps as stored included), "
        f"estimate {overlay.approx_bytes() / 1024:.0f} KiB"
    )
    del overlay, patch

    more = [client.simulate_post("/tally/v1/sandboxes", json={}).json["id"] for _ in range(3)]
    live_after = {name: client.simulate_get(path).content for name, path in shapes}
    same = all(live_before[name] == live_after[name] for name in live_before)
    print(f"live answers unchanged while {1 + len(more)} sandboxes exist: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
