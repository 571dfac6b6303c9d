"""What the page shows, as plain data read through the Placement API (a
PlacementClient, as the CLI reads it): the provider list with its filters and sort,
one provider's page, and the shape typed in the capacity box. Rendering is
`tally.ui.render`'s job.

The numbers are the API's: capacity is `int((total - reserved) * allocation_ratio)`
of `GET .../inventories` (as `GET /allocation_candidates` and the capacity guard
count it), used is `GET .../usages`, reserved is the inventory's. A provider is over
capacity when some class has used > capacity. The list reads every provider's
amounts in one request (`GET /tally/v1/amounts`); a provider's page, its own.
"""

from __future__ import annotations

import dataclasses
import math
import re
import urllib.parse
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any

from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient
from tally.doctor.inventory_check import capacity
from tally.ui import seams

MAX_ROWS = 1000  # provider rows on one page; the filters narrow the rest
HISTORY_LIMIT = 200  # events read for a provider's page
SORTS = {"name": "name", "fullness": "fullest first"}
MAX_PARAM = 255  # characters of one GET parameter
_TRAIT = re.compile(r"[A-Z0-9_]+")
_UUID = re.compile(r"[0-9a-f]{8}(-?[0-9a-f]{4}){3}-?[0-9a-f]{12}", re.ASCII | re.IGNORECASE)


def is_uuid(text: str) -> bool:
    """Whether `text` is spelled as a uuid (hex digits, hyphens optional)."""
    return _UUID.fullmatch(text) is not None


@dataclasses.dataclass(frozen=True)
class Provider:
    """A provider as `GET /resource_providers` gives it."""

    uuid: str
    name: str
    generation: int
    parent_provider_uuid: str | None
    root_provider_uuid: str

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Provider:
        return cls(
            body["uuid"],
            body["name"],
            body["generation"],
            body.get("parent_provider_uuid"),
            body.get("root_provider_uuid") or body["uuid"],
        )


@dataclasses.dataclass(frozen=True)
class Amount:
    """One resource class of one provider: what a bar shows."""

    resource_class: str
    used: int
    reserved: int
    capacity: int
    total: int | None = None  # shown on a provider's page only
    allocation_ratio: float | None = None
    min_unit: int | None = None
    max_unit: int | None = None
    step_size: int | None = None

    @property
    def fraction(self) -> float:
        """used / capacity; inf when something is used of no capacity."""
        if self.capacity > 0:
            return self.used / self.capacity
        return math.inf if self.used > 0 else 0.0

    @property
    def over(self) -> bool:
        return self.used > self.capacity

    @property
    def free(self) -> int:
        return self.capacity - self.used


@dataclasses.dataclass(frozen=True)
class Row:
    """One provider of the list."""

    uuid: str
    name: str
    parent_uuid: str | None
    root_uuid: str
    amounts: tuple[Amount, ...]

    @property
    def fullness(self) -> float:
        return max((a.fraction for a in self.amounts), default=0.0)

    @property
    def over(self) -> bool:
        return any(a.over for a in self.amounts)


@dataclasses.dataclass(frozen=True)
class Query:
    """The list's GET parameters: filters, sort, and the capacity box's shape, with
    what is wrong with them (`problems`, each naming its parameter: the page answers
    400). The shape is read apart, by the capacity box (`tally.nova.shapes`)."""

    name: str = ""
    aggregate: str = ""
    trait: str = ""
    sort: str = "name"
    shape: str = ""
    problems: tuple[str, ...] = ()

    @classmethod
    def from_params(cls, params: Mapping[str, str | list[str]], raw: str = "") -> Query:
        """The query of `params` (decoded), checked; `raw` is the query string as
        sent, whose bytes must be UTF-8 (as the API asks)."""
        problems: list[str] = []
        try:
            urllib.parse.unquote_to_bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            problems.append("the query string is not UTF-8")

        def one(key: str) -> str:
            value = params.get(key, "")
            value = (value[-1] if isinstance(value, list) else value).strip()
            text = "".join(ch for ch in value if ch.isprintable())
            if text != value:
                problems.append(f"{key}: control characters are not allowed")
            if len(text) > MAX_PARAM:
                problems.append(f"{key}: at most {MAX_PARAM} characters ({len(text)} given)")
            return text[:MAX_PARAM]

        name, aggregate, trait, sort, shape = map(
            one, ("name", "aggregate", "trait", "sort", "shape")
        )
        if aggregate:
            try:  # any spelling the API takes, used lower-case and hyphenated
                aggregate = str(uuidlib.UUID(aggregate))
            except ValueError:
                problems.append(f"aggregate: {aggregate!r} is not a uuid")
        if trait and not _TRAIT.fullmatch(trait):
            problems.append(f"trait: {trait!r} is not a trait name (A-Z, 0-9 and _)")
        if sort and sort not in SORTS:
            problems.append(f"sort: {sort!r} is not one of {', '.join(SORTS)}")
        sort = sort if sort in SORTS else "name"
        return cls(name, aggregate, trait, sort, shape, tuple(problems))

    def params(self, **change: str) -> dict[str, str]:
        """The non-empty parameters, with `change` applied (for links)."""
        values = {**dataclasses.asdict(self), **change}
        values.pop("problems")
        return {k: v for k, v in values.items() if v and not (k == "sort" and v == "name")}


@dataclasses.dataclass(frozen=True)
class Overview:
    rows: list[Row]
    matched: int  # before MAX_ROWS
    notice: str | None = None  # why nothing matched, when the filter itself was wrong
    refused: bool = False  # a parameter could not be used: the page answers 400


def by_name(item: Row | Provider) -> tuple[str, str]:
    """The list's order by name: any case, then uuid."""
    return item.name.casefold(), item.uuid


def sort_rows(rows: list[Row], sort: str) -> list[Row]:
    if sort == "fullness":
        return sorted(rows, key=lambda r: (-r.fullness, *by_name(r)))
    return sorted(rows, key=by_name)


def name_matches(name: str, wanted: str) -> bool:
    """The name filter: a case-insensitive substring."""
    return wanted.casefold() in name.casefold()


def amounts(client: PlacementClient, uuid: str) -> list[Amount]:
    """One provider's amounts per class, by class name: `GET .../inventories`, and
    `GET .../usages` when there is any."""
    records = client.inventories(uuid)["inventories"]
    used = client.usages(uuid) if records else {}
    return [
        Amount(
            rc,
            used.get(rc, 0),
            r.get("reserved", 0),
            capacity(r),
            r.get("total"),
            r.get("allocation_ratio"),
            r.get("min_unit"),
            r.get("max_unit"),
            r.get("step_size"),
        )
        for rc, r in sorted(records.items())
    ]


def every_amount(client: PlacementClient) -> dict[str, tuple[Amount, ...]]:
    """Every provider's amounts per class, in one request (`GET /tally/v1/amounts`,
    Tally's own: Placement answers one provider a request)."""
    return {
        uuid: tuple(
            Amount(rc, a["used"], a["reserved"], a["capacity"]) for rc, a in sorted(per.items())
        )
        for uuid, per in client.amounts().items()
    }


def overview(client: PlacementClient, query: Query) -> Overview:
    if query.problems:
        return Overview([], 0, "Cannot list providers: " + "; ".join(query.problems) + ".", True)
    wanted = {"required": query.trait or None, "member_of": query.aggregate or None}
    try:
        listed = client.get("/resource_providers", wanted)["resource_providers"]
    except PlacementError as exc:  # an unknown trait: say so above an empty list
        if exc.status != 400:
            raise
        return Overview([], 0, exc.detail, refused=True)
    found = [Provider.of(p) for p in listed if name_matches(p["name"], query.name)]
    if query.sort == "name":
        found.sort(key=by_name)  # the amounts read are those of the rows shown
    read = every_amount(client) if found else {}
    rows = [
        Row(p.uuid, p.name, p.parent_provider_uuid, p.root_provider_uuid, read.get(p.uuid, ()))
        for p in found
    ]
    rows = sort_rows(rows, query.sort)
    return Overview(rows[:MAX_ROWS], len(rows), None)


@dataclasses.dataclass(frozen=True)
class ConsumerRow:
    """A consumer with allocations on the provider: one row of its Consumers table."""

    consumer: str
    resources: Mapping[str, int]  # on this provider
    consumer_type: str | None
    project_id: str | None
    user_id: str | None
    since: seams.HistoryEvent | None = None  # from the history, when there is one
    since_complete: bool = True  # False: the run began before the events read


@dataclasses.dataclass(frozen=True)
class ProviderView:
    provider: Provider
    parent_name: str | None
    root_name: str
    tree: list[Provider]  # every provider of its tree (itself included)
    amounts: list[Amount]
    traits: list[str]
    aggregates: list[str]
    holders: list[ConsumerRow]
    history: list[seams.HistoryEvent] | None  # None: no history in this build

    @property
    def over(self) -> bool:
        return any(a.over for a in self.amounts)


def provider_view(
    client: PlacementClient, uuid: str, history: seams.HistorySeam = seams.provider_history
) -> ProviderView:
    """One provider's page; a PlacementError 404 for an unknown uuid. Each part is
    one request, as a client reads it (a write between them may show)."""
    provider = Provider.of(client.get(f"/resource_providers/{urllib.parse.quote(uuid, safe='')}"))
    uuid, at = provider.uuid, f"/resource_providers/{provider.uuid}"
    tree = [
        Provider.of(p)
        for p in client.get("/resource_providers", {"in_tree": uuid})["resource_providers"]
    ]
    names = {p.uuid: p.name for p in tree}
    events = history(client, uuid, HISTORY_LIMIT)
    holders = []
    for consumer, held in client.provider_allocations(uuid).items():
        owner = client.consumer_allocations(consumer)
        since = seams.holding_since(events, consumer, held) if events else None
        holders.append(
            ConsumerRow(
                consumer,
                held,
                owner.get("consumer_type"),
                owner.get("project_id"),
                owner.get("user_id"),
                since[0] if since else None,
                since[1] if since else True,
            )
        )
    return ProviderView(
        provider,
        names.get(provider.parent_provider_uuid or ""),
        names.get(provider.root_provider_uuid, provider.name),
        tree,
        amounts(client, uuid),
        sorted(client.get(f"{at}/traits")["traits"]),
        sorted(client.get(f"{at}/aggregates")["aggregates"]),
        holders,
        events,
    )
