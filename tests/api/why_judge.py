"""A brute-force judge of GET /tally/v1/allocation_candidates/why, written from
the API's own state (providers, inventories, usages, traits, aggregates) alone,
and `check`, which holds one query's verdict (the API's, and the ledger's on the
tables and on the index) to it: every constraint rules out exactly the trees the
judge says and no tree the search fits, the closest misses are the judge's, and
the trees said to fit are those of the answer. Shared by tests/api/test_why.py
(seeded random clouds and queries) and tests/api/test_why_corpus.py (upstream's
functional suite and the perf workload's shapes)."""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections import defaultdict

from tally.db.transaction import transaction
from tally.placement.candidate_query import parse_query
from tally.placement.ledger.candidates import Index, Options
from tally.placement.ledger.candidates import view as views
from tally.placement.ledger.candidates import why as why_module
from tally.placement.ledger.candidates.snapshot import Snapshot

SHARING = "MISC_SHARES_VIA_AGGREGATE"


def names(value: str) -> list[str]:
    """A comma-separated value's names (blanks around them do not count)."""
    return [name.strip() for name in value.split(",")]


def any_of(value: str) -> set[str]:
    """`in:A,B` or `A`: the names one of which is asked."""
    return set(names(value[3:])) if value.startswith("in:") else {value.strip()}


def spelled(names: set[str], prefix: str = "") -> str:
    """How the verdict spells a set: `A`, or `in:A,B` (sorted)."""
    text = ",".join(sorted(names))
    return f"{prefix}in:{text}" if len(names) > 1 else f"{prefix}{text}"


class Books:
    """The cloud as the API shows it, and the constraints judged from it alone."""

    def __init__(self, client) -> None:  # noqa: ANN001
        listed = client.simulate_get("/resource_providers").json["resource_providers"]
        self.root = {p["uuid"]: p["root_provider_uuid"] for p in listed}
        self.roots = sorted({p["root_provider_uuid"] for p in listed})
        self.inv, self.traits, self.aggs = {}, {}, {}
        for p in listed:
            u = p["uuid"]
            self.read_inventories(client, u)
            self.traits[u] = set(
                client.simulate_get(f"/resource_providers/{u}/traits").json["traits"]
            )
            self.aggs[u] = set(
                client.simulate_get(f"/resource_providers/{u}/aggregates").json["aggregates"]
            )
        members = defaultdict(set)
        for u, aggs in self.aggs.items():
            for agg in aggs:
                members[agg].add(u)
        self.members = members
        self.sharing = {u for u, traits in self.traits.items() if SHARING in traits}
        self.into = {
            sp: {self.root[m] for agg in self.aggs[sp] for m in members[agg]} for sp in self.sharing
        }

    def read_inventories(self, client, u: str) -> None:  # noqa: ANN001
        """(Again, after inventories changed.) class -> (capacity, used, inventory)."""
        inventories = client.simulate_get(f"/resource_providers/{u}/inventories").json
        usages = client.simulate_get(f"/resource_providers/{u}/usages").json["usages"]
        self.inv[u] = {
            rc: (int((i["total"] - i["reserved"]) * i["allocation_ratio"]), usages.get(rc, 0), i)
            for rc, i in inventories["inventories"].items()
        }

    def scope(self, tree: str, suffixed: bool, in_tree: str | None) -> set[str]:
        own = {u for u, r in self.root.items() if r == tree}
        if in_tree is not None and not suffixed:
            named = self.root.get(in_tree)
            return {u for u in own if self.root[u] == named}
        found = own | {sp for sp in self.sharing if tree in self.into[sp]}
        if in_tree is not None:
            named = self.root.get(in_tree)
            found = {u for u in found if self.root[u] == named}
        return found

    def room(self, u: str, rc: str, n: int) -> bool:
        if rc not in self.inv[u]:
            return False
        capacity, used, i = self.inv[u][rc]
        return (
            used + n <= capacity and i["min_unit"] <= n <= i["max_unit"] and n % i["step_size"] == 0
        )

    def free(self, scope: set[str], rc: str) -> int:
        return max(
            [max(self.inv[u][rc][0] - self.inv[u][rc][1], 0) for u in scope if rc in self.inv[u]],
            default=0,
        )

    def anchors(self, providers: set[str]) -> set[str]:
        """The trees whose scope holds every one of these providers (of a candidate
        made of sharing providers alone)."""
        found = set(self.roots)
        for u in providers:
            found &= {self.root[u]} | self.into.get(u, set())
        return found

    def judge(self, query: str) -> dict[str, tuple[set[str], dict[str, tuple[int, int]]]]:
        """constraint text -> (trees it rules out, per tree (free at most, asked))."""
        params = urllib.parse.parse_qsl(query)
        groups: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for key, value in params:
            for prefix in ("resources", "required", "member_of", "in_tree"):
                if key.startswith(prefix):
                    groups[key[len(prefix) :]][prefix].append(value.strip())
        found: dict[str, tuple[set[str], dict]] = {}
        for s, g in groups.items():
            in_tree = g["in_tree"][0] if g["in_tree"] else None
            amounts = [
                (rc, int(n))
                for value in g["resources"]
                for rc, n in (p.split(":") for p in names(value))
            ]
            required, forbidden = [], []  # (any-of sets; names)
            for value in g["required"]:
                each = [value] if value.startswith("in:") else names(value)
                required += [any_of(n) for n in each if not n.startswith("!")]
                forbidden += [n[1:] for n in each if n.startswith("!")]
            scopes = {t: self.scope(t, bool(s), in_tree) for t in self.roots}
            options = []  # per class: tree -> providers in scope with room
            for rc, n in amounts:
                fit = {t: {u for u in scopes[t] if self.room(u, rc, n)} for t in self.roots}
                options.append(fit)
                short = {t: (self.free(scopes[t], rc), n) for t in self.roots}
                found[f"resources{s}={rc}:{n}"] = ({t for t in self.roots if not fit[t]}, short)
            for wanted in required:
                out = {t for t in self.roots if not any(self.traits[u] & wanted for u in scopes[t])}
                found[f"required{s}={spelled(wanted)}"] = (out, {})
            if not amounts:  # the providers meeting every required set
                options = [
                    {
                        t: {u for u in scopes[t] if all(self.traits[u] & a for a in required)}
                        for t in self.roots
                    }
                ]
            for trait in forbidden:
                out = {
                    t
                    for t in self.roots
                    for fit in options
                    if fit[t] and all(trait in self.traits[u] for u in fit[t])
                }
                found[f"required{s}=!{trait}"] = (out, {})
            bad: set[str] = set()  # (every `!` aggregate of a group: one constraint)
            for value in g["member_of"]:
                if value.startswith("!"):
                    bad |= any_of(value[1:])
                    continue
                wanted = any_of(value)
                out = {t for t in self.roots if not any(self.aggs[u] & wanted for u in scopes[t])}
                found[f"member_of{s}={spelled(wanted)}"] = (out, {})
            if bad:
                out = {
                    t
                    for t in self.roots
                    for fit in options
                    if fit[t] and all(self.aggs[u] & bad for u in fit[t])
                }
                if not s:
                    out |= {t for t in self.roots if self.aggs[t] & bad}
                found[f"member_of{s}={spelled(bad, '!')}"] = (out, {})
            if in_tree is not None:
                named = self.root.get(in_tree)
                ok = {named}
                if s:
                    ok |= {
                        t for sp in self.sharing if self.root[sp] == named for t in self.into[sp]
                    }
                found[f"in_tree{s}={in_tree}"] = (set(self.roots) - ok, {})
        for key, value in params:
            if key == "root_required":
                for trait in names(value):
                    if trait.startswith("!"):
                        out = {t for t in self.roots if trait[1:] in self.traits[t]}
                    else:
                        out = {t for t in self.roots if trait not in self.traits[t]}
                    found[f"root_required={trait}"] = (out, {})
        return found


def closest(books: Books, judged: dict, extra: dict[str, set[str]], fits: set[str]) -> list:
    """The five closest misses as the module's docstring ranks them."""
    misses = []
    for t in books.roots:
        if t in fits:
            continue
        reasons, distance = [], 0.0
        for text, (out, short) in list(judged.items()) + [(k, (v, {})) for k, v in extra.items()]:
            if t not in out:
                continue
            distance += 1
            if text in judged and text.startswith("resources"):
                free, asked = short[t]
                distance += (asked - free) / asked if free < asked else 0
                why = f"{free} free at most" if free < asked else "not within its unit limits"
                reasons.append(f"{text}: {why}")
            else:
                reasons.append(f"{text}: not met")
        misses.append((distance, t, reasons))
    return misses


def why(client, query: str) -> dict:  # noqa: ANN001
    result = client.simulate_get("/tally/v1/allocation_candidates/why", query_string=query)
    assert result.status_code == 200, (query, result.text)
    return result.json


def verdicts(engine, index: Index, query: str) -> list[tuple[why_module.Verdict, dict]]:  # noqa: ANN001
    """The verdict on the tables and on the index, each with its uuid of each root id."""
    params: dict[str, list[str]] = defaultdict(list)
    for key, value in urllib.parse.parse_qsl(query):
        params[key].append(value)
    request = parse_query(dict(params), (1, 39))
    found = []
    with transaction(engine) as conn:
        snap = Snapshot(conn)
        verdict = why_module.explain(snap, request, Options())
        snap.load_trees(verdict.fits | {r for c in verdict.constraints for r in c.ruled_out})
        found.append((verdict, {rp: row[0] for rp, row in snap.rows.items()}))
    with views.of(index, engine) as view:
        verdict = why_module.explain(view, request, Options())
        found.append((verdict, {rp: row[0] for rp, row in view.rows.items()}))
    return found


@dataclasses.dataclass
class Checked:
    """What `check` found of one query."""

    requests: list[dict]  # the answer's allocation requests (without a limit)
    judged: int  # constraints held to the judge


def unlimited(query: str) -> str:
    """The query without `limit` (the verdict counts every candidate)."""
    kept = [(k, v) for k, v in urllib.parse.parse_qsl(query) if k != "limit"]
    return urllib.parse.urlencode(kept, safe=":,!")


def check(client, engine, index: Index, books: Books, query: str) -> Checked:  # noqa: ANN001
    """One query's verdict (API, tables and index) against the judge."""
    answer = client.simulate_get("/allocation_candidates", query_string=unlimited(query))
    assert answer.status_code == 200, (query, answer.text)
    requests = answer.json["allocation_requests"]
    judged = books.judge(query)
    shown = why(client, query)
    assert (shown["trees"], shown["candidates"]) == (len(books.roots), len(requests)), query
    # The trees of the answer: each candidate's own tree; one made of sharing
    # providers alone may be anchored in any tree they all share into.
    local: set[str] = set()
    shared: list[set[str]] = []
    for r in requests:
        own = set(r["allocations"]) - books.sharing
        if own:
            local |= {books.root[u] for u in own}
        else:
            shared.append(books.anchors(set(r["allocations"])))
    for verdict, uuid_of in verdicts(engine, index, query):
        fits = {uuid_of[rp] for rp in verdict.fits}
        ruled = {c.text: {uuid_of[rp] for rp in c.ruled_out} for c in verdict.constraints}
        for text, (out, _) in judged.items():
            assert ruled.get(text) == out, (query, text)
            assert not out & fits, (query, text)  # no constraint rules out a fitting tree
        extra = {text: out for text, out in ruled.items() if text not in judged}
        kinds = {c.kind for c in verdict.constraints if c.text in extra}
        assert kinds <= {"group_policy", "same_subtree", "together"}, query
        # every tree that misses is ruled out by something
        assert set().union(*ruled.values()) | fits == set(books.roots), query
        # fits: exactly the trees of the answer (those the judge leaves a sharing-only
        # candidate, less those group_policy, same_subtree or a whole group rule out)
        out = set().union(*(out for out, _ in judged.values()), *extra.values())
        assert fits == local | (set().union(*shared) - out), query
        assert local.isdisjoint(out) and all(trees - out for trees in shared), query
        id_of = {u: rp for rp, u in uuid_of.items()}
        misses = sorted(closest(books, judged, extra, fits), key=lambda m: (m[0], id_of[m[1]]))
        assert [(m.root, sorted(m.reasons)) for m in verdict.closest] == [
            (id_of[t], sorted(r)) for _, t, r in misses[:5]
        ], query
    assert [c["rules_out"] for c in shown["constraints"]] == [
        len(c.ruled_out) for c in verdict.constraints
    ]
    assert [m["root"] for m in shown["closest"]] == [uuid_of[m.root] for m in verdict.closest]
    return Checked(requests, len(judged))
