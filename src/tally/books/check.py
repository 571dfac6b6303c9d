"""The ledger's invariants over books read whole (`transfer.Books`): what the API
would never have let in, checked before an import writes anything, and by `tally db
check` on Tally's own database.

A row breaking one (a ratio of 1e308, a parent that does not exist, a step of 0, an
allocation of a class nobody defined) is served badly or not at all: a 500 for every
caller of the candidate search, or a claim that divides by zero. Each kind of fault
is one line: how many rows, and the first few of them.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import sqlalchemy as sa

from tally import names
from tally.books.transfer import Books
from tally.db import schema, tree_rules
from tally.db.row_rules import LOWEST, inventory_fault, whole_in
from tally.db.schema import resource_providers
from tally.progress import Progress, quiet

MAX_NAME = resource_providers.c.name.type.length  # a provider's name, as the API takes it
SHOWN = 3  # offending rows shown per kind


@dataclasses.dataclass
class Fault:
    kind: str
    rows: list[str]

    def line(self) -> str:
        shown = "; ".join(self.rows[:SHOWN]) + ("; ..." if len(self.rows) > SHOWN else "")
        return f"{self.kind}: {len(self.rows)} row(s) ({shown})"


def check(books: Books, progress: Progress = quiet) -> list[Fault]:
    """Every kind of fault found, in the order of the tables (`check rules` step
    after step, as they go)."""
    found: dict[str, list[str]] = {}
    steps = _steps(books.rows)
    for done, step in enumerate(steps):
        progress("check rules", done, len(steps))
        for kind, row in step():
            found.setdefault(kind, []).append(row)
    progress("check rules", len(steps), len(steps))
    return [Fault(kind, rows) for kind, rows in found.items()]


def report(faults: list[Fault], heading: str = "the books break the ledger's rules") -> str:
    """`heading`, then a line per kind of fault."""
    return f"{heading}:\n" + "\n".join(f"  {fault.line()}" for fault in faults)


def repair(books: Books) -> list[str]:
    """The safe fixes an operator wants before an import, made on `books` in memory
    (the source is never written): allocations on providers or of classes that do
    not exist dropped, links to what does not exist dropped, repeated allocation rows
    of one consumer, provider and class kept once (the largest amount, so that no
    usage is under-counted). One line per kind of fix, with counts and the first
    rows; what is left is checked as ever."""
    rows = books.rows
    providers = {r["id"] for r in rows["resource_providers"]}
    classes = {r["id"] for r in rows["resource_classes"]}
    traits = {r["name"] for r in rows["traits"]}
    aggregates = {r["id"] for r in rows["placement_aggregates"]}
    done: list[str] = []

    def keep(table: str, kind: str, sound: Callable[[dict], bool], where: str) -> None:
        dropped = [row for row in rows[table] if not sound(row)]
        if dropped:
            rows[table] = [row for row in rows[table] if sound(row)]
            shown = [where.format(**row) for row in dropped]
            done.append(Fault(f"dropped {kind}", shown).line())

    alloc = "consumer {consumer_id} provider id {resource_provider_id}"
    keep(
        "allocations",
        "allocations on a provider that does not exist",
        lambda a: a["resource_provider_id"] in providers,
        alloc,
    )
    keep(
        "allocations",
        "allocations of a class that does not exist",
        lambda a: a["resource_class_id"] in classes,
        alloc + " class id {resource_class_id}",
    )
    keep(
        "resource_provider_traits",
        "trait links to a provider or trait that does not exist",
        lambda link: link["resource_provider_id"] in providers and link.get("trait") in traits,
        "provider id {resource_provider_id}",
    )
    keep(
        "resource_provider_aggregates",
        "aggregate links to a provider or aggregate that does not exist",
        lambda link: (
            link["resource_provider_id"] in providers and link["aggregate_id"] in aggregates
        ),
        "provider id {resource_provider_id}",
    )
    largest: dict[tuple, dict] = {}
    for row in rows["allocations"]:
        key = (row["consumer_id"], row["resource_provider_id"], row["resource_class_id"])
        kept = largest.get(key)
        if kept is None or _amount(row) > _amount(kept):
            largest[key] = row
    repeated = len(rows["allocations"]) - len(largest)
    if repeated:
        kept_ids = {id(row) for row in largest.values()}
        gone = [r for r in rows["allocations"] if id(r) not in kept_ids]
        rows["allocations"] = [r for r in rows["allocations"] if id(r) in kept_ids]
        shown = [alloc.format(**row) for row in gone]
        done.append(Fault("dropped repeated allocation rows (the largest kept)", shown).line())
    return done


def _amount(row: dict) -> int:
    used = row["used"]
    return used if whole_in(used, 0) else -1


def refusal(faults: list[Fault]) -> str:
    return report(faults, "the books break the ledger's rules; nothing was written")


def _uuid(value: Any) -> bool:
    try:
        return isinstance(value, str) and str(uuidlib.UUID(value)) == value.lower()
    except ValueError:
        return False


Step = Callable[[], Iterable[tuple[str, str]]]


def _steps(rows: dict[str, list[dict]]) -> list[Step]:
    """The checks, one step a table or so: (kind, row) faults each."""
    classes = {r["id"] for r in rows["resource_classes"]}
    traits = {r["name"] for r in rows["traits"]}
    providers = {r["id"]: r for r in rows["resource_providers"]}
    aggregates = {r["id"] for r in rows["placement_aggregates"]}
    consumers = {r["uuid"] for r in rows["consumers"]}
    return [
        lambda: _provider_faults(providers),
        lambda: _inventory_faults(rows["inventories"], providers, classes),
        lambda: _link_faults(rows, providers, traits, aggregates),
        lambda: _consumer_faults(rows["consumers"]),
        lambda: _allocation_faults(rows["allocations"], providers, classes, consumers),
        lambda: _name_faults(rows),
        *(functools.partial(_column_faults, name, table_rows) for name, table_rows in rows.items()),
    ]


def _link_faults(
    rows: dict[str, list[dict]], providers: dict[int, dict], traits: set[str], aggregates: set[int]
) -> Iterator[tuple[str, str]]:
    for link in rows["resource_provider_traits"]:
        where = f"provider id {link['resource_provider_id']}"
        if link["resource_provider_id"] not in providers:
            yield "a trait of a provider that does not exist", where
        if link.get("trait") not in traits:
            yield "a trait link to a trait that does not exist", where
    for link in rows["resource_provider_aggregates"]:
        where = f"provider id {link['resource_provider_id']}"
        if link["resource_provider_id"] not in providers:
            yield "an aggregate of a provider that does not exist", where
        if link["aggregate_id"] not in aggregates:
            yield "a link to an aggregate that does not exist", where


def _consumer_faults(consumers: list[dict]) -> Iterator[tuple[str, str]]:
    for consumer in consumers:
        if not _uuid(consumer["uuid"]):
            yield "a consumer uuid that is not a uuid", repr(consumer["uuid"])


def _name_faults(rows: dict[str, list[dict]]) -> Iterator[tuple[str, str]]:
    """Class and trait names by the API's own rule (`tally.names`)."""
    for row in rows["resource_classes"]:
        why = names.name_fault(row["name"])
        if why:
            yield "a resource class name the API refuses", f"id {row['id']} {row['name']!r}: {why}"
    for row in rows["traits"]:
        why = names.name_fault(row["name"])
        if why:
            yield "a trait name the API refuses", f"{row['name']!r}: {why}"


INT_RANGE = (-(2**31), 2**31 - 1)  # an INTEGER column of the target, on every backend
# Fields whose own rule above says more than "out of range".
_RULED = {("inventories", field) for field in LOWEST} | {
    ("allocations", "used"),
    ("resource_providers", "name"),
    ("resource_providers", "uuid"),
    ("consumers", "uuid"),
}
# What the books call by another name than the table: a trait link names its trait.
_BOOK_KEYS = {"resource_provider_traits": [("resource_provider_id", "trait")]}


def _column_faults(name: str, table_rows: list[dict]) -> Iterator[tuple[str, str]]:
    """What the target's columns of table `name` cannot hold (it would refuse the
    whole copy with a traceback, or hold a number that overflows later): a number
    past an INTEGER, a text past its length, a value repeated in a unique column or
    key."""
    table = getattr(schema, name)
    numbers = [
        c.name
        for c in table.columns
        if isinstance(c.type, sa.Integer) and not isinstance(c.type, sa.BigInteger)
        and (name, c.name) not in _RULED
    ]  # fmt: skip
    texts = [
        (c.name, c.type.length)
        for c in table.columns
        if isinstance(c.type, sa.String) and (name, c.name) not in _RULED
    ]
    for i, row in enumerate(table_rows):
        where = f"{name} {'id ' + str(row['id']) if 'id' in row else 'row ' + str(i + 1)}"
        for field in numbers:
            value = row.get(field)
            if value is not None and not whole_in(value, *INT_RANGE):
                yield "a number out of its column's range", f"{where} {field}={value!r}"
        for field, length in texts:
            value = row.get(field)
            if value is not None and length and len(str(value)) > length:
                yield (
                    "a text longer than its column",
                    f"{where} {field}: {len(str(value))} > {length}",
                )
    yield from _repeats(name, table, table_rows)


def _repeats(name: str, table: sa.Table, table_rows: list[dict]) -> Iterator[tuple[str, str]]:
    keys = [[c.name for c in table.primary_key.columns]]
    keys += [
        [c.name for c in u.columns] for u in table.constraints if isinstance(u, sa.UniqueConstraint)
    ]
    keys += [[c.name] for c in table.columns if c.unique]
    keys += _BOOK_KEYS.get(name, [])
    for key in keys:
        if not table_rows or not all(field in table_rows[0] for field in key):
            continue
        seen = Counter(tuple(row[field] for field in key) for row in table_rows)
        for value, count in seen.items():
            if count > 1:
                shown = value[0] if len(value) == 1 else value
                yield (
                    "a value repeated where it must be unique",
                    f"{name} {', '.join(key)} {shown!r} ({count} rows)",
                )


def _provider_faults(providers: dict[int, dict]) -> Iterator[tuple[str, str]]:
    for rp in providers.values():
        where = f"provider id {rp['id']} {rp['uuid']!r}"
        if not _uuid(rp["uuid"]):
            yield "a provider uuid that is not a uuid", where
        if not isinstance(rp["name"], str) or not rp["name"] or len(rp["name"]) > MAX_NAME:
            yield f"a provider name missing or longer than {MAX_NAME}", where
        parent, root = rp.get("parent_provider_id"), rp.get("root_provider_id")
        if parent is not None and parent not in providers:
            yield "a parent provider that does not exist", where
        if root not in providers:
            yield "a root provider that does not exist", where
        elif parent is None and root != rp["id"]:
            yield "a provider without a parent whose root is another", where
        elif parent in providers and providers[parent].get("root_provider_id") != root:
            yield "a provider whose root is not its parent's", where
    parents = {rp["id"]: rp.get("parent_provider_id") for rp in providers.values()}
    for loop in tree_rules.loops(parents):
        named = " -> ".join(f"{rp} {providers[rp]['uuid']!r}" for rp in loop)
        yield "providers that are each other's parent (a parent loop)", f"provider ids {named}"


def _inventory_faults(
    inventories: Iterable[dict], providers: dict[int, dict], classes: set[int]
) -> Iterator[tuple[str, str]]:
    for inv in inventories:
        where = f"provider id {inv['resource_provider_id']} class id {inv['resource_class_id']}"
        if inv["resource_provider_id"] not in providers:
            yield "an inventory of a provider that does not exist", where
        if inv["resource_class_id"] not in classes:
            yield "an inventory of a class that does not exist", where
        fault = inventory_fault(
            inv["total"],
            inv["reserved"],
            inv["allocation_ratio"],
            inv["min_unit"],
            inv["max_unit"],
            inv["step_size"],
        )
        if fault is not None:
            kind, shown = fault
            yield kind, f"{where}: {shown}"


def _allocation_faults(
    allocations: list[dict], providers: dict[int, dict], classes: set[int], consumers: set[str]
) -> Iterator[tuple[str, str]]:
    keys = Counter(
        (a["consumer_id"], a["resource_provider_id"], a["resource_class_id"]) for a in allocations
    )
    for allocation in allocations:
        key = (
            allocation["consumer_id"],
            allocation["resource_provider_id"],
            allocation["resource_class_id"],
        )
        where = f"consumer {key[0]} provider id {key[1]} class id {key[2]}"
        if key[1] not in providers:
            yield "an allocation on a provider that does not exist", where
        if key[2] not in classes:
            yield "an allocation of a class that does not exist", where
        if key[0] not in consumers:
            yield "an allocation of a consumer that does not exist", where
        if not whole_in(allocation["used"], 1):
            yield (
                "an allocation amount not a whole number from 1",
                f"{where}: {allocation['used']!r}",
            )
        if keys[key] > 1:
            yield "allocation rows repeated for one consumer, provider and class", where
