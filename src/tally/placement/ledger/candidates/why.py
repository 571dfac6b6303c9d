"""Why no tree fits ("No valid host was found"), from what the search reads.

The request is cut into its constraints as the query spells them (each class of
each group, each required trait or any-of set, each forbidden trait, each
member_of, forbidden aggregate and in_tree, each root_required trait; then
group_policy, same_subtree and each group as a whole). Each one alone is judged
per provider tree with the search's own predicates (`Source.fitting` for
capacity, min_unit, max_unit and step_size; the trait, aggregate and sharing
sets), so it rules out a tree only where no answer could have used that tree.
A tree is in `fits` when the search itself anchors a candidate there.

In one tree T, a group g may use T's providers and the sharing providers that
share into T (an unsuffixed group with in_tree: T's own only), its *scope*:

  resources     some provider in scope has the class with room for the amount
  required      some provider in scope holds the trait (or one of an in: set)
  forbidden     for some class, every provider in scope with room holds it
                (a group without resources: every provider meeting its required)
  member_of     some provider in scope is in one of the aggregates (the root
                counts: it is its own tree's)
  !member_of    as forbidden, for the aggregates; the unsuffixed group: or the
                root is in one (not another provider of the tree: upstream leaves
                out a provider in one or under a root in one)
  in_tree       T is the named tree (a suffixed group: or a sharing provider of
                it shares into T)
  root_*        T's root holds (lacks) the trait

group_policy=isolate and same_subtree rule out the trees that fit without them;
a group "as a whole" the trees where each of its constraints holds alone but not
all at once. The closest misses are the trees failing the fewest constraints,
then missing the least of the classes asked.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from tally.placement.ledger.candidates import search
from tally.placement.ledger.candidates.options import Options
from tally.placement.ledger.candidates.request import CandidateRequest, RequestGroup
from tally.placement.ledger.candidates.snapshot import Stock
from tally.placement.ledger.candidates.source import Source

CLOSEST = 5  # closest misses shown


@dataclasses.dataclass(frozen=True)
class Constraint:
    """One constraint and the trees it rules out on its own."""

    text: str  # as the query spells it, e.g. `resources1=VCPU:4`
    kind: str  # resources, required, forbidden, member_of, ... (see the module)
    group: str | None  # the group's suffix ('' unsuffixed); None: request-wide
    ruled_out: frozenset[int]  # root provider ids
    asked: int = 0  # of a class (resources only)
    # ... and per tree it rules out, the most free on one provider in its scope
    free: dict[int, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Miss:
    root: int
    reasons: tuple[str, ...]
    distance: float  # constraints failed, plus the share missing of each class


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What `explain` found: ids of trees (the caller names them)."""

    candidates: int  # the search's candidates, without a limit
    trees: int
    fits: frozenset[int]  # roots that anchor a candidate
    constraints: tuple[Constraint, ...]
    closest: tuple[Miss, ...]

    @property
    def dominant(self) -> Constraint | None:
        """The constraint ruling out the most trees (the first in query order on a tie)."""
        ruling = [c for c in self.constraints if c.ruled_out]
        return max(ruling, key=lambda c: len(c.ruled_out)) if ruling else None

    def as_dict(self, uuid_of: Callable[[int], str], name_of: Callable[[int], str | None]) -> dict:
        dominant = self.dominant
        return {
            "candidates": self.candidates,
            "trees": self.trees,
            "fits": len(self.fits),
            "dominant": dominant.text if dominant else None,
            "constraints": [
                {
                    "constraint": c.text,
                    "kind": c.kind,
                    "group": c.group,
                    "rules_out": len(c.ruled_out),
                }
                for c in self.constraints
            ],
            "closest": [
                {
                    "root": uuid_of(miss.root),
                    "name": name_of(miss.root),
                    "reasons": list(miss.reasons),
                    "distance": round(miss.distance, 4),
                }
                for miss in self.closest
            ],
        }


def explain(
    source: Source, request: CandidateRequest, options: Options, found_none: bool = False
) -> Verdict:
    """The verdict of `request` on `source` (400 as the search for an unknown class
    or trait: it runs first). `found_none`: the search of this request just found
    nothing on this same `source` (no tree fits: it is not run again)."""
    whole = dataclasses.replace(request, limit=None)
    options = dataclasses.replace(options, max_candidates=-1, randomize=False)
    count, fits = (0, set()) if found_none else _anchors(source, whole, options)
    judge = _Judge(source, whole)
    constraints = judge.one_by_one()
    constraints += judge.together(fits, constraints, lambda r: _anchors(source, r, options)[1])
    closest = [_miss(root, constraints) for root in _closest(judge.roots, fits, constraints)]
    return Verdict(count, len(judge.roots), frozenset(fits), tuple(constraints), tuple(closest))


def _anchors(source: Source, request: CandidateRequest, options: Options) -> tuple[int, set[int]]:
    """How many candidates the search finds, and the trees that anchor one."""
    _, found = search.run(source.fresh(), request, options, by_anchor=True)
    if not found:
        return 0, set()
    owners, candidates = found
    return len(set(candidates)), set(owners)  # (a sharing-only one comes per tree)


def _closest(roots: list[int], fits: set[int], constraints: list[Constraint]) -> list[int]:
    """The CLOSEST trees that miss, by distance (constraints failed, plus the
    share missing of each class), then id."""
    distance: Counter[int] = Counter()  # (counts, then fractions added)
    for c in constraints:
        distance.update(c.ruled_out)
    for c in constraints:
        if c.asked:  # (in place: the loop over every tree a class rules out is the cost)
            asked, free = c.asked, c.free.get
            for root in c.ruled_out:
                left = free(root, 0)
                if left < asked:
                    distance[root] += (asked - left) / asked
    missed = [root for root in roots if root not in fits]
    ranked = zip(map(distance.__getitem__, missed), missed, strict=True)  # (no key per tree)
    return [root for _, root in heapq.nsmallest(CLOSEST, ranked)]


def _miss(root: int, constraints: list[Constraint]) -> Miss:
    reasons, distance = [], 0.0
    for c in constraints:
        if root not in c.ruled_out:
            continue
        distance += 1
        if c.asked:
            free = c.free.get(root, 0)
            distance += max(c.asked - free, 0) / c.asked
            why = f"{free} free at most" if free < c.asked else "not within its unit limits"
            reasons.append(f"{c.text}: {why}")
        else:
            reasons.append(f"{c.text}: not met")
    return Miss(root, tuple(reasons), distance)


class _Judge:
    """Each constraint of one request judged alone, per tree."""

    def __init__(self, source: Source, request: CandidateRequest) -> None:
        self.source, self.request = source, request
        self.names, self.root_ok, self.holders, self.sharing = search.read_basics(source, request)
        self.roots = source.sorted_roots()
        self.every = frozenset(self.roots)
        self.shared_into = source.sharing_anchors(self.sharing) if self.sharing else {}
        self._stock: dict[int, list[Stock]] = {}
        self._most_free: dict[tuple[int, bool], tuple[list[Stock], dict[int, int]]] = {}

    # -- trees from providers -------------------------------------------------

    def root_of(self, providers: Iterable[int]) -> dict[int, int]:
        held = self.source.root_of()
        providers = list(providers)
        if held is None:
            self.source.load_providers(providers)
            rows = self.source.rows
            return {rp: rows[rp][2] for rp in providers}
        return {rp: held[rp] for rp in providers}

    def trees_of(self, providers: Iterable[int], group: RequestGroup) -> set[int]:
        """The trees whose scope for `group` holds one of these providers."""
        providers = set(providers)
        found = set(self.root_of(providers).values())
        if not (group.in_tree and not group.use_same_provider):
            for sp in providers & self.sharing:
                found |= self.shared_into.get(sp, set())
        return found

    def stock(self, rc: int, tree: int | None) -> list[Stock]:
        if rc not in self._stock:
            self._stock[rc] = self.source.stock([rc]).get(rc, [])
        rows = self._stock[rc]
        return rows if tree is None else [s for s in rows if s[1] == tree]

    # -- the constraints --------------------------------------------------------

    def one_by_one(self) -> list[Constraint]:
        found: list[Constraint] = []
        for group in self.request.groups:
            found += self._group(group)
        for name in sorted(self.request.root_required):
            ok = self.source.roots_with_traits({self.names.traits[name]}, set())
            found.append(self._rule(f"root_required={name}", "root_required", None, ok))
        for name in sorted(self.request.root_forbidden):
            ok = self.source.roots_with_traits(set(), {self.names.traits[name]})
            found.append(self._rule(f"root_required=!{name}", "root_forbidden", None, ok))
        return found

    def _rule(
        self, text: str, kind: str, group: str | None, ok: set[int], **extra: Any
    ) -> Constraint:
        return Constraint(text, kind, group, self.every - ok, **extra)

    def _group(self, group: RequestGroup) -> list[Constraint]:
        names, s = self.names, group.suffix
        tree = names.tree_roots.get(group.in_tree) if group.in_tree else None
        found = []
        options: list[set[int]] = []  # per class: the providers with room
        for name, amount in group.resources.items():
            rc = names.classes[name]
            rows = self.stock(rc, tree if group.in_tree else None)
            fit = {row[0] for row in self.source.fitting(rc, rows, amount)}
            options.append(fit)
            ok = self.trees_of(fit, group)
            text = f"resources{s}={name}:{amount}"
            free = self._free(rows, group) if len(ok) < len(self.every) else {}
            found.append(self._rule(text, "resources", s, ok, asked=amount, free=free))
        for any_of in group.required:
            holding = set().union(*(self.holders.get(names.traits[t], ()) for t in any_of))
            text = ",".join(sorted(any_of))
            text = f"in:{text}" if len(any_of) > 1 else text
            ok = self.trees_of(self._in(holding, tree, group), group)
            found.append(self._rule(f"required{s}={text}", "required", s, ok))
        if not options:  # a group without resources: the providers meeting its required
            options = [self._meeting(group, tree)]
        for name in sorted(group.forbidden):
            held = self.holders.get(names.traits[name], set())
            ok = self._some_option_without(options, held, group)
            found.append(self._rule(f"required{s}=!{name}", "forbidden", s, ok))
        for any_of in group.member_of:
            text = ",".join(sorted(any_of))
            text = f"in:{text}" if len(any_of) > 1 else text
            ok = self.trees_of(self._in(names.in_any(any_of), tree, group), group)
            found.append(self._rule(f"member_of{s}={text}", "member_of", s, ok))
        if group.forbidden_aggs:
            bad = names.in_any(group.forbidden_aggs)
            ok = self._some_option_without(options, bad, group)
            if not group.use_same_provider:
                ok -= bad & self.every  # (a root in one: its whole tree)
            text = ",".join(sorted(group.forbidden_aggs))
            text = f"!in:{text}" if len(group.forbidden_aggs) > 1 else f"!{text}"
            found.append(self._rule(f"member_of{s}={text}", "forbidden_aggregates", s, ok))
        if group.in_tree:
            ok = set() if tree is None else {tree}
            if tree is not None and group.use_same_provider:
                in_tree = [sp for sp in self.sharing if self.root_of([sp])[sp] == tree]
                ok |= set().union(*(self.shared_into.get(sp, set()) for sp in in_tree))
            found.append(self._rule(f"in_tree{s}={group.in_tree}", "in_tree", s, ok))
        return found

    def _in(self, providers: set[int], tree: int | None, group: RequestGroup) -> set[int]:
        """Those of `providers` a group with in_tree may use (all without)."""
        if tree is None or not group.in_tree:
            return providers
        return {rp for rp, root in self.root_of(providers).items() if root == tree}

    def _meeting(self, group: RequestGroup, tree: int | None) -> set[int]:
        """The providers meeting every required set of a group without resources."""
        names = self.names
        sets = [
            set().union(*(self.holders.get(names.traits[t], ()) for t in any_of))
            for any_of in group.required
        ]
        if not sets:  # no positive filter: any provider of any tree
            sets = [self.source.tree_members(self.roots)]
        return self._in(set.intersection(*sets), tree, group)

    def _some_option_without(
        self, options: list[set[int]], excluded: set[int], group: RequestGroup
    ) -> set[int]:
        """The trees where, for every class, a provider with room is not excluded
        (or where no provider has room: another constraint says so)."""
        ok = set(self.every)
        for fit in options:
            ok -= self.trees_of(fit, group) - self.trees_of(fit - excluded, group)
        return ok

    def _free(self, rows: list[Stock], group: RequestGroup) -> dict[int, int]:
        """Per tree: the most free of the class on one provider in the group's
        scope (kept: granular groups often ask the same classes)."""
        shared = bool(self.sharing) and not (group.in_tree and not group.use_same_provider)
        key = (id(rows), shared)
        if key not in self._most_free:
            best: dict[int, int] = {}
            get = best.get
            for row in rows:
                free = row[2] - row[3]
                if free > get(row[1], 0):
                    best[row[1]] = free
            if shared:
                for row in rows:
                    if row[0] in self.sharing:
                        free = row[2] - row[3]
                        for tree in self.shared_into.get(row[0], ()):
                            if free > get(tree, 0):
                                best[tree] = free
            self._most_free[key] = rows, best  # (rows kept: their id is not reused)
        return self._most_free[key][1]

    def together(
        self,
        fits: set[int],
        alone: list[Constraint],
        anchors: Callable[[CandidateRequest], set[int]],
    ) -> list[Constraint]:
        """group_policy, same_subtree, and each group as a whole: the trees that
        fit without the first two, and where a group's constraints hold one by one
        but not at once."""
        request, found = self.request, []
        if request.isolate and len(request.groups) > 1:
            loose = anchors(dataclasses.replace(request, group_policy="none"))
            ok = self.every - (loose - fits)
            found.append(self._rule("group_policy=isolate", "group_policy", None, ok))
        for subtree in request.same_subtrees:
            others = [s for s in request.same_subtrees if s != subtree]
            loose = anchors(dataclasses.replace(request, same_subtrees=others))
            text = f"same_subtree={','.join(sorted(subtree))}"
            found.append(self._rule(text, "same_subtree", None, self.every - (loose - fits)))
        unexplained = self.every - fits - set().union(*(c.ruled_out for c in alone + found))
        left = set(unexplained)
        for group in request.groups if unexplained else ():
            lone = dataclasses.replace(
                request, groups=[group], group_policy="none", same_subtrees=[]
            )
            failing = unexplained - anchors(lone)
            left -= failing
            if failing:
                named = f"`{group.suffix}`" if group.suffix else "without suffix"
                text = f"the group {named} as a whole"
                found.append(self._rule(text, "together", group.suffix, self.every - failing))
        if left:
            found.append(self._rule("the groups together", "together", None, self.every - left))
        return found
