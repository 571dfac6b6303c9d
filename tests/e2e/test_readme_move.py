"""The README's "Move an existing cloud to Tally (and back)", run as written: its
database URLs pointed at SQLite files, the upstream one holding placement_books'
cloud in upstream's schema (as `tally db export` writes it; test_upstream_move.py
checks that schema against upstream Placement's own)."""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tally.books import move
from tally.config import Settings
from tally.db import upstream_schema as upstream
from tally.db.engine import make_engine
from tally.placement.app import create_app
from tally.placement.ledger.bootstrap import prepare_database
from tests.e2e import placement_books as books

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = "mysql+pymysql://placement:secret@db.example.org/placement"
TALLY = "postgresql+psycopg://tally:secret@db.example.org/tally"
BACK = "mysql+pymysql://placement:secret@db.example.org/placement_back"
INSTALL = ".venv/bin/pip install -e '.[mysql,postgres]'"
DRIVERS = "python -c 'import pymysql, psycopg'"  # what that installs, here already


def move_script() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Move an existing cloud to Tally (and back)", 1)[1]
    return re.search(r"```sh\n(.*?)```", section.split("\n## ", 1)[0], re.S).group(1)


def upstream_books(tmp: Path) -> Path:
    """An upstream-schema SQLite file holding the books (SQLite's default journal)."""
    engine = make_engine(f"sqlite:///{tmp / 'made' / 'tally.sqlite'}")
    prepare_database(engine)
    app = create_app(Settings.of(over_capacity="allow"), engine)
    books.populate(books.Api("http://tally", httpx.WSGITransport(app=app)))
    path = tmp / "placement.sqlite"
    move.export_to(str(engine.url), f"sqlite:///{path}", lambda *_: None)
    engine.dispose()
    return path


def test_readme_move_runs_as_written(tmp_path):
    source = upstream_books(tmp_path)
    untouched = hashlib.sha256(source.read_bytes()).hexdigest()
    script = move_script()
    for example, ours in (
        (INSTALL, DRIVERS),
        (BACK, f"sqlite:///{tmp_path / 'back.sqlite'}"),  # before UPSTREAM, its prefix
        (UPSTREAM, f"sqlite:///{source}"),
        (TALLY, f"sqlite:///{tmp_path / 'tally' / 'tally.sqlite'}"),
    ):
        assert example in script
        script = script.replace(example, ours)
    lines = [line for line in script.splitlines() if line.strip() and not line.startswith("#")]
    marked = "".join(f'{line}\necho "::status::$?"\n' for line in lines)
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "TALLY_"))}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    done = subprocess.run(
        ["bash", "-c", marked], env=env, capture_output=True, text=True, timeout=300
    )
    chunks = re.split(r"::status::(\d+)\n", done.stdout)
    outputs = list(zip(lines[3:], chunks[6::2], strict=False))
    statuses = [int(code) for code in chunks[1::2]]
    assert statuses == [0, 0, 0, 1, 0, 0, 0, 0], (done.stdout, done.stderr[-3000:])
    refused, dry, imported, served, exported = (text for _, text in outputs)
    assert "is an upstream Placement database (schema revision a082b8bb98d0" in done.stderr
    assert "nothing was written" in dry and books.uid("cn3") in dry
    assert "checked equal" in imported and books.uid("cn3") in imported
    assert served.startswith("200") and '"name": "cn1-pf0"' in served.replace('":"', '": "')
    assert "exported 7 providers, 6 consumers, 13 allocations" in exported
    assert hashlib.sha256(source.read_bytes()).hexdigest() == untouched
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    with sqlite3.connect(tmp_path / "back.sqlite") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (
            upstream.HEAD,
        )
        assert conn.execute("SELECT COUNT(*) FROM consumers").fetchone() == (6,)
