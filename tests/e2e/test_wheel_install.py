"""Installing as the docs say, from a checkout: `python -m build` makes the sdist and
the wheel from it, the wheel installs into a fresh venv, and the `tally` there
runs from it: `--version`, `db upgrade` (the migrations are in the wheel) and the
operator page (its templates too) on SQLite.

Offline and quick (about 15 s): the build uses this environment's setuptools (no
isolation), and the fresh venv gets the wheel alone (`--no-deps`, no index); its
dependencies are this environment's site-packages, seen through a .pth file, and
`pip check` there says the wheel's requirements are met by them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from tally.db import migrate

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run(*command: str | Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{command}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_wheel_built_from_the_checkout_installs_and_runs_in_a_fresh_venv(tmp_path):
    pytest.importorskip("build", reason="`build` is in the test extra: pip install '.[test]'")
    tree = tmp_path / "checkout"  # a copy: the build writes build/ and *.egg-info in place
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp_path / "dist", tree)
    [wheel] = (tmp_path / "dist").glob("tally_placement-*-py3-none-any.whl")

    venv = tmp_path / "fresh"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python]
    run(*pip, "install", "--no-deps", "--no-index", "--disable-pip-version-check", wheel)
    fresh_site = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    )
    (fresh_site / "_this_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(*pip, "check", "--disable-pip-version-check")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALLY_", "PYTHON"))}
    env["TALLY_DATA_DIR"] = str(tmp_path / "data")
    tally = venv / "bin" / "tally"
    imported = run(python, "-c", "import tally; print(tally.__file__)", env=env)
    assert imported.startswith(str(fresh_site)), imported  # the wheel's, not the checkout's
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run(tally, "--version", env=env) == f"tally, version {version}\n"
    head = migrate.head_revision()
    assert run(tally, "db", "upgrade", env=env) == f"database at revision {head}\n"
    page = run(tally, "serve", "--get", "/tally/ui/", env=env)
    assert page.startswith("200 OK\n") and "<title>Providers - Tally</title>" in page
