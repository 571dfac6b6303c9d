"""The reference documents every setting, error code and CLI command."""

from __future__ import annotations

from pathlib import Path

import click

from tally.cli.main import cli
from tally.config import SETTINGS
from tally.placement import errors

REFERENCE = (Path(__file__).resolve().parents[2] / "docs" / "reference.md").read_text()


def test_every_setting_is_documented():
    for setting in SETTINGS:
        assert f"`{setting.name}`" in REFERENCE, setting.name
        assert f"`{setting.env}`" in REFERENCE, setting.env


def test_every_error_code_is_documented():
    for code in errors.ALL:
        assert f"`{code}`" in REFERENCE, code


def command_paths(group: click.Group, prefix: str = "tally") -> list[str]:
    paths = []
    for name, command in group.commands.items():
        path = f"{prefix} {name}"
        if isinstance(command, click.Group):
            paths += command_paths(command, path)
        else:
            paths.append(path)
    return paths


def test_every_cli_command_is_documented():
    for path in command_paths(cli):
        assert f"`{path}" in REFERENCE, path
