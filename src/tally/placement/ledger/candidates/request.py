"""What a GET /allocation_candidates asks for: request groups and request-wide
parameters as plain dataclasses, the search's input. Built from the query
string at the edge (`placement.candidate_query`); the ledger takes them as
they are.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class RequestGroup:
    """One request group. The unsuffixed group (suffix '') may be satisfied by
    several providers of one tree plus sharing providers; a suffixed group by
    exactly one provider."""

    suffix: str
    resources: dict[str, int] = dataclasses.field(default_factory=dict)
    required: list[frozenset[str]] = dataclasses.field(default_factory=list)  # AND of ORs
    forbidden: frozenset[str] = frozenset()
    member_of: list[frozenset[str]] = dataclasses.field(default_factory=list)  # AND of ORs
    forbidden_aggs: frozenset[str] = frozenset()
    in_tree: str | None = None

    @property
    def use_same_provider(self) -> bool:
        return bool(self.suffix)


@dataclasses.dataclass
class CandidateRequest:
    groups: list[RequestGroup]
    limit: int | None = None
    group_policy: str | None = None  # 'isolate' separates the providers of suffixed groups
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    same_subtrees: list[frozenset[str]] = dataclasses.field(default_factory=list)
    nested_aware: bool = True  # before 1.29 one tree gives at most one provider
    all_summary_classes: bool = True  # before 1.27 summaries show requested classes only

    @property
    def isolate(self) -> bool:
        return self.group_policy == "isolate"

    def requested_classes(self) -> set[str]:
        return set().union(*(g.resources for g in self.groups))
