#!/usr/bin/env python3
"""What if (issue 41): sandboxes over the perf deployment, in-process.

Builds the deployment of ../shared/tools/perf/loadgen.py (bench/candidates.py's,
10,000 trees by default) and prints:
  - a sandbox made (POST /tally/v1/sandboxes), ms (median of K);
  - a plan of M moves (`to: anywhere`) validated (POST .../changes), ms;
  - GET /allocation_candidates inside that sandbox and outside, p50 ms each, and
    the ratio (every loadgen query shape): as a client sees them (each side answers
    from its kept answers: outside the live index's, inside the sandbox's, made from
    the live ones with the trees the plan touched searched again), and the search
    in full (no kept answers on either side, the ledger called in-process);
  - memory per provider the plan touched: the overlay a worker keeps (made from the
    stored steps, compacted) and its patch, measured by tracemalloc while they are
    built, over the providers they change; and what
    the sandbox kept while it was read (kept answers, patched stock lists);
  - whether the live answers are unchanged while sandboxes exist (every shape's
    answer outside, before the sandboxes and after, byte for byte).

  .venv/bin/python bench/sandbox.py                 # N=10000, 200 moves
  .venv/bin/python bench/sandbox.py --n 1000 --moves 50
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import gc
import statistics
import sys
import time
import tracemalloc
import urllib.parse
from pathlib import Path

import falcon.testing
import orjson
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from candidates import PERF, deployment, import_loadgen  # noqa: E402

from tally import memory  # noqa: E402
from tally.config import Settings  # noqa: E402
from tally.db import schema as t  # noqa: E402
from tally.placement.app import create_app  # noqa: E402
from tally.placement.candidate_query import parse_query  # noqa: E402
from tally.placement.context import new_index  # noqa: E402
from tally.placement.ledger.candidates import Options, answer_over  # noqa: E402
from tally.placement.ledger.candidates import view as views  # noqa: E402
from tally.placement.ledger.candidates.view import View  # noqa: E402
from tally.placement.ledger.sandbox.overlay import Overlay  # noqa: E402
from tally.placement.ledger.sandbox.patch import Patch  # noqa: E402
from tally.placement.ledger.sandbox.store import Kept  # noqa: E402
from tally.placement.ledger.sandbox.view import SandboxView  # noqa: E402
from tally.placement.microversion import MAX_VERSION  # noqa: E402


class _Unkept(View):
    """The live view without its kept answers (the search in full)."""

    def kept(self) -> None:
        return None


class _UnkeptSandbox(SandboxView):
    """A sandbox's view without kept answers (the search in full)."""

    def kept(self) -> None:
        return None


def app_sandboxes() -> Kept:
    """The sandboxes one worker keeps (the bench's one app made one `Kept`)."""
    (found,) = [o for o in gc.get_objects() if isinstance(o, Kept)]
    return found


def kept_size(patch: Patch) -> list[int]:
    """Bytes of what a patch keeps while it is read (its caches), leaving out
    what it shares with the live index (rows, kept texts)."""
    seen: set[int] = set()

    def size(o: object) -> int:
        if id(o) in seen:
            return 0
        seen.add(id(o))
        found = sys.getsizeof(o)
        if isinstance(o, dict):
            found += sum(size(k) + size(v) for k, v in o.items())
        elif isinstance(o, list | tuple | set | frozenset):
            found += sum(size(x) for x in o)
        elif isinstance(o, collections.ChainMap):
            found += size(o.maps[0])
        elif dataclasses.is_dataclass(o):
            found += size(vars(o))
        return found

    index = patch.index
    for rc in index.class_names:  # (the live index's, which the patch's point to)
        size(index.stock_list(rc))
    size(index.by_class)
    size(index.kept.answers._kept)
    size(index.kept._summaries_json)
    answers = patch.answers
    kept = [patch._lists, patch._fitting, patch._class_rows]
    if answers is not None:
        kept += [
            answers.answers._kept,
            answers.verdicts,
            answers._summaries,
            answers._summaries_json,
            answers._request_texts,
        ]
    return [size(x) for x in kept]


def timed(call) -> tuple[float, object]:  # noqa: ANN001
    start = time.perf_counter()
    found = call()
    return (time.perf_counter() - start) * 1000, found


def cpu_timed(call) -> tuple[float, object]:  # noqa: ANN001
    """CPU time of this process (SQLite runs in it too): steadier than wall time on
    a busy machine."""
    start = time.process_time()
    found = call()
    return (time.process_time() - start) * 1000, found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", "-n", type=int, default=10000, help="compute trees [10000]")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--moves", type=int, default=200, help="moves in the plan [200]")
    ap.add_argument("-k", "--reps", type=int, default=5)
    ap.add_argument("--database-url", help="an EMPTY database (default: a temporary SQLite)")
    ap.add_argument("--cpu", action="store_true", help="reads timed in CPU time, not wall time")
    ap.add_argument("--verbose", "-v", action="store_true", help="where the memory goes")
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
    cpu = time.process_time()
    ms, result = timed(lambda: client.simulate_post(f"{box}/changes", json={"changes": plan}))
    cpu = (time.process_time() - cpu) * 1000
    assert result.status_code == 200, result.text
    steps = result.json["steps"]
    applied = sum(step["applied"] for step in steps)
    print(f"plan of {len(plan)} moves validated: {ms:.0f} ms, cpu {cpu:.0f} ms ({applied} applied)")

    overlay = Overlay(1, steps)
    patch = Patch(overlay, index)
    options = Options()
    clock = cpu_timed if a.cpu else timed
    print(f"# reads: {'CPU' if a.cpu else 'wall'} time, ms")
    print(
        f"{'shape':26} {'outside p50':>11} {'inside p50':>10} {'ratio':>6}"
        f"  {'in full: outside':>16} {'inside':>7} {'ratio':>6}"
    )
    ratios, full_ratios = [], []
    for name, path in shapes:
        query = path.split("?", 1)[1]
        outside, inside, full_out, full_in = [], [], [], []
        request = parse_query(urllib.parse.parse_qs(query, keep_blank_values=True), MAX_VERSION)
        for i in range(a.reps + 1):
            ms_out, _ = clock(lambda path=path: client.simulate_get(path))
            ms_in, got = clock(
                lambda q=query: client.simulate_get(f"{box}/allocation_candidates", query_string=q)
            )
            assert got.status_code == 200, got.text
            with views.of(index, engine), memory.gc_paused():
                ms_full_out, _ = clock(lambda r=request: answer_over(_Unkept(index), r, options))
                ms_full_in, _ = clock(
                    lambda r=request: answer_over(_UnkeptSandbox(index, patch), r, options)
                )
            if i:  # (the first of each: warm-up)
                outside.append(ms_out)
                inside.append(ms_in)
                full_out.append(ms_full_out)
                full_in.append(ms_full_in)
        p_out, p_in = statistics.median(outside), statistics.median(inside)
        f_out, f_in = statistics.median(full_out), statistics.median(full_in)
        ratios.append(p_in / p_out)
        full_ratios.append(f_in / f_out)
        print(
            f"{name:26} {p_out:11.2f} {p_in:10.2f} {p_in / p_out:6.2f}"
            f"  {f_out:16.2f} {f_in:7.2f} {f_in / f_out:6.2f}"
        )
    print(
        f"ratio inside/outside: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}; "
        f"in full: median {statistics.median(full_ratios):.2f}, max {max(full_ratios):.2f}"
    )
    del overlay, patch

    stored = orjson.dumps(steps)
    tracemalloc.start()  # (the overlay as a worker builds it from the stored steps)
    before = tracemalloc.take_snapshot()
    overlay = Overlay(1, orjson.loads(stored)).compact()
    patch = Patch(overlay, index)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    if a.verbose:
        for stat in after.compare_to(before, "lineno")[:12]:
            print("  ", stat)
    touched = len(patch.touched()) or 1
    print(
        f"memory: {size / 1024:.0f} KiB for {touched} providers touched "
        f"({size / touched:.0f} B each: the overlay as a worker keeps it, from the stored "
        "steps, and its patch), "
        f"estimate {overlay.approx_bytes() / 1024:.0f} KiB"
    )
    kept = app_sandboxes().patch(box.rsplit("/", 1)[1])
    if kept is not None:
        sizes = kept_size(kept)
        print(
            f"kept while read: {sum(sizes[:3]) / 1024:.0f} KiB of stock lists, "
            f"{sum(sizes[3:]) / 1024:.0f} KiB of kept answers"
        )

    more = [client.simulate_post("/tally/v1/sandboxes", json={}).json["id"] for _ in range(3)]
    live_after = {name: client.simulate_get(path).content for name, path in shapes}
    same = all(live_before[name] == live_after[name] for name in live_before)
    print(f"live answers unchanged while {1 + len(more)} sandboxes exist: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
