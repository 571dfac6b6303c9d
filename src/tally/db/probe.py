"""What a database URL points at, found without changing anything there, and the
one-line refusals for a database Tally must not use: upstream Placement's (or any
schema revision Tally does not know), one that cannot be reached, one whose driver
is not installed.

The probe opens its own short-lived connection, read-only where the driver allows
(a SQLite file with `mode=ro`, so its journal mode stays as it is; PostgreSQL and
MySQL in a read-only transaction), before Tally's engine ever connects: that engine
switches a SQLite file to WAL on its first connection and Alembic stamps a database
it migrates.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import urllib.parse
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from tally.db import forks
from tally.db import upstream_schema as upstream
from tally.db.errors import UnusableDatabase

# Driver module -> (what to say first, the extra of pyproject.toml that has Tally's).
_DRIVER_HINTS = {
    "psycopg": ("install it", "postgres"),
    "pymysql": ("install it", "mysql"),
    "psycopg2": (
        "Tally's PostgreSQL driver is psycopg 3: write the URL as `postgresql+psycopg://...` "
        "and install it",
        "postgres",
    ),
    "MySQLdb": (
        "Tally's MySQL driver is PyMySQL: write the URL as `mysql+pymysql://...` and install it",
        "mysql",
    ),
}


def driver_hint(module: str) -> str:
    """How to get the driver `module`, as it works from where the reader is
    (tally.install: into the Python running Tally, or from Tally's checkout)."""
    if module not in _DRIVER_HINTS:
        return f"install the Python package that provides {module!r}"
    from tally.install import hint

    first, extra = _DRIVER_HINTS[module]
    return f"{first}: {hint(extra)}"


# backend -> (dialect, driver) Tally installs; the module of a driver by its name
_OUR_DRIVERS = {
    "postgresql": ("postgresql", "psycopg"),
    "mysql": ("mysql", "pymysql"),
    "mariadb": ("mariadb", "pymysql"),
}
_MODULES = {"mysqldb": "MySQLdb"}
CONNECT_TIMEOUT = 10  # seconds, for the probe's own connection


@dataclasses.dataclass(frozen=True)
class Found:
    """What a database holds. kind: `absent` (no SQLite file yet), `empty` (no
    Placement tables), `tally`, `upstream`, `unknown` (a revision neither Tally's
    nor upstream's), `unstamped` (Placement tables without a schema revision)."""

    kind: str
    revision: str | None = None
    tables: frozenset[str] = frozenset()


def safe_url(url: str | sa.URL) -> str:
    return sa.engine.make_url(url).render_as_string(hide_password=True)


def sqlite_path(url: sa.URL) -> Path | None:
    """The file of a SQLite URL (None in memory)."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).expanduser().resolve()


def create(url: str | sa.URL, **options: object) -> sa.Engine:
    """sa.create_engine, with a missing driver or dialect told in one line."""
    url = parse(url)
    try:
        engine = sa.create_engine(url, **options)
    except (ImportError, sa.exc.NoSuchModuleError) as exc:
        module = getattr(exc, "name", None) or str(exc).rsplit(":", 1)[-1].strip(" '\"")
        raise UnusableDatabase(
            f"cannot use {safe_url(url)}: its driver ({module}) is not installed; "
            f"{driver_hint(module)}."
        ) from None
    forks.track(engine)  # its connections never cross a fork
    return engine


def with_our_driver(url: str | sa.URL) -> sa.URL:
    """An upstream URL as placement.conf writes it (`postgresql+psycopg2://`, or
    `mysql://`, which means MySQLdb), on Tally's driver when theirs is missing."""
    url = parse(url)
    ours = _OUR_DRIVERS.get(url.get_backend_name())
    if ours is None or url.get_driver_name() == ours[1]:
        return url
    module = url.get_driver_name()
    if _importable(_MODULES.get(module, module)) or not _importable(ours[1]):
        return url
    return url.set(drivername=f"{ours[0]}+{ours[1]}")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def parse(url: str | sa.URL) -> sa.URL:
    try:
        return sa.engine.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise UnusableDatabase(f"not a database URL: {exc}") from None


def read_only_engine(url: str | sa.URL) -> sa.Engine:
    """An engine that cannot write where the driver allows it, and leaves a SQLite
    file's journal mode alone; a missing SQLite file is refused (never created)."""
    url = parse(url)
    path = sqlite_path(url)
    if url.get_backend_name() == "sqlite":
        if path is None or not path.is_file():
            raise UnusableDatabase(f"no SQLite database at {str(path or url.database)!r}")
        ro = f"file:{urllib.parse.quote(str(path))}?mode=ro"  # our URI, not SQLAlchemy's

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(ro, uri=True, timeout=5, check_same_thread=False)

        return create("sqlite://", poolclass=NullPool, creator=connect)
    backend = url.get_backend_name()
    connect_args: dict[str, object] = {}
    if url.get_driver_name() in ("psycopg", "pymysql"):
        connect_args["connect_timeout"] = CONNECT_TIMEOUT
    engine = create(url, poolclass=NullPool, connect_args=connect_args)
    if backend == "postgresql":
        return engine.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    if backend in ("mysql", "mariadb"):

        @sa.event.listens_for(engine, "connect")
        def _read_only(dbapi_conn, _record) -> None:  # noqa: ANN001
            cur = dbapi_conn.cursor()
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cur.close()

    return engine


def identify(url: str | sa.URL) -> Found:
    """What the database holds; raises what connecting raised (SQLAlchemy errors)."""
    url = parse(url)
    if url.get_backend_name() == "sqlite":
        path = sqlite_path(url)
        if path is None or not path.exists():
            return Found("absent")
    engine = read_only_engine(url)
    try:
        with engine.connect() as conn:
            return identify_connection(conn)
    finally:
        engine.dispose()


def look(url: str | sa.URL) -> Found:
    """identify(), with a database that cannot be reached refused in one line."""
    try:
        return identify(url)
    except sa.exc.DBAPIError as exc:
        raise UnusableDatabase(unreachable(url, exc)) from None


def identify_connection(conn: sa.Connection) -> Found:
    tables = frozenset(sa.inspect(conn).get_table_names())
    if "alembic_version" not in tables:
        return Found("unstamped" if "resource_providers" in tables else "empty", None, tables)
    revision = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    if revision is None:
        return Found("empty", None, tables)
    if revision in upstream.REVISIONS:
        return Found("upstream", revision, tables)
    kind = "tally" if revision in tally_revisions() else "unknown"
    return Found(kind, revision, tables)


def tally_revisions() -> set[str]:
    from alembic.script import ScriptDirectory  # only for a database that has a revision

    from tally.db.migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config())
    return {rev.revision for rev in script.walk_revisions()}


def refusal(url: str | sa.URL, found: Found) -> str | None:
    """Why Tally will not serve or migrate this database (None: it may)."""
    where = safe_url(url)
    if found.kind == "upstream":
        head = f", the head of {upstream.RELEASE}" if found.revision == upstream.HEAD else ""
        return (
            f"{where} is an upstream Placement database (schema revision {found.revision}"
            f"{head}). Tally keeps its own schema and has changed nothing there: copy it into "
            f"an empty database with `tally db import --from {where}` and point Tally at "
            f"that one (database_url / TALLY_DATABASE_URL)."
        )
    if found.kind == "unknown":
        return (
            f"{where} is at schema revision {found.revision}, which this Tally does not know "
            f"(a newer Tally's, or another program's database); nothing was changed."
        )
    if found.kind == "unstamped":
        return (
            f"{where} holds Placement tables but no schema revision (a nova_api database, or "
            f"a Placement database never stamped by `placement-manage db sync`); nothing was "
            f"changed."
        )
    return None


def refuse_foreign(url: str | sa.URL, strict: bool = False) -> Found | None:
    """Raise UnusableDatabase for a database Tally must not touch. Not `strict` (an
    app being built, which answers 503 while its database is down): a database that
    cannot be read now passes. `strict` (a command about to migrate or copy): it is
    refused too, with the reason."""
    url = parse(url)
    try:
        found = look(url) if strict else identify(url)
    except sa.exc.DBAPIError:
        return None
    why = refusal(url, found)
    if why:
        raise UnusableDatabase(why)
    return found


def refuse_unmigrated(url: str | sa.URL) -> None:
    """For an app that does not migrate (tally.serve.wsgi): refuse what `refuse_foreign`
    refuses, and a database without Tally's newest schema. One that cannot be read
    now passes (the app answers 503 while its database is down)."""
    url = with_our_driver(url)
    try:
        found = identify(url)
    except sa.exc.DBAPIError:
        return
    why = refusal(url, found)
    if why:
        raise UnusableDatabase(why)
    if found.kind in ("absent", "empty"):
        why = f"{safe_url(url)} holds no Tally schema"
    elif found.revision != _head():
        why = (
            f"{safe_url(url)} is at Tally schema revision {found.revision}, older than this "
            f"Tally's {_head()}"
        )
    else:
        return
    raise UnusableDatabase(
        f"{why}: run `tally db upgrade` with the same settings first (as "
        f"`placement-manage db sync` for upstream Placement); nothing was changed."
    )


def _head() -> str | None:
    from tally.db.migrate import head_revision

    return head_revision()


def reach(engine: sa.Engine) -> None:
    """Connect once; a database that cannot be reached is refused in one line."""
    try:
        with engine.connect():
            pass
    except sa.exc.DBAPIError as exc:
        raise UnusableDatabase(unreachable(engine.url, exc)) from None


def unreachable(url: str | sa.URL, exc: sa.exc.DBAPIError) -> str:
    return f"cannot reach database {safe_url(url)}: {reason(exc)}"


def reason(exc: sa.exc.DBAPIError) -> str:
    """The driver's own words, on one line."""
    orig = exc.orig
    args = getattr(orig, "args", ())
    if len(args) == 2 and isinstance(args[0], int):  # PyMySQL: (errno, message)
        text = f"{args[1]} ({args[0]})"
    else:
        text = str(orig) if orig is not None else str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(orig).__name__
