"""How Tally is installed and which one is installed: the distribution is
`tally-placement` (the command stays `tally`), and `tally --version` says its version
from the installed distribution's metadata."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from click.testing import CliRunner

from tally.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def test_version_comes_from_the_installed_distribution():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"tally, version {importlib.metadata.version('tally-placement')}\n"


def test_the_distribution_is_tally_placement_and_the_command_tally():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "tally-placement"
    assert project["scripts"] == {"tally": "tally.cli.main:cli"}


def test_every_install_hint_works_from_where_the_reader_is():
    """No index has tally-placement: the README, the docs, bin/ and the code say
    `pip install '.[EXTRA]'` (from the checkout), a wheel built there, or the
    extra's own packages, and every extra they name exists."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(extras["optional-dependencies"])
    texts = [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "src").rglob("*.py"),
        *(ROOT / "bin").iterdir(),
    ]
    from_an_index = []
    named = set()
    for path in texts:
        text = path.read_text()
        from_an_index += [
            f"{path.relative_to(ROOT)}: {hint}"
            for hint in re.findall(r"pip install (?:-\w+ )*'?(tally[\w.-]*\[?)", text)
        ]
        for found in re.findall(r"""['"]?(?:-e )?['"]?\.\[([\w,]+)\]""", text):
            named.update(found.split(","))
    assert from_an_index == []
    assert named and named <= extras, named - extras


def test_a_missing_extra_is_named_for_the_python_running_tally():
    from tally.install import hint

    assert hint("mysql") == (
        f"`{sys.executable} -m pip install 'pymysql>=1.1'` (Tally's [mysql] extra; from "
        "Tally's checkout: `pip install '.[mysql]'`)"
    )
    assert hint("keystone").startswith(
        f"`{sys.executable} -m pip install 'keystonemiddleware>=10' 'openstacksdk>=3'`"
    )
