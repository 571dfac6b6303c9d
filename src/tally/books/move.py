"""Moving a cloud's Placement books: from an upstream Placement database into Tally's
(`tally db import`), and back into a new upstream database (`tally db export`).

The source is only read: opened read-only where the driver allows (a SQLite file
with `mode=ro`, its journal mode untouched; PostgreSQL and MySQL in a read-only,
repeatable-read transaction), all of it in one snapshot. The target must be empty
(standard resource classes and traits aside); it is written in one transaction that
ends by comparing both sides (`tally.books.verify`) and commits only when they agree.
A dry run reads both and writes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy import event

from tally.books import check, transfer, verify
from tally.books.transfer import TransferError
from tally.db import probe
from tally.db import upstream_schema as upstream
from tally.db.engine import make_engine
from tally.db.transaction import transaction
from tally.progress import Progress, quiet

T = TypeVar("T")


class Mismatch(TransferError):
    """The target did not match the source after the copy: rolled back."""

    def __init__(self, report: verify.Report) -> None:
        super().__init__("the copy did not match its source; nothing was written")
        self.report = report


@dataclasses.dataclass
class Outcome:
    source: str  # URLs without passwords
    target: str
    revision: str  # the source's schema revision
    dry_run: bool
    report: verify.Report
    target_state: str  # what the target was: "absent", "empty", "empty schema"


def import_from(
    source_url: str,
    target_url: str,
    prepare: Callable[[sa.Engine], None],
    progress: Progress,
    dry_run: bool = False,
    repair: bool = False,
    max_rows: int | None = None,
) -> Outcome:
    """Upstream's books from `source_url` into Tally's empty database at `target_url`
    (made ready by `prepare`, i.e. migrated, before the copy); with `repair`, the
    safe fixes of `check.repair` made on the way (said in the report). A source
    table past `max_rows` rows (setting `import_max_rows`) is refused unread."""
    src, dst = probe.with_our_driver(source_url), probe.parse(target_url)
    _refuse_same(src, dst)
    with snapshot(probe.read_only_engine(src)) as sconn:
        found = _read(src, lambda: probe.identify_connection(sconn))
        _importable(src, found)
        books = _read(src, lambda: transfer.read_upstream(sconn, max_rows, progress))
        repaired = check.repair(books) if repair else []
        faults = check.check(books, progress)
        if faults:  # before anything is written, dry run or not
            raise TransferError(check.refusal(faults))
        state = _tally_target_state(dst)
        if dry_run:
            report = verify.survey(sconn, "upstream", progress)
        else:
            engine = make_engine(target_url)
            try:
                progress("prepare the target", 0, 0)
                prepare(engine)
                with transaction(engine, write=True) as tconn:
                    _refuse_nonempty(tconn, dst)
                    transfer.write_tally(tconn, books, progress)
                    compared = verify.compare(sconn, "upstream", tconn, "tally", progress)
                    report = _checked(compared, REPAIRABLE if repaired else ())
                    progress("commit", 0, 0)
                analyze(engine)
            finally:
                engine.dispose()
    report.notes.extend(books.notes)
    report.notes.extend(f"repaired: {line}" for line in repaired)
    return Outcome(
        probe.safe_url(src), probe.safe_url(dst), found.revision or "", dry_run, report, state
    )


def _read(src: sa.URL, read: Callable[[], T]) -> T:
    """The source's books, or one line saying why they cannot be read (a table
    missing, text where a number belongs: what a hand-made file may hold)."""
    try:
        return read()
    except sa.exc.DBAPIError as exc:
        raise TransferError(f"cannot read {probe.safe_url(src)}: {probe.reason(exc)}") from None
    except (sa.exc.SQLAlchemyError, ValueError, TypeError) as exc:
        raise TransferError(f"cannot read {probe.safe_url(src)}: {exc}") from None


def check_books(
    url: str, max_rows: int | None = None, progress: Progress = quiet
) -> list[check.Fault]:
    """`tally db check`: the ledger's rules over Tally's own database, read-only."""
    parsed = probe.parse(url)
    with snapshot(probe.read_only_engine(parsed)) as conn:
        books = _read(parsed, lambda: transfer.read_tally(conn, max_rows, progress))
        return check.check(books, progress)


def export_to(
    tally_url: str, target_url: str, progress: Progress, dry_run: bool = False
) -> Outcome:
    """Tally's books into an empty database at `target_url`, in upstream's schema at
    the head of openstack-placement 16.0.0 (created when the database has no tables)."""
    src, dst = probe.parse(tally_url), probe.with_our_driver(target_url)
    _refuse_same(src, dst)
    found = probe.refuse_foreign(src, strict=True)
    if found is None or found.kind != "tally" or found.revision != _tally_head():
        at = f"at revision {found.revision}" if found and found.revision else "without schema"
        raise TransferError(
            f"{probe.safe_url(src)} is not a Tally database at the newest schema ({at}); "
            f"run `tally db upgrade` first"
        )
    state = _upstream_target_state(dst)
    with snapshot(probe.read_only_engine(src)) as sconn:
        books = transfer.read_tally(sconn, progress=progress)
        if dry_run:
            report = verify.survey(sconn, "tally", progress)
        else:
            engine = _writer(dst)
            try:
                if state != "empty schema":
                    progress("prepare the target", 0, 0)
                    with engine.begin() as conn:
                        upstream.create_schema(conn)
                with engine.begin() as tconn:
                    _refuse_nonempty(tconn, dst, upstream.ONLY_UPSTREAM)
                    transfer.write_upstream(tconn, books, progress)
                    compared = verify.compare(sconn, "tally", tconn, "upstream", progress)
                    report = _checked(compared)
                    progress("commit", 0, 0)
            finally:
                engine.dispose()
    return Outcome(probe.safe_url(src), probe.safe_url(dst), upstream.HEAD, dry_run, report, state)


def _tally_head() -> str:
    from tally.db.migrate import head_revision

    return head_revision() or ""


# what `check.repair` may change: the rest of a repaired copy must still match
REPAIRABLE = ("rows per table", "allocations", "usage", "traits", "aggregates")


def _checked(report: verify.Report, may_differ: tuple[str, ...] = ()) -> verify.Report:
    if not all(check.ok or check.what in may_differ for check in report.checks):
        raise Mismatch(report)
    return report


def _refuse_same(src: sa.URL, dst: sa.URL) -> None:
    path = probe.sqlite_path(src)
    same = (
        path == probe.sqlite_path(dst) if path else src.set(password=None) == dst.set(password=None)
    )
    if same:
        raise TransferError(f"the source and the target are one database: {probe.safe_url(src)}")


def _importable(src: sa.URL, found: probe.Found) -> None:
    where = probe.safe_url(src)
    if found.kind == "upstream" and found.revision in upstream.IMPORTABLE:
        return
    if found.kind == "upstream":
        raise TransferError(
            f"{where} is an upstream Placement database at revision {found.revision}, older "
            f"than the consumer types (422ece571366) that `tally db import` reads: bring it "
            f"to {upstream.HEAD} with upstream's own `placement-manage db sync` "
            f"({upstream.RELEASE}) first; nothing was changed"
        )
    if found.kind == "tally":
        raise TransferError(f"{where} is a Tally database already: nothing to import")
    if found.revision:
        raise TransferError(
            f"{where} is at schema revision {found.revision}: `tally db import` reads upstream "
            f"Placement databases at {' or '.join(upstream.IMPORTABLE)}; nothing was changed"
        )
    raise TransferError(f"{where} holds no upstream Placement schema (no alembic revision)")


def _tally_target_state(dst: sa.URL) -> str:
    """Refuse a target that is not empty, before anything is written anywhere."""
    found = probe.identify(dst) if _reachable(dst) else None
    where = probe.safe_url(dst)
    if found is None or found.kind in ("absent", "empty"):
        return found.kind if found else "absent"
    if found.kind == "upstream":
        raise TransferError(
            f"the target {where} (database_url) is an upstream Placement database; "
            f"`tally db import` copies into an empty database for Tally"
        )
    why = probe.refusal(dst, found)
    if why:
        raise TransferError(f"the target: {why}")
    with snapshot(probe.read_only_engine(dst)) as conn:
        _refuse_nonempty(conn, dst)
    return "empty schema"


def _upstream_target_state(dst: sa.URL) -> str:
    found = probe.identify(dst) if _reachable(dst) else None
    where = probe.safe_url(dst)
    if found is None or found.kind in ("absent", "empty"):
        if (
            found is not None
            and found.kind == "empty"
            and set(upstream.DATA_TABLES) & set(found.tables)
        ):
            raise TransferError(f"the target {where} holds Placement tables but no revision")
        return found.kind if found else "absent"
    if found.kind != "upstream" or found.revision != upstream.HEAD:
        what = "a Tally database" if found.kind == "tally" else f"at revision {found.revision}"
        raise TransferError(
            f"the target {where} is {what}: `tally db export` writes into an empty database, "
            f"or one with upstream's schema at {upstream.HEAD} and no data"
        )
    with snapshot(probe.read_only_engine(dst)) as conn:
        _refuse_nonempty(conn, dst, upstream.ONLY_UPSTREAM)
    return "empty schema"


def _reachable(url: sa.URL) -> bool:
    """False for a SQLite file not made yet; a server that cannot be reached is
    refused in one line."""
    if url.get_backend_name() == "sqlite":
        path = probe.sqlite_path(url)
        return path is not None and path.exists()
    engine = probe.read_only_engine(url)
    try:
        probe.reach(engine)
    finally:
        engine.dispose()
    return True


def _refuse_nonempty(conn: sa.Connection, url: sa.URL, extra: tuple[str, ...] = ()) -> None:
    found = verify.nonempty(conn, extra)
    if found:
        held = ", ".join(f"{table} ({n})" for table, n in found.items())
        raise TransferError(
            f"the target {probe.safe_url(url)} is not empty: {held}. Copy only into an empty "
            f"database; nothing was changed"
        )


@contextlib.contextmanager
def snapshot(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One read transaction over everything read (a consistent snapshot)."""
    if engine.dialect.name == "sqlite":
        _explicit_begin(engine)
    try:
        try:
            conn = engine.connect()
        except sa.exc.DBAPIError as exc:
            raise probe.UnusableDatabase(probe.unreachable(engine.url, exc)) from None
        with conn, conn.begin():
            yield conn
    finally:
        engine.dispose()


def analyze(engine: sa.Engine) -> None:
    """Statistics for the planner right after a bulk load, instead of whenever
    autovacuum comes round to it (PostgreSQL only: ANALYZE samples at most
    30,000 rows a table, so this costs well under a second at 10,000
    providers). SQLite's plans are made without statistics on purpose, and
    InnoDB recomputes its own once a tenth of a table has changed."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")


def _writer(url: sa.URL) -> sa.Engine:
    """A plain engine for the upstream target (no WAL: upstream's SQLite files use
    SQLite's default journal)."""
    path = probe.sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = probe.create(url)
        _explicit_begin(engine)
        return engine
    engine = probe.create(url)
    probe.reach(engine)
    return engine


def _explicit_begin(engine: sa.Engine) -> None:
    """pysqlite begins no transaction before a SELECT (nor reliably before DDL):
    BEGIN ourselves, so reads share one snapshot and DDL joins the transaction."""

    @event.listens_for(engine, "connect")
    def _autocommit_driver(dbapi_conn, _record) -> None:  # noqa: ANN001
        dbapi_conn.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql("BEGIN")


def placement_conf_url(value: str) -> str:
    """`--from`/`--to` may name an upstream placement.conf: its database connection."""
    if "://" in value or not Path(value).is_file():
        return value
    from tally.config import read_placement_conf

    url = read_placement_conf(value).get("database_url")
    if not url:
        raise TransferError(f"{value} has no [placement_database] connection")
    return url
