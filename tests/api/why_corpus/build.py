"""Build corpus.json, the queries of tests/api/test_why_corpus.py, each with the
whole Placement state it is asked over:

  upstream  every GET /allocation_candidates of upstream Placement's functional
            suite (the gabbits that make one), captured from a live Tally serving
            the suite (tests/conformance/serve with TALLY_CAPTURE_CANDIDATES, run
            by the conformance runner); those answered 400 (or 404: before 1.10)
            at their microversion or at 1.39 are left out, those refused to a
            caller by policy (403) kept
  perf      the 15 query shapes of the perf workload generator (loadgen.py), over
            its own seeded cloud at a small size

Regenerate (a few minutes; needs upstream's conformance runner and loadgen.py):

  PYTHONPATH=src .venv/bin/python tests/api/why_corpus/build.py \\
      --conformance ../shared/tools/conformance/run --loadgen ../shared/tools/perf/loadgen.py

The file: one state or query per line, a state as in tests/conformance/capture.py
with each inventory written [total, reserved, min_unit, max_unit, step_size,
allocation_ratio].
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import types
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUT = HERE / "corpus.json"
GABBITS = "/tmp/gabbi-live-cache/openstack-placement-16.0.0/gabbits"  # the runner's cache
INVENTORY = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")
MAX_UNIT = 2147483647  # Placement's default max_unit
ANSWERED = (200, 403)  # kept: answered, or refused to a caller by policy (not for the query)
# The loadgen's cloud, small: (trees, seed, share of nested trees).
PERF_CLOUDS = ((24, 42, 0.10), (16, 7, 0.5))


def compact(state: dict[str, Any]) -> dict[str, Any]:
    """The state with each inventory as a list (INVENTORY's order)."""
    inventories = {
        rp: {rc: [inv[k] for k in INVENTORY] for rc, inv in sorted(by_class.items())}
        for rp, by_class in state["inventories"].items()
    }
    return dict(state, inventories=inventories)


def captured(runner: str, gabbits: str, work: Path) -> list[dict[str, Any]]:
    """The captured queries of every gabbit that asks for allocation candidates, in file order."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(ROOT / "src")
    found = []
    for name in sorted(os.listdir(gabbits)):
        if not name.endswith(".yaml") or "allocation_candidates" not in (
            Path(gabbits, name).read_text()
        ):
            continue
        out = work / f"{name}.jsonl"
        env["TALLY_CAPTURE_CANDIDATES"] = str(out)
        exact = name.replace(".", "[.]")  # (a glob: matched whole, not as a substring)
        command = [sys.executable, runner, "--gabbits", gabbits, "--only", exact, "--jobs", "1"]
        command += ["--server-cmd", f"{ROOT}/tests/conformance/serve {{port}} {{config}}"]
        run = subprocess.run(command, env=env, capture_output=True, text=True)
        print(run.stdout.strip().splitlines()[0] if run.stdout else run.stderr[-500:])
        lines = out.read_text().splitlines() if out.exists() else []
        found += [dict(json.loads(line), file=name) for line in lines]
    return found


def load_loadgen(path: str) -> types.ModuleType:
    """loadgen.py as a module (its HTTP client's imports stubbed: only its cloud
    builder and query shapes are used)."""
    for missing in ("aiohttp", "yarl"):
        try:
            importlib.import_module(missing)
        except ImportError:
            sys.modules[missing] = types.ModuleType(missing)
    spec = importlib.util.spec_from_file_location("loadgen", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def perf(path: str) -> list[dict[str, Any]]:
    """The loadgen's clouds (PERF_CLOUDS), each with its 15 query shapes at 1.39."""
    loadgen = load_loadgen(path)
    found = []
    for trees, seed, nested in PERF_CLOUDS:
        topo = loadgen.Topology(trees, seed, nested, 4, 0.2, 10, 0.3)
        state: dict[str, Any] = {"providers": [], "inventories": {}, "traits": {}}
        state["aggregates"] = {}
        for p in topo.providers:
            state["providers"].append([p.uuid, p.name, p.parent.uuid if p.parent else None])
            state["inventories"][p.uuid] = {
                rc: {"min_unit": 1, "step_size": 1, "max_unit": MAX_UNIT, "reserved": 0} | inv
                for rc, inv in p.inventories.items()
            }
            state["traits"][p.uuid] = sorted(p.traits)
            state["aggregates"][p.uuid] = sorted(p.aggregates)
        state["consumers"] = {
            consumer: {rp: alloc["resources"] for rp, alloc in allocs.items()}
            for consumer, allocs in topo.prepop
        }
        state["classes"], state["custom_traits"] = [], sorted(loadgen.CUSTOM_TRAITS)
        shapes = loadgen.LoadGen.query_shapes(
            types.SimpleNamespace(topo=topo, a=types.SimpleNamespace(queries=""), mv=(1, 39))
        )
        assert len(shapes) == 15, [name for name, _ in shapes]
        for name, path_and_query in shapes:
            query = path_and_query.split("?", 1)[1]
            found.append(
                {
                    "file": f"loadgen.py ({trees} trees, seed {seed})",
                    "shape": name,
                    "microversion": "1.39",
                    "query": query,
                    "state": state,
                }
            )
    return found


def write(entries: list[dict[str, Any]], out: Path) -> tuple[int, int]:
    """One line per distinct state, then one per distinct (state, query)."""
    states: dict[str, int] = {}
    queries: dict[tuple[int, str], dict[str, Any]] = {}
    for entry in entries:
        state = json.dumps(compact(entry["state"]), sort_keys=True, separators=(",", ":"))
        number = states.setdefault(state, len(states))
        queries.setdefault(
            (number, entry["query"]),
            {
                "file": entry["file"],
                **({"shape": entry["shape"]} if "shape" in entry else {}),
                "microversion": entry["microversion"],
                "state": number,
                "query": entry["query"],
            },
        )
    lines = ['{"about": "tests/api/why_corpus/build.py builds this file; its docstring says how",']
    lines.append(f' "inventory": {json.dumps(list(INVENTORY))},')
    lines.append(' "states": [')
    lines += [f"  {state}," for state in states][:-1] + [f"  {list(states)[-1]}"]
    lines.append(" ],")
    lines.append(' "queries": [')
    rows = [json.dumps(q, separators=(",", ":")) for q in queries.values()]
    lines += [f"  {row}," for row in rows][:-1] + [f"  {rows[-1]}"]
    lines.append(" ]}")
    out.write_text("\n".join(lines) + "\n")
    return len(states), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conformance", required=True, help="upstream's conformance runner")
    parser.add_argument("--loadgen", required=True, help="the perf workload generator")
    parser.add_argument("--gabbits", default=GABBITS, help="upstream's gabbits (the runner's)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    if not Path(args.gabbits).is_dir():
        sys.exit(f"no gabbits in {args.gabbits}: run the conformance runner once to fetch them")
    with tempfile.TemporaryDirectory(prefix="why-corpus-") as work:
        entries = captured(args.conformance, args.gabbits, Path(work))
    kept = [e for e in entries if e["status"] in ANSWERED and e["status_newest"] == 200]
    left = Counter((e["status"], e["status_newest"]) for e in entries if e not in kept)
    print(f"upstream: {len(entries)} queries captured, {len(kept)} kept")
    print("left out, by status (at its microversion, at 1.39):", dict(left))
    states, queries = write(kept + perf(args.loadgen), Path(args.out))
    print(f"{args.out}: {states} states, {queries} queries")


if __name__ == "__main__":
    main()
