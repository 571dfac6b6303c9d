#!/usr/bin/env python3
"""GET /allocation_candidates latency over the perf workload, in-process.

Builds the deployment of ../shared/tools/perf/loadgen.py (same seed, same
uuids, same pre-populated allocations; written straight into a fresh database,
which takes seconds instead of the minutes the HTTP setup takes), then runs
each of loadgen's query shapes K times through the app (falcon test client,
no network) and prints the first ask's time (the search in full; the answer is
then kept, see kept_answers.py), p50/p95 wall time of the next K, the time of the ask
after one claim (its trees searched again; the claim is then released), the
median CPU time of this process (SQLite runs in it too; steadier than wall
time on a busy box), candidate and summary counts, and loadgen's digest of
the candidate set. With --compare RESULTS.json (a loadgen run against
upstream, e.g.
../shared/tools/perf/results/*.json) it prints upstream's p50 and whether the
candidate sets are the same.

  .venv/bin/python bench/candidates.py                 # N=1000, SQLite
  .venv/bin/python bench/candidates.py --n 10000 -k 3 \\
      --compare ../shared/tools/perf/results/upstream-16.0.0-sqlite-1x1-n10000.json
  .venv/bin/python bench/candidates.py --database-url postgresql+psycopg://u@h/db
      (an empty database, or one this script filled for the same --n and --seed)
  .venv/bin/python bench/candidates.py --n 50000 -k 3     # how the cost grows
  .venv/bin/python bench/candidates.py --setting candidates_index_max_mb=0  # no index

It also prints the time the worker's in-memory index took to load and the memory
(RSS) it added.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
import tempfile
import time
import types
from pathlib import Path

import falcon.testing
import sqlalchemy as sa

from tally.config import Settings
from tally.db import schema as t
from tally.db.engine import make_engine
from tally.placement.app import create_app
from tally.placement.context import new_index
from tally.placement.ledger.bootstrap import prepare_database
from tally.placement.ledger.candidates.index import rss_mb

PERF = Path(__file__).resolve().parents[2] / "shared" / "tools" / "perf"


def import_loadgen(path: Path) -> types.ModuleType:
    """loadgen.py imports aiohttp/yarl at the top; only its model is used here."""
    for name in ("aiohttp", "yarl"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.path.insert(0, str(path))
    import loadgen  # noqa: PLC0415

    return loadgen


CONSUMERS_A_WRITE = 20_000


def populate(engine: sa.Engine, topo, project: str, user: str) -> None:  # noqa: ANN001
    """The topology's providers, inventories, traits, aggregates and consumers."""
    populate_providers(engine, topo)
    populate_consumers(engine, topo, project, user)


def populate_providers(engine: sa.Engine, topo) -> None:  # noqa: ANN001
    """The topology's providers, inventories, traits and aggregates (ids 1..N in order)."""
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    ids = {p.uuid: i for i, p in enumerate(topo.providers, start=1)}
    with engine.begin() as conn:
        trait_ids = dict(conn.execute(sa.select(t.traits.c.name, t.traits.c.id)).all())
        for name in {n for p in topo.providers for n in p.traits} - trait_ids.keys():
            conn.execute(t.traits.insert().values(name=name, created_at=now))
        trait_ids = dict(conn.execute(sa.select(t.traits.c.name, t.traits.c.id)).all())
        rc_query = sa.select(t.resource_classes.c.name, t.resource_classes.c.id)
        rc_ids = dict(conn.execute(rc_query).all())
        conn.execute(
            t.resource_providers.insert(),
            [
                {
                    "id": ids[p.uuid],
                    "uuid": p.uuid,
                    "name": p.name,
                    "generation": 1,
                    "root_provider_id": ids[p.root.uuid],
                    "parent_provider_id": ids[p.parent.uuid] if p.parent else None,
                    "created_at": now,
                }
                for p in topo.providers
            ],
        )
        inventories = []
        for p in topo.providers:
            for rc, inv in p.inventories.items():
                inventories.append(
                    {
                        "resource_provider_id": ids[p.uuid],
                        "resource_class_id": rc_ids[rc],
                        "total": inv["total"],
                        "reserved": inv.get("reserved", 0),
                        "min_unit": inv.get("min_unit", 1),
                        "max_unit": inv.get("max_unit", 2147483647),
                        "step_size": inv.get("step_size", 1),
                        "allocation_ratio": inv.get("allocation_ratio", 1.0),
                        "created_at": now,
                    }
                )
        conn.execute(t.inventories.insert(), inventories)
        rows = [
            {"resource_provider_id": ids[p.uuid], "trait_id": trait_ids[n], "created_at": now}
            for p in topo.providers
            for n in p.traits
        ]
        conn.execute(t.resource_provider_traits.insert(), rows)
        aggs = sorted({a for p in topo.providers for a in p.aggregates})
        agg_ids = {a: i for i, a in enumerate(aggs, start=1)}
        conn.execute(
            t.placement_aggregates.insert(),
            [{"id": i, "uuid": a, "created_at": now} for a, i in agg_ids.items()],
        )
        conn.execute(
            t.resource_provider_aggregates.insert(),
            [
                {"resource_provider_id": ids[p.uuid], "aggregate_id": agg_ids[a]}
                for p in topo.providers
                for a in p.aggregates
            ],
        )


def populate_consumers(engine: sa.Engine, topo, project: str, user: str) -> None:  # noqa: ANN001
    """The topology's pre-populated consumers and their allocations, in transactions
    of CONSUMERS_A_WRITE (a cluster certifies one write set at a time)."""
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    ids = {p.uuid: i for i, p in enumerate(topo.providers, start=1)}
    with engine.connect() as conn:
        rc_query = sa.select(t.resource_classes.c.name, t.resource_classes.c.id)
        rc_ids = dict(conn.execute(rc_query).all())
    for start in range(0, len(topo.prepop), CONSUMERS_A_WRITE):
        consumers, allocations = [], []
        for consumer, allocs in topo.prepop[start : start + CONSUMERS_A_WRITE]:
            consumers.append(
                {"uuid": consumer, "project_id": project, "user_id": user, "generation": 1}
            )
            for rp_uuid, body in allocs.items():
                for rc, used in body["resources"].items():
                    allocations.append(
                        {
                            "resource_provider_id": ids[rp_uuid],
                            "consumer_id": consumer,
                            "resource_class_id": rc_ids[rc],
                            "used": used,
                            "created_at": now,
                        }
                    )
        with engine.begin() as conn:
            conn.execute(t.consumers.insert(), consumers)
            conn.execute(t.allocations.insert(), allocations)


def deployment(
    loadgen: types.ModuleType, url: str | None, n: int, seed: int
) -> tuple[sa.Engine, object] | None:
    """The engine of `url` (default: a temporary SQLite) holding loadgen's topology of
    `n` trees (written when the database is empty), and the topology; None (said why)
    when the database holds something else."""
    url = url or f"sqlite:///{tempfile.mkdtemp(prefix='tally-bench-')}/bench.sqlite"
    engine = make_engine(url)
    prepare_database(engine)
    topo = loadgen.Topology(n, seed, 0.10, 4, 0.20, 10, 0.30)
    with engine.connect() as conn:
        have = conn.execute(sa.select(sa.func.count()).select_from(t.resource_providers)).scalar()
    if have == 0:
        populate(engine, topo, loadgen.PROJECT_ID, loadgen.USER_ID)
    elif have != len(topo.providers):
        print(f"the database holds {have} providers: give an empty one (or this N's)")
        return None
    return engine, topo


def digest(loadgen: types.ModuleType, doc: dict) -> str:
    """loadgen's digest of a candidate set (order-insensitive)."""
    reqs = sorted(loadgen.LoadGen.norm_request(r) for r in doc["allocation_requests"])
    return hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:16]


def claimed(client: falcon.testing.TestClient, path: str, doc: dict) -> float:
    """Claim the answer's first candidate, time the next ask (the trees it touched
    are searched again), then release the claim and ask once more (the deployment
    is as before); 0 when there was nothing to claim."""
    if not doc["allocation_requests"]:
        return 0.0
    consumer = "/allocations/00000000-0000-4000-8000-00000000c1a1"
    body = {
        "allocations": doc["allocation_requests"][0]["allocations"],
        "consumer_generation": None,
        "project_id": "p",
        "user_id": "u",
        "consumer_type": "INSTANCE",
    }
    assert client.simulate_put(consumer, json=body).status_code == 204
    start = time.perf_counter()
    assert client.simulate_get(path).status_code == 200
    elapsed = time.perf_counter() - start
    assert client.simulate_delete(consumer).status_code == 204
    assert client.simulate_get(path).status_code == 200
    return elapsed * 1000


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", "-n", type=int, default=1000, help="compute trees [1000]")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("-k", "--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--queries", default="", help="comma list of shape names (default all)")
    ap.add_argument("--database-url", help="an EMPTY database (default: a temporary SQLite)")
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
    print(
        f"# N={a.n} seed={a.seed}: {len(topo.providers)} providers, "
        f"{len(topo.prepop)} consumers, setup {time.perf_counter() - t0:.1f}s, "
        f"db {engine.dialect.name}",
        flush=True,
    )
    settings = dict(s.split("=", 1) for s in a.setting)
    index = new_index(Settings.of(**settings))  # the app's, handed in (None: off)
    app = create_app(Settings.of(**settings), engine, index)
    client = falcon.testing.TestClient(
        app, headers={"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
    )
    rss_before = rss_mb()
    started = time.perf_counter()
    client.simulate_get("/allocation_candidates?resources=VCPU:1&limit=1")  # loads the index
    if index is not None and index.enabled:
        print(
            f"# index: loaded in {time.perf_counter() - started:.2f}s, "
            f"RSS {rss_mb():.0f} MiB ({rss_mb() - rss_before:+.0f} MiB for the index)",
            flush=True,
        )
    else:
        print("# index: off (searching the database)", flush=True)
    gen = loadgen.LoadGen.__new__(loadgen.LoadGen)
    gen.topo, gen.mv = topo, (1, 39)
    gen.a = argparse.Namespace(queries=a.queries)
    gen.out = {"warnings": []}
    baseline = json.load(open(a.compare))["queries"] if a.compare else {}

    head = (
        f"{'shape':26} {'first':>7} {'p50 ms':>8} {'p95 ms':>8} {'cpu ms':>7} {'claim':>7} "
        f"{'cands':>7} {'summ':>6}  digest"
    )
    if baseline:
        head += f"{'':8} {'upstream p50':>12}  same set"
    print(head)
    for name, path in gen.query_shapes():
        lat, cpu, doc = [], [], None
        for i in range(a.warmup + a.reps):
            start, start_cpu = time.perf_counter(), time.process_time()
            resp = client.simulate_get(path)
            elapsed = time.perf_counter() - start
            if i == 0:
                first = elapsed * 1000
            if i >= a.warmup:
                cpu.append((time.process_time() - start_cpu) * 1000)
            if resp.status_code != 200:
                print(f"{name}: HTTP {resp.status_code} {resp.text[:300]}")
                return 1
            if i >= a.warmup:
                lat.append(elapsed * 1000)
            doc = resp.json
        after_claim = claimed(client, path, doc)
        cands, summ = len(doc["allocation_requests"]), len(doc["provider_summaries"])
        dig = digest(loadgen, doc) if "limit=" not in path else "-"
        line = (
            f"{name:26} {first:7.1f} {percentile(lat, 50):8.1f} {percentile(lat, 95):8.1f} "
            f"{percentile(cpu, 50):7.1f} {after_claim:7.1f} {cands:7} {summ:6}  {dig:16}"
        )
        if name in baseline:
            up = baseline[name]
            same = "-" if dig == "-" else ("yes" if up.get("digest") == dig else "NO")
            if "limit=" in path:
                same = "count ok" if up.get("candidates") == cands else "COUNT DIFFERS"
            line += f" {up.get('p50_ms', 0):12.0f}  {same} ({up.get('candidates')})"
        print(line, flush=True)
    print(f"# RSS at the end: {rss_mb():.0f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
