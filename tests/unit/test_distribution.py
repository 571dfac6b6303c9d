"""How Tally is installed and which one is installed: the distribution is
`tally-placement` (the command stays `tally`), and `tally --version` says its version
from the installed distribution's metadata."""

from __future__ import annotations

import importlib.metadata
import re
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


def test_every_install_hint_names_the_distribution():
    texts = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "src").rglob("*.py")]
    hints = [
        f"{path.relative_to(ROOT)}: {hint}"
        for path in texts
        for hint in re.findall(r"pip install (?:-\w+ )*'?(tally[\w.-]*)", path.read_text())
        if hint != "tally-placement"
    ]
    assert hints == []
