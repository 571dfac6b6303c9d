"""Installing as the docs say, from a checkout: `python -m build` makes the sdist and
the wheel from it, the wheel installs into a fresh venv, and the `tally` there
runs from it: `--version`, `db upgrade` (the migrations are in the wheel) and the
operator page (its templates too) on SQLite.

Offline and quick (about 15 s; tests.live.wheel_venv): the build uses this
environment's setuptools (no isolation), and the fresh venv gets the wheel alone
(`--no-deps`, no index); its dependencies are this environment's site-packages, seen
through a .pth file, and `pip check` there says the wheel's requirements are met."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from tally.db import migrate
from tests.live import wheel_venv

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_built_from_the_checkout_installs_and_runs_in_a_fresh_venv(tmp_path):
    venv = wheel_venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALLY_", "PYTHON"))}
    env["TALLY_DATA_DIR"] = str(tmp_path / "data")

    def run(*command: str | Path) -> str:
        done = subprocess.run(
            [str(part) for part in command], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr[-3000:]}"
        return done.stdout

    imported = run(venv / "bin" / "python", "-c", "import tally; print(tally.__file__)")
    assert imported.startswith(str(venv)), imported  # the wheel's, not the checkout's
    tally = venv / "bin" / "tally"
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run(tally, "--version") == f"tally, version {version}\n"
    assert run(tally, "db", "upgrade") == f"database at revision {migrate.head_revision()}\n"
    page = run(tally, "serve", "--get", "/tally/ui/")
    assert page.startswith("200 OK\n") and "<title>Providers - Tally</title>" in page
