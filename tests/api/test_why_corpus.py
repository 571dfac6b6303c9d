"""GET /tally/v1/allocation_candidates/why over a corpus of real queries
(tests/api/why_corpus/corpus.json, built by build.py beside it): every
allocation-candidates query of upstream Placement's functional suite, with the
whole state it was asked over, and the 15 query shapes of the perf workload over
its own cloud. Each state is loaded into an empty database through the API; each
query is held to the brute-force judge of tests/api/why_judge.py as it is, then
made empty by shrinking the inventories its answer uses, in five ways, step by
step until nothing fits, each step held to the judge again:

  reserved  the used classes of the used providers reserved whole
  total     their total lowered to leave one less free than an answer took
  units     their max_unit below what an answer took (a step_size of 2 for 1)
  class     every provider of the first class asked left with less free than
            any group asks of it (one step)
  half      as total, first on every other tree of the answer alone (its own
            providers: an answer over fewer trees), then on all

Every variant starts again from the loaded state. On PostgreSQL and MySQL every
state is loaded and every fourth query of it runs (all of them on SQLite)."""

from __future__ import annotations

import json
import math
import urllib.parse
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tally.placement.ledger.candidates import Index
from tests.api.why_judge import Books, check
from tests.conftest import empty_database

CORPUS = json.loads((Path(__file__).parent / "why_corpus" / "corpus.json").read_text())
FIELDS = CORPUS["inventory"]
STATES = CORPUS["states"]
QUERIES = defaultdict(list)
for _entry in CORPUS["queries"]:
    QUERIES[_entry["state"]].append(_entry)
VARIANTS = ("reserved", "total", "units", "class", "half")
ROUNDS = 30  # shrink steps at most before an answer must be empty (each judged)
SERVER_STRIDE = 4  # on PostgreSQL and MySQL: every fourth query of a state


class Loaded:
    """One corpus state in the database, through the API; inventories it can
    shrink and put back."""

    def __init__(self, client, state: dict[str, Any]) -> None:  # noqa: ANN001
        self.client = client
        self.inventories = {
            rp: {rc: dict(zip(FIELDS, row, strict=True)) for rc, row in by_class.items()}
            for rp, by_class in state["inventories"].items()
        }
        self.used: Counter[tuple[str, str]] = Counter()
        for held in state["consumers"].values():
            for rp, resources in held.items():
                for rc, n in resources.items():
                    self.used[rp, rc] += n
        self.generation: dict[str, int] = {}
        for name in state["classes"]:
            self._ok(client.simulate_put(f"/resource_classes/{name}"))
        for name in state["custom_traits"]:
            self._ok(client.simulate_put(f"/traits/{name}"))
        for uuid, name, parent in state["providers"]:
            body = {"uuid": uuid, "name": name, "parent_provider_uuid": parent}
            self._ok(client.simulate_post("/resource_providers", json=body))
            self.generation[uuid] = 0
            if self.inventories[uuid]:
                self.put(uuid, self.inventories[uuid])
            for what in ("traits", "aggregates"):
                if state[what][uuid]:
                    self._put(uuid, what, {what: state[what][uuid]})
        if state["consumers"]:
            body = {
                consumer: {
                    "allocations": {rp: {"resources": r} for rp, r in held.items()},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                    "consumer_type": "INSTANCE",
                }
                for consumer, held in state["consumers"].items()
            }
            self._ok(client.simulate_post("/allocations", json=body))
            listed = client.simulate_get("/resource_providers").json["resource_providers"]
            self.generation = {p["uuid"]: p["generation"] for p in listed}  # (claims move them)

    def put(self, uuid: str, inventories: dict[str, dict]) -> None:
        self._put(uuid, "inventories", {"inventories": inventories})

    def _put(self, uuid: str, what: str, body: dict) -> None:
        body["resource_provider_generation"] = self.generation[uuid]
        result = self.client.simulate_put(f"/resource_providers/{uuid}/{what}", json=body)
        self._ok(result)
        self.generation[uuid] = result.json["resource_provider_generation"]

    @staticmethod
    def _ok(result) -> None:  # noqa: ANN001
        assert result.status_code < 300, result.text

    def free(self, rp: str, rc: str) -> int:
        i = self.inventories[rp][rc]
        return int((i["total"] - i["reserved"]) * i["allocation_ratio"]) - self.used[rp, rc]

    def shrunk(self, rp: str, rc: str, kind: str, asked: int) -> dict[str, Any]:
        """The inventory of `rc` on `rp` leaving no room for `asked` (nor more)."""
        i = dict(self.inventories[rp][rc])
        kind = "total" if kind == "half" else kind
        if kind == "reserved":
            i["reserved"] = i["total"]
        elif kind in ("total", "class"):  # the largest total leaving less than asked free
            most, ratio = self.used[rp, rc] + asked - 1, i["allocation_ratio"]
            total = i["reserved"] + math.floor(most / ratio)
            while total > i["reserved"] and int((total - i["reserved"]) * ratio) > most:
                total -= 1
            i["total"] = max(min(total, i["total"]), 1)  # (a total is 1 at least)
            if int((i["total"] - i["reserved"]) * ratio) > most:
                i["reserved"] = i["total"]
        elif asked > 1:
            i["max_unit"] = min(i["max_unit"], asked - 1)
            i["min_unit"] = min(i["min_unit"], i["max_unit"])
        else:
            i["step_size"] = 2
        return i


def taken(requests: list[dict]) -> dict[tuple[str, str], int]:
    """(provider, class) -> the least an answer takes of it."""
    least: dict[tuple[str, str], int] = {}
    for r in requests:
        for rp, alloc in r["allocations"].items():
            for rc, n in alloc["resources"].items():
                least[rp, rc] = min(least.get((rp, rc), n), n)
    return least


def first_class(query: str) -> tuple[str, int]:
    """The first class the query asks, and the least any group asks of it."""
    amounts = [
        (rc, int(n))
        for key, value in urllib.parse.parse_qsl(query)
        if key.startswith("resources")
        for rc, n in (p.strip().split(":") for p in value.split(","))
    ]
    rc = amounts[0][0]
    return rc, min(n for name, n in amounts if name == rc)


def half(books: Books, requests: list[dict]) -> list[dict]:
    """The answer's allocations on every other tree it uses, their own providers only."""
    trees = sorted({books.root[rp] for r in requests for rp in r["allocations"]})
    kept = set(trees[::2])
    return [
        {"allocations": {rp: a for rp, a in r["allocations"].items() if books.root[rp] in kept}}
        for r in requests
    ]


def shrink(loaded: Loaded, kind: str, query: str, requests: list[dict]) -> set[str]:
    """One step of `kind` against this answer; the providers it changed."""
    if kind == "class":
        rc, asked = first_class(query)
        steps = {(rp, rc): asked for rp, by_class in loaded.inventories.items() if rc in by_class}
    else:
        steps = taken(requests)
    for (rp, rc), asked in steps.items():
        loaded.inventories[rp][rc] = loaded.shrunk(rp, rc, kind, asked)
    changed = {rp for rp, _ in steps}
    for rp in changed:
        loaded.put(rp, loaded.inventories[rp])
    return changed


@pytest.mark.parametrize("number", range(len(STATES)))
def test_every_corpus_query_and_its_shrunk_answers_match_the_judge(api, engine, backend, number):
    stride = 1 if backend == "sqlite" else SERVER_STRIDE
    empty_database(engine)
    client = api("1.39", over_capacity="allow")
    loaded = Loaded(client, STATES[number])
    original = {rp: dict(by_class) for rp, by_class in loaded.inventories.items()}
    books, index = Books(client), Index()
    as_read = dict(books.inv)
    counts: Counter[str] = Counter()
    for entry in QUERIES[number][::stride]:
        query = entry["query"]
        requests = check(client, engine, index, books, query).requests
        counts["as is, non-empty" if requests else "as is, empty"] += 1
        for kind in VARIANTS if requests else ():
            answer, shrunk = requests, set()
            for step in range(ROUNDS):
                part = half(books, answer) if kind == "half" and step == 0 else answer
                changed = shrink(loaded, kind, query, part)
                for rp in changed:
                    books.read_inventories(client, rp)
                shrunk |= changed
                answer = check(client, engine, index, books, query).requests
                counts["shrunk, non-empty" if answer else "shrunk, empty"] += 1
                if not answer:
                    break
            assert not answer, (query, kind, "candidates left after shrinking")
            for rp in shrunk:  # the state as loaded, again
                loaded.inventories[rp] = {rc: dict(i) for rc, i in original[rp].items()}
                loaded.put(rp, loaded.inventories[rp])
            books.inv = dict(as_read)
    print(f"state {number} ({backend}): {len(QUERIES[number][::stride])} queries, {dict(counts)}")


def test_the_corpus_holds_the_upstream_suite_and_the_perf_shapes():
    upstream = Counter(q["file"] for q in CORPUS["queries"] if "shape" not in q)
    clouds = Counter(q["file"] for q in CORPUS["queries"] if "shape" in q)
    shapes = {q["shape"] for q in CORPUS["queries"] if "shape" in q}
    assert len(shapes) == 15 and list(clouds.values()) == [15, 15], clouds
    assert {"granular.yaml", "granular-same-subtree.yaml", "same-subtree-deep.yaml"} <= set(
        upstream
    )
    assert sum(upstream.values()) >= 140, upstream
