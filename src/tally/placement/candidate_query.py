"""Parsing of the query string of GET /allocation_candidates into the search's
request (`ledger.candidates.request`): request groups and request-wide
parameters, from the query parameters (a dict of key -> list of values,
already validated for shape by `schemas.candidates`). The grammar of each
parameter's values (resources, required, member_of, in_tree) is parsed by
`placement.queryparams`, shared with GET /resource_providers.

The checks and their messages follow upstream Placement, in the same order, so
that a request with several mistakes is refused for the same one.
"""

from __future__ import annotations

import re

from tally.placement import errors as codes
from tally.placement import queryparams
from tally.placement.error_types import BadRequest
from tally.placement.ledger.candidates.request import CandidateRequest, RequestGroup

# Microversions that changed how the query reads.
NESTED_AWARE = (1, 29)  # before 1.29 one tree gives at most one provider
ALL_SUMMARY_CLASSES = (1, 27)  # before 1.27 summaries show requested classes only
NAMED_SUFFIXES = (1, 33)  # group suffixes may be names, not only numbers
SAME_SUBTREE = (1, 36)  # `same_subtree`, and groups without resources

_PREFIXES = "resources|required|member_of|in_tree"
_KEY_NUMBERED = re.compile(rf"({_PREFIXES})([1-9][0-9]*)?")  # fullmatch
_KEY_NAMED = re.compile(rf"({_PREFIXES})([a-zA-Z0-9_-]{{1,64}})?")


def parse_query(params: dict[str, list[str]], version: tuple[int, int]) -> CandidateRequest:
    """The request, or 400 naming the first problem (as upstream orders them)."""
    request = CandidateRequest(
        groups=[],
        limit=_limit(params.get("limit")),
        group_policy=(params.get("group_policy") or [None])[0],
        nested_aware=version >= NESTED_AWARE,
        all_summary_classes=version >= ALL_SUMMARY_CLASSES,
    )
    if "root_required" in params:
        request.root_required, request.root_forbidden = _root_required(params["root_required"])
    request.same_subtrees = [_same_subtree(v) for v in params.get("same_subtree", [])]
    request.groups = _groups(params, version)
    if version >= SAME_SUBTREE:
        _check_resourceless(request)
    else:
        _check_orphans(request.groups)
    if version >= queryparams.FORBIDDEN_TRAITS:
        _check_conflicts(request.groups)
    if not request.group_policy and sum(g.use_same_provider for g in request.groups) > 1:
        raise BadRequest(
            'The "group_policy" parameter is required when specifying more than one '
            '"resources{N}" parameter.'
        )
    return request


def _limit(values: list[str] | None) -> int | None:
    """The first `limit` counts (the schema checked the last one). A limit past any
    possible count means no limit, as upstream reads it (never refused: it is only
    ever compared in Python, never sent to the database)."""
    if not values:
        return None
    if not re.fullmatch(r"[1-9][0-9]*", values[0]):
        raise BadRequest(
            f"Invalid query string parameters: {values[0]!r} does not match '^[1-9][0-9]*$'. "
            "Failed validating 'pattern' in schema['properties']['limit']"
        )
    return int(values[0]) if len(values[0]) <= 12 else 10**12


def _root_required(values: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    if len(values) > 1:
        raise BadRequest(
            "Query parameter 'root_required' may be specified only once.",
            code=codes.ILLEGAL_DUPLICATE_QUERYPARAM,
        )
    required, forbidden = queryparams.parse_flat_traits(values[0])
    conflicts = required & forbidden
    if conflicts:
        raise BadRequest(
            "Conflicting required and forbidden traits found in root_required: "
            + ", ".join(sorted(conflicts)),
            code=codes.QUERYPARAM_BAD_VALUE,
        )
    return frozenset(required), frozenset(forbidden)


def _same_subtree(value: str) -> frozenset[str]:
    suffixes = frozenset(part.strip() for part in value.split(","))
    if "" in suffixes:
        raise BadRequest(
            "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
            code=codes.QUERYPARAM_BAD_VALUE,
        )
    return suffixes


def _groups(params: dict[str, list[str]], version: tuple[int, int]) -> list[RequestGroup]:
    """Groups in the order their first key appears in the query string."""
    pattern = _KEY_NAMED if version >= NAMED_SUFFIXES else _KEY_NUMBERED
    by_suffix: dict[str, RequestGroup] = {}
    for key, values in params.items():
        match = pattern.fullmatch(key)
        if not match:
            continue
        prefix, suffix = match.group(1), match.group(2) or ""
        group = by_suffix.setdefault(suffix, RequestGroup(suffix))
        if prefix == "resources":
            for value in values:
                group.resources = queryparams.parse_resources(value)
        elif prefix == "required":
            traits = queryparams.parse_required(values, version)
            group.required, group.forbidden = list(traits.required), traits.forbidden
        elif prefix == "member_of":
            aggs = queryparams.parse_member_of(values, version, suffix)
            group.member_of, group.forbidden_aggs = list(aggs.required), aggs.forbidden
        else:
            for value in values:
                group.in_tree = queryparams.parse_in_tree(value)
    return list(by_suffix.values())


def _check_resourceless(request: CandidateRequest) -> None:
    """From 1.36 a group without resources is fine if `same_subtree` ties it to others."""
    groups = request.groups
    resourceless = [g.suffix for g in groups if not g.resources]
    if len(resourceless) == len(groups):
        raise BadRequest(
            "There must be at least one resources or resources[$S] parameter.",
            code=codes.QUERYPARAM_MISSING_VALUE,
        )
    tied = set().union(*request.same_subtrees)
    loose = [s for s in resourceless if s not in tied]
    if loose:
        raise BadRequest(
            "Resourceless suffixed group request should be specified in `same_subtree` "
            f"query param: bad group(s) - {loose}.",
            code=codes.QUERYPARAM_BAD_VALUE,
        )
    known = [g.suffix for g in groups]
    unknown = [s for s in sorted(tied) if s not in known]
    if unknown:
        raise BadRequest(
            f"Real suffixes should be specified in `same_subtree`: {unknown} not found in {known}.",
            code=codes.QUERYPARAM_BAD_VALUE,
        )


def _check_orphans(groups: list[RequestGroup]) -> None:
    """Before 1.36 every group needs resources."""
    orphans = [f"required{g.suffix}" for g in groups if g.required and not g.resources]
    if orphans:
        raise BadRequest(
            "All traits parameters must be associated with resources.  Found the following "
            "orphaned traits keys: " + ", ".join(orphans)
        )
    orphans = [
        f"member_of{g.suffix}"
        for g in groups
        if not g.resources and (g.member_of or g.forbidden_aggs)
    ]
    if orphans:
        raise BadRequest(
            "All member_of parameters must be associated with resources. Found the "
            "following orphaned member_of keys: " + ", ".join(orphans)
        )
    if not all(g.resources for g in groups):
        raise BadRequest("All request groups must specify resources.")
    if not groups:
        raise BadRequest("At least one request group (`resources` or `resources{$S}`) is required.")


def _check_conflicts(groups: list[RequestGroup]) -> None:
    conflicts = sorted(
        f"required{g.suffix}: ({', '.join(sorted(any_of))})"
        for g in groups
        for any_of in g.required
        if any_of <= g.forbidden
    )
    if conflicts:
        raise BadRequest(
            "Conflicting required and forbidden traits found in the following traits keys: "
            + ", ".join(conflicts)
        )
