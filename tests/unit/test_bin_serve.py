"""`bin/serve` installs the extras the settings need: the driver of the configured
database (TALLY_DATABASE_URL, or placement.conf's connection) and keystonemiddleware
with keystone, each once. Run in a copy of the checkout whose .venv's pip and
tally only record how they were called (its python is this one, on this src)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def checkout(tmp_path: Path) -> Path:
    tree = tmp_path / "tally"
    (tree / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "bin" / "serve", tree / "bin" / "serve")
    shutil.copy(ROOT / "pyproject.toml", tree)
    venv = tree / ".venv" / "bin"
    venv.mkdir(parents=True)
    scripts = {
        "python": f'PYTHONPATH="{ROOT / "src"}" exec "{sys.executable}" "$@"',
        "pip": f'echo "pip $*" >>"{tmp_path / "calls"}"',
        "tally": f'echo "tally $*" >>"{tmp_path / "calls"}"',
    }
    for name, body in scripts.items():
        (venv / name).write_text(f"#!/bin/sh\n{body}\n")
        (venv / name).chmod(0o755)
    return tree


def serve(tmp_path: Path, *args: str, **settings: str) -> list[str]:
    """What `bin/serve ARGS` called this time."""
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALLY_", "PYTHON"))}
    done = subprocess.run(
        [tmp_path / "tally" / "bin" / "serve", *args],
        env={**env, **settings},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return calls.read_text().splitlines()


def test_the_driver_of_the_configured_database_is_installed_once(tmp_path):
    checkout(tmp_path)
    assert serve(tmp_path) == ["pip install -q -e .", "tally serve"]  # SQLite: no driver
    mysql = {"TALLY_DATABASE_URL": "mysql+pymysql://tally:pw@db.example/tally"}
    assert serve(tmp_path, "--port", "9000", **mysql) == [
        "pip install -q -e .[mysql]",
        "tally serve --port 9000",
    ]
    assert serve(tmp_path, **mysql) == ["tally serve"]  # installed already
    postgres = {"TALLY_DATABASE_URL": "postgresql+psycopg://tally@db.example/tally"}
    assert serve(tmp_path, **postgres, TALLY_AUTH_STRATEGY="keystone") == [
        "pip install -q -e .[keystone,mysql,postgres]",
        "tally serve",
    ]


def test_placement_conf_given_to_serve_names_the_driver(tmp_path):
    checkout(tmp_path)
    conf = tmp_path / "placement.conf"
    conf.write_text("[placement_database]\nconnection = mysql+pymysql://p:pw@db/placement\n")
    assert serve(tmp_path, "--placement-conf", str(conf)) == [
        "pip install -q -e .",
        "pip install -q -e .[mysql]",
        f"tally serve --placement-conf {conf}",
    ]
