#!/usr/bin/env python3
"""What the candidates searches of issue 37 (item 2) cost a `tally serve` worker.

Starts `tally serve` (one worker, a fresh SQLite file in a temporary folder, lab
off, noauth) on a private port for each path: the in-memory index
(`candidates_index_max_mb=2048`) and the SQL path (`candidates_index_max_mb=0`).
On each, one tree a case (the previous one deleted first), every case with and
without `limit=1`, `group_policy=none`:

  a  a root with K children of 1 VCPU; K+1 groups `resourcesN=VCPU:1` (no host
     can fit: the room alone says so)
  b  the same tree, 200 groups
  c  K children of 1 VCPU beside a child `big` of 1,000 VCPU with CUSTOM_BIG;
     K+1 groups that refuse `big` (`requiredN=!CUSTOM_BIG`) plus one that may take
     it: the room together is ample, only trying tells the K+1 cannot fit
     (tests/api/test_candidates_budget.py's tree); then 150 groups plus one
  d  K children of 1,000 VCPU (huge answers: K^(K+1)); K+1 groups, then 200

For each ask it prints the status (with the count of candidates, or the setting a
refusal names), the seconds to the answer, and the worker's resident memory
(VmRSS) right after the answer and at its peak (VmHWM, reset before the ask) over
its idle RSS (measured just before, the tree built and one small ask made).
Timings are printed, never asserted.

  .venv/bin/python bench/search_bounds.py                    # a-d, K = 8..12, both paths
  .venv/bin/python bench/search_bounds.py --cases a,c --k 10 --paths sql
  .venv/bin/python bench/search_bounds.py --setting candidates_answer_budget=-1 --timeout 60
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from served import status_mib, tally_serve

HEADERS = {"OpenStack-API-Version": "placement 1.39", "X-Auth-Token": "admin"}
PATHS = {"index": 2048, "sql": 0}
# The group counts of each case (None: K+1).
GROUPS: dict[str, tuple[int | None, ...]] = {
    "a": (None,),
    "b": (200,),
    "c": (None, 150),
    "d": (None, 200),
}


def reset_peak(pid: int) -> bool:
    """Reset the process's VmHWM to its VmRSS (Linux 4.0+); False if refused."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def start(index_mb: int, settings: dict[str, str], workdir: str) -> tuple[subprocess.Popen, str]:
    return tally_serve(workdir, lab="off", candidates_index_max_mb=str(index_mb), **settings)


@dataclass
class Case:
    letter: str
    k: int
    groups: int  # the groups of VCPU:1 (in c: those that refuse `big`)
    limit: bool

    @property
    def label(self) -> str:
        groups = f"{self.groups}+1" if self.letter == "c" else str(self.groups)
        return f"{self.letter} K={self.k:<2} groups={groups:<5} {'limit=1' if self.limit else ''}"

    def query(self) -> str:
        if self.letter == "c":
            parts = [
                f"resources{i}=VCPU:1&required{i}=!CUSTOM_BIG" for i in range(1, self.groups + 1)
            ]
            parts.append(f"resources{self.groups + 1}=VCPU:1")
        else:
            parts = [f"resources{i}=VCPU:1" for i in range(1, self.groups + 1)]
        return "&".join(parts) + "&group_policy=none" + ("&limit=1" if self.limit else "")


def cases(letters: list[str], ks: list[int], limits: list[bool]) -> Iterator[Case]:
    for letter in letters:
        for groups in GROUPS[letter]:
            for limit in limits:
                for k in ks:
                    yield Case(letter, k, k + 1 if groups is None else groups, limit)


class Tree:
    """One root and its children, made for a case and deleted after it."""

    def __init__(self, client: httpx.Client, case: Case) -> None:
        self.client, self.root, self.children = client, str(uuid.uuid4()), []
        self._post(self.root, "root", None)
        per_child = 1000 if case.letter == "d" else 1
        for i in range(case.k):
            self._child(f"dev{i}", per_child)
        if case.letter == "c":
            big = self._child("big", 1000)
            client.put("/traits/CUSTOM_BIG").raise_for_status()
            body = {"resource_provider_generation": 1, "traits": ["CUSTOM_BIG"]}
            client.put(f"/resource_providers/{big}/traits", json=body).raise_for_status()

    def _post(self, rp: str, name: str, parent: str | None) -> None:
        body = {"name": f"{name}-{self.root[:8]}", "uuid": rp, "parent_provider_uuid": parent}
        self.client.post("/resource_providers", json=body).raise_for_status()

    def _child(self, name: str, vcpu: int) -> str:
        rp = str(uuid.uuid4())
        self._post(rp, name, self.root)
        body = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": vcpu}}}
        self.client.put(f"/resource_providers/{rp}/inventories", json=body).raise_for_status()
        self.children.append(rp)
        return rp

    def delete(self) -> None:
        for rp in [*self.children, self.root]:
            self.client.delete(f"/resource_providers/{rp}").raise_for_status()


def outcome(answer: httpx.Response) -> str:
    if answer.status_code == 200:
        return f"200 ({len(answer.json()['allocation_requests'])} candidates)"
    detail = answer.json()["errors"][0]["detail"]
    named = [s for s in ("candidates_answer_budget", "candidates_search_seconds") if s in detail]
    return f"{answer.status_code} ({named[0] if named else detail[:40]})"


def run(case: Case, client: httpx.Client, pid: int) -> str:
    tree = Tree(client, case)
    try:
        client.get("/allocation_candidates", params={"resources": "VCPU:1"}).raise_for_status()
        idle = status_mib(pid, "VmRSS")
        peaked = reset_peak(pid)
        started = time.perf_counter()
        try:
            status = outcome(client.get(f"/allocation_candidates?{case.query()}"))
        except httpx.ReadTimeout:
            status = "timeout"
        seconds = time.perf_counter() - started
        after = status_mib(pid, "VmRSS") - idle
        peak = f"{status_mib(pid, 'VmHWM') - idle:+7.1f}" if peaked else "      ?"
    finally:
        tree.delete()
    return f"{status:<38} {seconds:8.3f} {after:+9.1f} {peak:>9} {idle:8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="a,b,c,d", help="case letters, comma-separated")
    parser.add_argument("--k", default="8,9,10,11,12", help="children counts, comma-separated")
    parser.add_argument("--paths", default="index,sql", help="index, sql or both")
    parser.add_argument(
        "--limit", choices=("both", "off", "on"), default="both", help="ask with limit=1"
    )
    parser.add_argument("--timeout", type=float, default=120, help="seconds an ask may take")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the servers, e.g. candidates_answer_budget=-1 (repeatable)",
    )
    args = parser.parse_args()
    settings = dict(s.split("=", 1) for s in args.setting)
    limits = {"both": [False, True], "off": [False], "on": [True]}[args.limit]
    todo = list(cases(args.cases.split(","), [int(k) for k in args.k.split(",")], limits))
    for path in args.paths.split(","):
        with tempfile.TemporaryDirectory() as workdir:
            proc, base = start(PATHS[path], settings, workdir)
            try:
                client = httpx.Client(
                    base_url=base, headers=HEADERS, timeout=args.timeout, trust_env=False
                )
                print(f"\n{path} path (candidates_index_max_mb={PATHS[path]}), pid {proc.pid}")
                print(
                    f"{'case':<32} {'status':<38} {'seconds':>8} {'RSS after':>9} "
                    f"{'RSS peak':>9} {'idle MiB':>8}"
                )
                for case in todo:
                    print(f"{case.label:<32} {run(case, client, proc.pid)}", flush=True)
            finally:
                proc.terminate()
                proc.wait()


if __name__ == "__main__":
    main()
