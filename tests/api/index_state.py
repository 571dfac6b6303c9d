"""What a candidates index holds, in plain values, to compare an index kept
current through the journal with one loaded fresh from the database."""

from __future__ import annotations

import sqlalchemy as sa

from tally.placement.ledger.candidates import Index


def books(index: Index) -> dict:
    """Every structure of the index (empty sets and maps as missing; the kept
    per-class lists as the search reads them)."""

    def plain(d: dict) -> dict:
        return {k: (sorted(v) if isinstance(v, set) else v) for k, v in d.items() if v}

    return {
        "rows": dict(index.rows),
        "by_uuid": dict(index.by_uuid),
        "root_of": dict(index.root_of),
        "roots": sorted(index.roots),
        "sorted_roots": index.sorted_roots(),
        "trees": plain(index.trees),
        "inventories": plain(index.inventories),
        "used": plain(index.used),
        "by_class": plain(index.by_class),
        "stock_lists": {rc: index.stock_list(rc) for rc in sorted(plain(index.by_class))},
        "traits": plain(index.traits),
        "holders": plain(index.holders),
        "aggregates": plain(index.aggregates),
        "members": plain(index.members),
        "classes": dict(index.class_names),
        "traits_named": dict(index.trait_names),
    }


def caught_up(index: Index, engine: sa.Engine) -> Index:
    """`index` brought up to date with the database (through the journal)."""
    with index.held(engine):
        pass
    return index


def fresh(engine: sa.Engine) -> Index:
    """An index loaded whole from the database now."""
    return caught_up(Index(), engine)
