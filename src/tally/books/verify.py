"""Checks of a copy of Placement's books (`tally.books.transfer`), made with SQL on
each side, independent of the copying code: rows per table, and what Nova and an
operator read (providers with their names, generations and tree, inventories with
every field, usage per provider and class, allocations per consumer, consumers with
project, user, type and generation, traits and aggregates per provider, resource
classes with their ids), compared source against target; and capacity against usage
on the result, naming the providers already over capacity (readable, as upstream
left them, but given nothing more).

Both schemas name these tables and columns alike, but for a consumer's project and
user (`side`: "upstream" joins its projects and users tables). A provider upstream left
without a name or generation (its columns allow NULL; its API never writes one) counts
as named by its uuid, at generation 0, as `transfer.read_upstream` copies it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from tally.amounts import raw_capacity
from tally.books.transfer import TABLES, Counted
from tally.progress import Progress, quiet

_VIEWS = {
    "providers": """
        SELECT rp.uuid, COALESCE(rp.name, rp.uuid), COALESCE(rp.generation, 0), p.uuid, r.uuid
        FROM resource_providers rp
        LEFT JOIN resource_providers p ON p.id = rp.parent_provider_id
        LEFT JOIN resource_providers r ON r.id = rp.root_provider_id""",
    "inventories": """
        SELECT rp.uuid, rc.name, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
               i.allocation_ratio
        FROM inventories i JOIN resource_providers rp ON rp.id = i.resource_provider_id
        JOIN resource_classes rc ON rc.id = i.resource_class_id""",
    "usage": """
        SELECT rp.uuid, rc.name, SUM(a.used) FROM allocations a
        JOIN resource_providers rp ON rp.id = a.resource_provider_id
        JOIN resource_classes rc ON rc.id = a.resource_class_id GROUP BY rp.uuid, rc.name""",
    "allocations": """
        SELECT a.consumer_id, rp.uuid, rc.name, SUM(a.used) FROM allocations a
        JOIN resource_providers rp ON rp.id = a.resource_provider_id
        JOIN resource_classes rc ON rc.id = a.resource_class_id
        GROUP BY a.consumer_id, rp.uuid, rc.name""",
    "traits": """
        SELECT rp.uuid, t.name, 1 FROM resource_provider_traits x
        JOIN resource_providers rp ON rp.id = x.resource_provider_id
        JOIN traits t ON t.id = x.trait_id""",
    "aggregates": """
        SELECT rp.uuid, a.uuid, 1 FROM resource_provider_aggregates x
        JOIN resource_providers rp ON rp.id = x.resource_provider_id
        JOIN placement_aggregates a ON a.id = x.aggregate_id""",
    "consumer_types": "SELECT id, name FROM consumer_types",
}
_CONSUMERS = {
    "tally": """
        SELECT c.uuid, c.project_id, c.user_id, ct.name, c.generation FROM consumers c
        LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id""",
    "upstream": """
        SELECT c.uuid, p.external_id, u.external_id, ct.name, c.generation FROM consumers c
        JOIN projects p ON p.id = c.project_id JOIN users u ON u.id = c.user_id
        LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id""",
}
# Present on the source side only in part of the target (which may know newer
# standard classes and traits): checked as "every source row is in the target".
_SUBSET_VIEWS = {
    "resource classes": "SELECT id, name FROM resource_classes",
    "trait names": "SELECT name, 1 FROM traits",
}


@dataclasses.dataclass(frozen=True)
class Count:
    table: str
    source: int
    target: int | None  # None: not written (dry run)


@dataclasses.dataclass(frozen=True)
class Check:
    what: str
    rows: int
    differences: list[str]

    @property
    def ok(self) -> bool:
        return not self.differences


@dataclasses.dataclass(frozen=True)
class Over:
    provider: str
    name: str
    resource_class: str
    used: int
    capacity: float


@dataclasses.dataclass
class Report:
    counts: list[Count]
    checks: list[Check]
    over_capacity: list[Over]
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)


def _view(conn: sa.Connection, sql: str, read: Callable[[int], None]) -> dict[tuple, Any]:
    """Rows as key -> value: the last column is the value, the others the key; each
    batch of rows `read`."""
    found: dict[tuple, Any] = {}
    for batch in conn.execute(sa.text(sql)).partitions(_BATCH):
        for row in batch:
            *key, value = (_plain(v) for v in row)
            found[tuple(key)] = value
        read(len(batch))
    return found


def _plain(value: Any) -> Any:
    """Floats to 6 significant digits (MySQL's FLOAT is single precision)."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    return value


VIEWS = (*_VIEWS, "consumers", *_SUBSET_VIEWS)
# The large views, each at most a row per row of its table: the rows a phase of
# progress counts (the others are a few hundred rows at most).
_ROWS_OF = {
    "providers": "resource_providers",
    "inventories": "inventories",
    "allocations": "allocations",
    "traits": "resource_provider_traits",
    "aggregates": "resource_provider_aggregates",
    "consumers": "consumers",
}
_BATCH = 10_000


def views(
    conn: sa.Connection, side: str, read: Callable[[int], None] = lambda rows: None
) -> dict[str, dict[tuple, Any]]:
    """Each of VIEWS, the rows of the large ones `read` batch after batch."""
    found = {}
    for name in VIEWS:
        sql = _CONSUMERS[side] if name == "consumers" else {**_VIEWS, **_SUBSET_VIEWS}[name]
        found[name] = _view(conn, sql, read if name in _ROWS_OF else lambda rows: None)
    found["inventories"] = {
        key[:2]: (*key[2:], value) for key, value in found["inventories"].items()
    }
    found["providers"] = {key[:1]: (*key[1:], value) for key, value in found["providers"].items()}
    found["consumers"] = {key[:1]: (*key[1:], value) for key, value in found["consumers"].items()}
    return found


def counts(conn: sa.Connection) -> dict[str, int]:
    return {
        table: conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar() or 0
        for table in TABLES
    }


def nonempty(conn: sa.Connection, extra: tuple[str, ...] = ()) -> dict[str, int]:
    """Rows beyond the standard classes and traits: table -> count, those not empty."""
    found = {}
    for table in (*TABLES, *extra):
        sql = f"SELECT COUNT(*) FROM {table}"
        if table in ("resource_classes", "traits"):
            sql += " WHERE name LIKE 'CUSTOM!_%' ESCAPE '!'"
        found[table] = conn.execute(sa.text(sql)).scalar() or 0
    return {table: n for table, n in found.items() if n}


def _differences(name: str, source: dict, target: dict, subset: bool) -> list[str]:
    differ = {k for k in source.keys() ^ target.keys() if k in source or not subset}
    differ |= {k for k in source.keys() & target.keys() if source[k] != target[k]}
    out = []
    for key in sorted(differ, key=repr):
        if key not in target:
            out.append(f"{name}: {' '.join(map(str, key))} missing from the target")
        elif key not in source:
            if not subset:
                out.append(f"{name}: {' '.join(map(str, key))} not in the source")
        elif source[key] != target[key]:
            out.append(f"{name}: {' '.join(map(str, key))}: {source[key]!r} became {target[key]!r}")
    return out


def over_capacity(found: dict[str, dict[tuple, Any]]) -> list[Over]:
    """Usage above (total - reserved) * allocation_ratio, or without inventory."""
    names = {key[0]: value[0] for key, value in found["providers"].items()}
    over = []
    for (provider, rc), used in sorted(found["usage"].items()):
        inventory = found["inventories"].get((provider, rc))
        capacity = 0.0 if inventory is None else raw_capacity(*inventory[:2], inventory[5])
        if used > capacity:
            over.append(Over(provider, names.get(provider, ""), rc, int(used), capacity))
    return over


def compare(
    source: sa.Connection,
    source_side: str,
    target: sa.Connection,
    target_side: str,
    progress: Progress = quiet,
) -> Report:
    """The target against the source, after a copy (same transaction as the copy),
    reported as `compare with the source` in rows: each side's read, then checked."""
    in_source, in_target = counts(source), counts(target)
    expected = {name: in_source[table] for name, table in _ROWS_OF.items()}
    counted = Counted(progress, "compare with the source", 3 * sum(expected.values()))
    before = views(source, source_side, counted.add)
    after = views(target, target_side, counted.add)
    checks = []
    for name in before:
        subset = name in _SUBSET_VIEWS
        differences = _differences(name, before[name], after[name], subset)
        checks.append(Check(name, len(before[name]), differences))
        counted.add(expected.get(name, 0))
    counted.finish()
    short = [
        f"rows: {table}: {in_source[table]} in the source, {in_target[table]} in the target"
        for table in TABLES
        if in_target[table] != in_source[table]
        and not (table in ("resource_classes", "traits") and in_target[table] > in_source[table])
    ]  # the target may know more standard classes and traits than the source
    checks.insert(0, Check("rows per table", sum(in_source.values()), short))
    return Report(
        [Count(t, in_source[t], in_target[t]) for t in TABLES],
        checks,
        over_capacity(after),
    )


def survey(source: sa.Connection, side: str, progress: Progress = quiet) -> Report:
    """What a copy would carry (a dry run): rows, and providers over capacity."""
    rows = counts(source)
    counted = Counted(progress, "survey the source", sum(rows[t] for t in _ROWS_OF.values()))
    found = views(source, side, counted.add)
    counted.finish()
    return Report([Count(t, n, None) for t, n in rows.items()], [], over_capacity(found))
