#!/usr/bin/env python3
"""GET /resource_providers listing latency over the perf workload, in-process.

Builds the deployment of ../shared/tools/perf/loadgen.py straight into a fresh
database (as bench/candidates.py does: same seed, uuids and pre-populated
allocations, so the counts match loadgen's queries phase), then runs loadgen's
five listing shapes (its `listings` method: all, resources, resources + a
required trait, member_of an AZ aggregate, in_tree of a root) K times through
the app (falcon test client, no network) and prints p50/p95 wall time, the
median CPU time of this process and the provider count. With --compare
RESULTS.json (a loadgen run against upstream, e.g.
../shared/tools/perf/results/*.json) it prints upstream's p50 and count.

Listings are served from the worker's in-memory index (the candidates'); with
--setting candidates_index_max_mb=0 they run on the tables, which are left as a
bulk load leaves them: no ANALYZE unless --analyze
(PostgreSQL's autovacuum may still analyze them a minute later; --explain shows
the plan each listing got).

  .venv/bin/python bench/listings.py                   # N=1000, SQLite
  .venv/bin/python bench/listings.py --n 10000 -k 5 \\
      --compare ../shared/tools/perf/results/upstream-16.0.0-sqlite-1x1-n10000.json
  .venv/bin/python bench/listings.py --database-url postgresql+psycopg://u@h/db
      (an empty database, or one this script filled for the same --n and --seed)
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import falcon.testing
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from candidates import PERF, deployment, import_loadgen, percentile  # noqa: E402

from tally.config import Settings  # noqa: E402
from tally.placement.app import create_app  # noqa: E402


def listing_shapes(loadgen, topo) -> list[tuple[str, str]]:  # noqa: ANN001
    """(name, path) of loadgen's `LoadGen.listings`, in its order."""
    shapes = [
        ("list_all", []),
        ("list_resources", [("resources", "VCPU:1,MEMORY_MB:1024")]),
        (
            "list_resources_trait",
            [("resources", "VCPU:1,MEMORY_MB:1024"), ("required", loadgen.AVX2_TRAIT)],
        ),
    ]
    if topo.az_aggs:
        shapes.append(("list_member_of", [("member_of", topo.az_aggs[0])]))
    shapes.append(("list_in_tree", [("in_tree", topo.roots[0].uuid)]))
    return [
        (name, "/resource_providers" + ("?" + loadgen.qs(params) if params else ""))
        for name, params in shapes
    ]


def explain(engine: sa.Engine, client: falcon.testing.TestClient, path: str) -> None:
    """EXPLAIN (ANALYZE on PostgreSQL) the statements of one listing that do
    more than look up a name (lines cut at 160 characters: an id list is long)."""
    captured: list[tuple[str, object]] = []

    def grab(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001, ARG001
        captured.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        client.simulate_get(path)
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    prefix = {"sqlite": "EXPLAIN QUERY PLAN ", "postgresql": "EXPLAIN ANALYZE "}.get(
        engine.dialect.name, "EXPLAIN "
    )
    for statement, params in captured:
        if not statement.lstrip().upper().startswith("SELECT") or len(statement) < 300:
            continue
        print(f"  -- {' '.join(statement.split())[:100]}...")
        with engine.connect() as conn:
            for row in conn.exec_driver_sql(prefix + statement, params):
                print(("    " + " ".join(str(c) for c in row))[:160])


def analyze(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", "-n", type=int, default=1000, help="compute trees [1000]")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("-k", "--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--listings", default="", help="comma list of shape names (default all)")
    ap.add_argument("--database-url", help="an EMPTY database (default: a temporary SQLite)")
    ap.add_argument("--analyze", action="store_true", help="ANALYZE after filling the tables")
    ap.add_argument("--explain", action="store_true", help="print each listing's query plan")
    ap.add_argument("--compare", help="a loadgen results JSON to compare with")
    ap.add_argument("--loadgen", default=str(PERF), help="folder of loadgen.py")
    ap.add_argument("--setting", action="append", default=[], help="NAME=VALUE (repeatable)")
    a = ap.parse_args(argv)

    loadgen = import_loadgen(Path(a.loadgen))
    t0 = time.perf_counter()
    found = deployment(loadgen, a.database_url, a.n, a.seed)
    if found is None:
        return 2
    engine, topo = found
    if a.analyze:
        analyze(engine)
    print(
        f"# N={a.n} seed={a.seed}: {len(topo.providers)} providers, "
        f"setup {time.perf_counter() - t0:.1f}s, db {engine.dialect.name}"
        f"{', analyzed' if a.analyze else ''}",
        flush=True,
    )
    settings = dict(s.split("=", 1) for s in a.setting)
    app = create_app(Settings.of(**settings), engine)
    client = falcon.testing.TestClient(
        app, headers={"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
    )
    baseline = json.load(open(a.compare))["listings"] if a.compare else {}
    wanted = {s for s in a.listings.split(",") if s}

    head = f"{'shape':22} {'p50 ms':>8} {'p95 ms':>8} {'cpu ms':>7} {'count':>6}"
    if baseline:
        head += f" {'upstream p50':>12} {'ratio':>6}  same count"
    print(head)
    for name, path in listing_shapes(loadgen, topo):
        if wanted and name not in wanted:
            continue
        lat, cpu, count = [], [], None
        for i in range(a.warmup + a.reps):
            start, start_cpu = time.perf_counter(), time.process_time()
            resp = client.simulate_get(path)
            elapsed = time.perf_counter() - start
            if resp.status_code != 200:
                print(f"{name}: HTTP {resp.status_code} {resp.text[:300]}")
                return 1
            if i >= a.warmup:
                lat.append(elapsed * 1000)
                cpu.append((time.process_time() - start_cpu) * 1000)
            count = len(resp.json["resource_providers"])
            del resp  # the parsed body of a big listing would weigh on the next one's GC
            gc.collect()
        p50, p95, cpu50 = percentile(lat, 50), percentile(lat, 95), percentile(cpu, 50)
        line = f"{name:22} {p50:8.1f} {p95:8.1f} {cpu50:7.1f} {count:6}"
        if name in baseline:
            up = baseline[name]
            same = "yes" if up.get("count") == count else f"NO ({up.get('count')})"
            line += f" {up.get('p50_ms', 0):12.0f} {p50 / up['p50_ms']:6.3f}  {same}"
        print(line, flush=True)
        if a.explain:
            explain(engine, client, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
