"""`tally db import` checks every row against the ledger's rules before it writes
anything: an upstream database holding what the API would never have let in (a ratio
of 1e308, a dangling parent, a step of 0, an inventory of a class nobody defined,
duplicate allocation rows, ...) is refused in one line per kind of fault, and the
target stays empty; a file that is not a Placement database at all is refused in one
line, no traceback. `tally db check` runs the same rules over Tally's own database.

The sources are SQLite files in upstream's schema (SQLite, as upstream's tests run
it, enforces none of its foreign keys: anything can be written there)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tally.books import move
from tally.books.transfer import TransferError
from tally.db.probe import UnusableDatabase
from tally.placement.ledger.bootstrap import prepare_database
from tests.db.conftest import transport
from tests.db.test_move import books, quiet, url_of
from tests.e2e.placement_books import Api

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])
CN3 = books.uid("cn3")


def _cn3(change: str) -> str:
    return f"UPDATE resource_providers SET {change} WHERE uuid = '{CN3}'"


_REPEAT = "resource_provider_id, consumer_id, resource_class_id, used"
_COPY = f"SELECT {_REPEAT} FROM allocations LIMIT 1"
# kind of fault (the start of its line) -> SQL that puts one in upstream's books
_INV = "UPDATE inventories SET"
_FIRST = "WHERE id = (SELECT min(id) FROM inventories)"
_TRAIT = "UPDATE resource_provider_traits SET trait_id = 9999 WHERE rowid = 1"
_ALLOC = "UPDATE allocations SET resource_provider_id = 9999"
HOSTILE = {
    "a capacity past what the ledger counts exactly": f"{_INV} allocation_ratio = 1e308",
    "an allocation_ratio not a positive finite number": f"{_INV} allocation_ratio = 0",
    "a parent provider that does not exist": _cn3("parent_provider_id = 9999"),
    "a root provider that does not exist": _cn3("root_provider_id = 9999"),
    "an inventory of a class that does not exist": f"{_INV} resource_class_id = 999 {_FIRST}",
    "an inventory amount not a whole number in range": f"{_INV} step_size = 0",
    "an inventory whose min_unit is above its max_unit": f"{_INV} min_unit = max_unit + 1",
    "a provider uuid that is not a uuid": _cn3("uuid = 'not-a-uuid'"),
    "a provider name missing or longer than": _cn3(f"name = '{'x' * 300}'"),
    "allocation rows repeated": f"INSERT INTO allocations ({_REPEAT}) {_COPY}",
    "an allocation on a provider that does not exist": _ALLOC,
    "a trait link to a trait that does not exist": _TRAIT,
}  # fmt: skip
TEXT_IN_NUMBERS = "UPDATE inventories SET total = 'lots'"


@pytest.fixture
def upstream_file(populated, tmp_path) -> str:
    """The books of tests/e2e/placement_books in upstream's schema, a SQLite file
    (whatever the backend: the target is the test's)."""
    source = f"sqlite:///{tmp_path / 'upstream.sqlite'}"
    move.export_to(url_of(populated), source, quiet)
    return source


def _corrupt(url: str, sql: str) -> None:
    with sa.create_engine(url).begin() as conn:
        conn.exec_driver_sql(sql)


def _target_providers(url: str) -> int:
    """Providers in the target (of any backend; 0 when it has no tables yet)."""
    if url.startswith("sqlite"):
        return _providers(url)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if "resource_providers" not in sa.inspect(conn).get_table_names():
                return 0
            return conn.exec_driver_sql("SELECT count(*) FROM resource_providers").scalar()
    finally:
        engine.dispose()


def _providers(url: str) -> int:
    path = Path(sa.make_url(url).database)
    if not path.exists():
        return 0
    with sa.create_engine(url).connect() as conn:
        tables = sa.inspect(conn).get_table_names()
        if "resource_providers" not in tables:
            return 0
        return conn.exec_driver_sql("SELECT count(*) FROM resource_providers").scalar()


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_row_the_api_would_refuse_stops_the_import(kind, upstream_file, new_database):
    _corrupt(upstream_file, HOSTILE[kind])
    target = new_database("imported")
    for dry_run in (True, False):
        with pytest.raises(TransferError) as refused:
            move.import_from(upstream_file, target, prepare_database, quiet, dry_run=dry_run)
        lines = str(refused.value).splitlines()
        assert lines[0].endswith("nothing was written:")
        assert any(line.strip().startswith(kind) for line in lines[1:]), lines
    assert _target_providers(target) == 0


@SQLITE_ONLY
def test_text_in_a_number_column_is_one_line(upstream_file, new_database):
    _corrupt(upstream_file, TEXT_IN_NUMBERS)
    with pytest.raises(TransferError, match="not a whole number in range .* total='lots'"):
        move.import_from(upstream_file, new_database("imported"), prepare_database, quiet)


@SQLITE_ONLY
def test_a_missing_table_is_one_line(upstream_file, new_database):
    _corrupt(upstream_file, "DROP TABLE allocations")
    with pytest.raises((TransferError, UnusableDatabase)) as refused:
        move.import_from(upstream_file, new_database("imported"), prepare_database, quiet)
    assert "\n" not in str(refused.value) and "allocations" in str(refused.value)


@SQLITE_ONLY
@pytest.mark.parametrize(
    "content", [b"not a database at all\n" * 50, b"SQLite format 3\x00" + b"\x00" * 84]
)
def test_a_file_that_is_no_database_is_one_line(content, tmp_path, new_database):
    path = tmp_path / "hostile.sqlite"
    path.write_bytes(content)
    with pytest.raises((TransferError, UnusableDatabase)) as refused:
        move.import_from(f"sqlite:///{path}", new_database("imported"), prepare_database, quiet)
    assert "\n" not in str(refused.value)


@SQLITE_ONLY
def test_db_check_finds_the_same_faults_in_our_own_database(engine):
    Api("http://tally", transport(engine)).write(
        "POST", "/resource_providers", {"name": "cn", "uuid": CN3}
    )
    url = url_of(engine)
    assert move.check_books(url) == []
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE resource_providers SET parent_provider_id = 4242 WHERE uuid = '{CN3}'"
        )
    faults = move.check_books(url)
    assert [fault.kind for fault in faults] == ["a parent provider that does not exist"]
    assert CN3 in faults[0].line()


REPAIRABLE = {
    "dropped allocations on a provider that does not exist": _ALLOC + " WHERE rowid = 1",
    "dropped repeated allocation rows": f"INSERT INTO allocations ({_REPEAT}) {_COPY}",
    "dropped trait links to a provider or trait that does not exist": _TRAIT,
}


def _allocations(url: str) -> int:
    with sa.create_engine(url).connect() as conn:
        return conn.exec_driver_sql("SELECT count(*) FROM allocations").scalar()


@SQLITE_ONLY
@pytest.mark.parametrize("kind", REPAIRABLE)
def test_repair_drops_what_points_nowhere_and_says_so(kind, upstream_file, new_database):
    clean = _allocations(upstream_file)
    _corrupt(upstream_file, REPAIRABLE[kind])
    target = new_database("imported")
    with pytest.raises(TransferError):  # refused without --repair
        move.import_from(upstream_file, target, prepare_database, quiet)
    dry = move.import_from(upstream_file, target, prepare_database, quiet, True, repair=True)
    said = [note for note in dry.report.notes if note.startswith(f"repaired: {kind}")]
    assert len(said) == 1 and ": 1 row(s) (" in said[0], dry.report.notes
    assert _providers(target) == 0  # a dry run writes nothing
    done = move.import_from(upstream_file, target, prepare_database, quiet, repair=True)
    assert any(note.startswith(f"repaired: {kind}") for note in done.report.notes)
    assert _providers(target) > 0
    expected = clean - 1 if "provider that does not exist" in kind else clean
    assert _allocations(target) == expected
    assert move.check_books(target) == []  # what was written keeps the ledger's rules


@SQLITE_ONLY
def test_repair_leaves_what_it_cannot_fix_refused(upstream_file, new_database):
    _corrupt(upstream_file, HOSTILE["a capacity past what the ledger counts exactly"])
    target = new_database("imported")
    with pytest.raises(TransferError, match="a capacity past what the ledger counts"):
        move.import_from(upstream_file, target, prepare_database, quiet, repair=True)
    assert _providers(target) == 0


def _parent(child: str, parent: str) -> str:
    """SQL making `parent` the parent of `child` (its root left as it is)."""
    return (
        "UPDATE resource_providers SET parent_provider_id = (SELECT id FROM resource_providers "
        f"WHERE uuid = '{books.uid(parent)}') WHERE uuid = '{books.uid(child)}'"
    )


LOOP = "providers that are each other's parent (a parent loop)"
# a loop -> the providers it names; every root agrees with its parent's
LOOPS = {
    "its own parent": (_parent("cn3", "cn3"), ["cn3"]),
    "two": (_parent("cn1", "cn1-numa0"), ["cn1", "cn1-numa0"]),
    "three": (_parent("cn1", "cn1-pf0"), ["cn1", "cn1-numa0", "cn1-pf0"]),
}


@pytest.mark.parametrize("loop", LOOPS)
def test_a_parent_loop_stops_the_import_and_repair(loop, upstream_file, new_database):
    sql, named = LOOPS[loop]
    _corrupt(upstream_file, sql)
    target = new_database("imported")
    for dry_run, repair in ((True, False), (False, False), (True, True), (False, True)):
        with pytest.raises(TransferError) as refused:
            move.import_from(upstream_file, target, prepare_database, quiet, dry_run, repair)
        (line,) = [line for line in str(refused.value).splitlines() if LOOP in line]
        assert all(books.uid(name) in line for name in named), line
        assert "Traceback" not in str(refused.value)
    assert _target_providers(target) == 0


@SQLITE_ONLY
@pytest.mark.parametrize("loop", LOOPS)
def test_db_check_finds_a_parent_loop(loop, populated):
    sql, named = LOOPS[loop]
    url = url_of(populated)
    assert move.check_books(url) == []
    with populated.begin() as conn:
        conn.exec_driver_sql(sql)
    faults = move.check_books(url)
    assert [fault.kind for fault in faults] == [LOOP]
    assert all(books.uid(name) in faults[0].line() for name in named)


def _corrupt_all(url: str, *sqls: str) -> None:
    with sa.create_engine(url).begin() as conn:
        for sql in sqls:
            conn.exec_driver_sql(sql)


def _unconstrained(table: str) -> tuple[str, ...]:
    """SQL giving upstream's `table` its rows without its unique constraints (what a
    hand-made or damaged source may be)."""
    return (
        f"ALTER TABLE {table} RENAME TO {table}_kept",
        f"CREATE TABLE {table} AS SELECT * FROM {table}_kept",
        f"DROP TABLE {table}_kept",
    )


def _copy_of(table: str, columns: str, values: str, where: str) -> str:
    return f"INSERT INTO {table} ({columns}) SELECT {values} FROM {table} WHERE {where}"


_RP_COLUMNS = "id, uuid, name, generation, root_provider_id, parent_provider_id, created_at"
BIG = 2**63 - 1
# kind of fault (the start of its line) -> (SQL, what the line names); the target
# would refuse each with a traceback (a unique or an INT column) or overflow later
UNWRITABLE = {
    "a value repeated where it must be unique": (
        (
            *_unconstrained("resource_providers"),
            _copy_of(
                "resource_providers",
                _RP_COLUMNS,
                _RP_COLUMNS.replace("id, uuid, name", "id + 1000, uuid, name || '-2'"),
                f"uuid = '{CN3}'",
            ),
        ),
        ["resource_providers", "uuid", CN3],
    ),
    "a number out of its column's range": (
        (_cn3(f"generation = {BIG}"),),
        ["resource_providers", "generation", str(BIG)],
    ),
}
UNWRITABLE["a number out of its column's range (consumer)"] = (
    (f"UPDATE consumers SET generation = {BIG}",),
    ["consumers", "generation", str(BIG)],
)


@pytest.mark.parametrize("kind", UNWRITABLE)
def test_a_row_the_target_cannot_hold_is_one_line(kind, upstream_file, new_database):
    sqls, named = UNWRITABLE[kind]
    _corrupt_all(upstream_file, *sqls)
    target = new_database("imported")
    for dry_run in (True, False):
        with pytest.raises(TransferError) as refused:
            move.import_from(upstream_file, target, prepare_database, quiet, dry_run=dry_run)
        start = kind.split(" (")[0]
        (line,) = [line for line in str(refused.value).splitlines() if start in line]
        assert all(word in line for word in named), line
    assert _target_providers(target) == 0


_ENDLESS = (
    "ALTER TABLE allocations RENAME TO allocations_kept",
    "CREATE VIEW allocations AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
    "SELECT i AS id, (SELECT min(id) FROM resource_providers) AS resource_provider_id, "
    "'00000000-0000-0000-0000-000000000001' AS consumer_id, 0 AS resource_class_id, "
    "1 AS used, NULL AS created_at, NULL AS updated_at FROM n",
)


@SQLITE_ONLY
def test_a_source_past_the_row_cap_is_refused_in_one_line(upstream_file, new_database):
    """An endless view where a table belongs: the importer reads at most the cap (a
    setting it names) and stops; it never holds more."""
    _corrupt_all(upstream_file, *_ENDLESS)
    target = new_database("imported")
    for dry_run in (True, False):
        with pytest.raises(TransferError) as refused:
            move.import_from(upstream_file, target, prepare_database, quiet, dry_run, max_rows=5000)
        message = str(refused.value)
        assert "\n" not in message
        assert "allocations" in message and "5,000" in message
        assert "import_max_rows" in message
    assert _target_providers(target) == 0


def test_the_row_cap_is_a_documented_setting():
    from tally.config import Settings

    assert Settings.of().import_max_rows >= 1_000_000


@SQLITE_ONLY
def test_db_import_of_an_endless_source_is_one_line_on_the_command_line(
    upstream_file, tmp_path, monkeypatch
):
    from click.testing import CliRunner

    from tally.cli.main import cli

    _corrupt_all(upstream_file, *_ENDLESS)
    monkeypatch.setenv("TALLY_DATABASE_URL", f"sqlite:///{tmp_path / 'target.sqlite'}")
    monkeypatch.setenv("TALLY_IMPORT_MAX_ROWS", "2000")
    done = CliRunner().invoke(cli, ["db", "import", "--from", upstream_file])
    assert done.exit_code == 1, done.output
    assert "Traceback" not in done.output
    assert "import_max_rows" in done.output and "2,000" in done.output


def _named(table: str, old: str, new: str) -> str:
    return f"UPDATE {table} SET name = '{new}' WHERE name = '{old}'"


# a name the API refuses -> the kind of its line; upstream's CUSTOM_GPU / CUSTOM_RAID renamed
BAD_NAMES = {
    "CUSTOM_GPU\n": ("resource_classes", "CUSTOM_GPU", "a resource class name"),
    "custom_gpu": ("resource_classes", "CUSTOM_GPU", "a resource class name"),
    "CUSTOM_G-PU": ("resource_classes", "CUSTOM_GPU", "a resource class name"),
    "CUSTOM_": ("resource_classes", "CUSTOM_GPU", "a resource class name"),
    "CUSTOM_RAID\n": ("traits", "CUSTOM_RAID", "a trait name"),
    "CUSTOM_RA ID": ("traits", "CUSTOM_RAID", "a trait name"),
}


@SQLITE_ONLY
@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_a_name_the_api_refuses_stops_the_import(name, upstream_file, new_database):
    table, old, kind = BAD_NAMES[name]
    _corrupt_all(upstream_file, _named(table, old, name))
    target = new_database("imported")
    with pytest.raises(TransferError) as refused:
        move.import_from(upstream_file, target, prepare_database, quiet)
    lines = [line for line in str(refused.value).splitlines() if kind in line]
    assert len(lines) == 1 and repr(name) in lines[0], str(refused.value)
    assert _target_providers(target) == 0


def test_the_importer_and_the_api_share_one_name_rule():
    """Whatever the API takes as a new class or trait, the importer takes, and only that."""
    from tally import names

    for name in ("CUSTOM_GPU", "CUSTOM_A_1", "VCPU", "HW_CPU_X86_AVX2"):
        assert names.name_fault(name) is None, name
    for name in ("CUSTOM_GPU\n", "CUSTOM_", "custom_x", "CUSTOM_X-Y", "", "X" * 256, None):
        assert names.name_fault(name) is not None, name
    for name in ("CUSTOM_GPU", "CUSTOM_A_1"):
        assert names.is_custom_resource_class_name(name) and names.is_custom_trait_name(name)
    for name in ("CUSTOM_GPU\n", "CUSTOM_", "VCPU", "CUSTOM_X-Y"):
        assert not names.is_custom_resource_class_name(name)
