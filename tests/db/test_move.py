"""`tally db export` and `tally db import` in-process, on each backend: Tally's books
(written through its API) into a new database in upstream's schema and back into a
new Tally database answer every read alike, and take new writes; a copy that does
not match its source is rolled back; what either command refuses, and that it then
changed nothing. (tests/e2e/test_upstream_move.py does the same with upstream
Placement itself on both ends.)"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tally.books import move, transfer
from tally.config import Settings
from tally.db import probe
from tally.db import upstream_schema as upstream
from tally.db.engine import make_engine
from tally.db.probe import UnusableDatabase
from tally.placement.app import create_app
from tally.placement.ledger.bootstrap import prepare_database
from tests.e2e import placement_books as books


def quiet(table: str, done: int, total: int) -> None:
    pass


def url_of(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def transport(engine: sa.Engine, **settings: object) -> httpx.WSGITransport:
    return httpx.WSGITransport(app=create_app(Settings.of(**settings), engine))


def test_export_then_import_answers_every_read_alike(populated, new_database):
    before = books.answers("http://tally", transport(populated))
    back = new_database("upstream")
    exported = move.export_to(url_of(populated), back, quiet)
    assert exported.report.ok and exported.revision == upstream.HEAD
    assert [o.provider for o in exported.report.over_capacity] == [books.uid("cn3")]
    plain = sa.create_engine(back)
    with plain.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == (
            upstream.HEAD
        )
        projects = conn.execute(sa.text("SELECT external_id FROM projects")).scalars()
        assert sorted(projects) == ["p1", "p2"]

    target = new_database("imported")
    imported = move.import_from(back, target, prepare_database, quiet)
    assert imported.report.ok and imported.target_state in ("absent", "empty")
    counts = {c.table: (c.source, c.target) for c in imported.report.counts}
    assert counts["allocations"] == (13, 13) and counts["consumers"] == (6, 6)
    engine = make_engine(target)
    try:
        assert books.differences(before, books.answers("http://tally", transport(engine))) == []
        api = books.Api("http://tally", transport(engine))  # new rows find free ids
        api.provider("cn4", VCPU={"total": 4})
        api.allocate("inst9", "p3", "u9", "INSTANCE", cn4={"VCPU": 1})
        api.write("POST", "/resource_classes", {"name": "CUSTOM_NEW"})
        assert api.write("GET", f"/allocations/{books.uid('inst9')}")["consumer_generation"] == 1
    finally:
        engine.dispose()
    with plain.begin() as conn:  # upstream's own inserts (no ids) still find free ids
        conn.execute(upstream.traits.insert().values(name="CUSTOM_NEW"))
        conn.execute(upstream.users.insert().values(external_id="u9"))
    plain.dispose()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_copy_that_does_not_match_is_rolled_back(populated, new_database, monkeypatch):
    back = new_database("upstream")
    move.export_to(url_of(populated), back, quiet)
    write = transfer.write_tally

    def lossy(conn: sa.Connection, found: transfer.Books, progress: transfer.Progress) -> None:
        found.rows["allocations"].pop()
        write(conn, found, progress)

    monkeypatch.setattr(transfer, "write_tally", lossy)
    target = new_database("imported")
    with pytest.raises(move.Mismatch) as refused:
        move.import_from(back, target, prepare_database, quiet)
    differences = [d for check in refused.value.report.checks for d in check.differences]
    assert any(d.startswith("allocations: ") for d in differences)
    assert any(d.startswith("usage: ") for d in differences)
    with sqlite3.connect(sa.engine.make_url(target).database) as conn:
        assert conn.execute("SELECT COUNT(*) FROM resource_providers").fetchone() == (0,)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_what_import_and_export_refuse(populated, new_database, tmp_path):
    tally_url = url_of(populated)
    back = new_database("upstream")
    move.export_to(tally_url, back, quiet)
    empty_target = new_database("imported")

    def refused(call: Callable[[], object]) -> str:
        with pytest.raises((move.TransferError, UnusableDatabase)) as caught:
            call()
        return str(caught.value)

    # into a target that holds books: refused, naming what it holds
    why = refused(lambda: move.import_from(back, tally_url, prepare_database, quiet))
    assert "is not empty: resource_classes (2), traits (2), resource_providers (7)" in why
    why = refused(lambda: move.export_to(tally_url, back, quiet))
    assert "is not empty" in why and "projects (2)" in why
    # one database as both ends; a source that is not upstream's; a missing source
    assert "one database" in refused(lambda: move.export_to(tally_url, tally_url, quiet))
    why = refused(lambda: move.import_from(tally_url, empty_target, prepare_database, quiet))
    assert "is a Tally database already" in why
    missing = tmp_path / "nowhere.sqlite"
    gone = f"sqlite:///{missing}"
    why = refused(lambda: move.import_from(gone, empty_target, prepare_database, quiet))
    assert "no SQLite database" in why and not missing.exists()
    # an upstream database older than the consumer types
    with sa.create_engine(back).begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = 'b5c396305c25'"))
    why = refused(lambda: move.import_from(back, empty_target, prepare_database, quiet))
    assert "at revision b5c396305c25" in why and "placement-manage db sync" in why
    assert not Path(sa.engine.make_url(empty_target).database).exists()
    # exporting into a (new, empty) Tally database
    prepare_database(make_engine(empty_target))
    why = refused(lambda: move.export_to(tally_url, empty_target, quiet))
    assert "is a Tally database" in why


def test_dry_runs_write_nothing(populated, new_database):
    back = new_database("upstream")
    dry = move.export_to(url_of(populated), back, quiet, dry_run=True)
    assert dry.dry_run and dry.report.checks == []
    assert {c.table: c.source for c in dry.report.counts}["resource_providers"] == 7
    if back.startswith("sqlite"):
        assert not Path(sa.engine.make_url(back).database).exists()
    else:
        with sa.create_engine(back).connect() as conn:
            assert sa.inspect(conn).get_table_names() == []
    move.export_to(url_of(populated), back, quiet)
    target = new_database("imported")
    dry = move.import_from(back, target, prepare_database, quiet, dry_run=True)
    assert [o.resource_class for o in dry.report.over_capacity] == ["VCPU"]
    if target.startswith("sqlite"):
        assert not Path(sa.engine.make_url(target).database).exists()
    else:
        with sa.create_engine(target).connect() as conn:
            assert sa.inspect(conn).get_table_names() == []


def test_the_source_is_opened_read_only(backend, new_database):
    url = new_database("upstream")
    with sa.create_engine(url).begin() as conn:
        upstream.create_schema(conn)
    with move.snapshot(probe.read_only_engine(url)) as conn:
        with pytest.raises(sa.exc.DBAPIError) as refused:
            conn.execute(upstream.users.insert().values(external_id="u1"))
    assert any(
        words in str(refused.value).lower()
        for words in ("readonly database", "read-only transaction", "read only transaction")
    ), refused.value


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_provider_upstream_left_without_a_name_is_named_by_its_uuid(populated, new_database):
    back = new_database("upstream")
    move.export_to(url_of(populated), back, quiet)
    cn3 = books.uid("cn3")
    with sa.create_engine(back).begin() as conn:
        conn.execute(
            sa.text("UPDATE resource_providers SET name = NULL WHERE uuid = :u"), {"u": cn3}
        )
    target = new_database("imported")
    imported = move.import_from(back, target, prepare_database, quiet)
    assert imported.report.ok
    assert imported.report.notes == [f"provider {cn3} had no name: named by its uuid"]
    engine = make_engine(target)
    api = books.Api("http://tally", transport(engine))
    assert api.write("GET", f"/resource_providers/{cn3}")["name"] == cn3
    engine.dispose()
