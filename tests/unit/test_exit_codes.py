"""The exit statuses of `tally` (issue 29, item 2): one table, `tally.cli.exits.TABLE`,
which docs/reference.md shows as is; 127 for bad input of every command (click
says 2), 1 for a service that cannot be reached, 255 for the unexpected. The
doctor's outcomes (0, 2, 3, 4 of audit and heal) against the lab:
tests/lab/test_exit_codes.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tally.cli import exits
from tally.cli.context import Context
from tally.cli.main import cli

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
NOWHERE = ["--url", "http://127.0.0.1:9", "--compute-url", "http://127.0.0.1:9/v2.1"]
UUID = "6f0c3b4e-8d3a-4a55-9c2e-0e1f5a7a4d10"


def leaves(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from leaves(command, (*prefix, name))
        else:
            yield (*prefix, name)


COMMANDS = [" ".join(path) for path in leaves(cli)]


def test_the_reference_shows_the_table_as_it_is_decided():
    text = REFERENCE.read_text()
    section = text[text.index("\n## Exit status\n") :]
    rows = re.findall(r"^\| (\d+) \| (.*) \| (.*) \|$", section, re.M)
    assert [(int(code), what, example) for code, what, example in rows] == list(exits.TABLE)
    assert text.count("| status | when | for example |") == 1  # one table of them


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_says_127_to_an_unknown_option(command):
    result = CliRunner().invoke(cli, [*command.split(), "--no-such-option"], obj=Context())
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert "No such option '--no-such-option'" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["no-such-command"],
        ["--os-placement-api-version", "one", "provider", "list"],
        ["provider", "list", "--os-compute-api-version", "2"],
        ["audit", "--stuck-after", "soon"],
        ["audit", "--apply"],
        ["heal", "--dry-run", "--apply"],
        ["capacity", "--resource", "VCPU=1,vcpu:2"],
        ["explain", "candidates", "--resource", "VCPU"],
        ["history", "not-a-uuid"],
        ["provider", "inventory", "set", "x", "--resource", "VCPU"],
        ["-f", "json"],
        # issue 40, item 6: uuids, URLs, amounts and names, before any request
        ["--url", "127.0.0.1:8778", "provider", "list"],
        ["provider", "list", "--compute-url", "compute.example.org/v2.1"],
        ["provider", "allocation", "show", "not-a-uuid"],
        ["provider", "create", "x", "--uuid", "nope"],
        ["provider", "list", "--member-of", f"{UUID},nope"],
        ["provider", "inventory", "set", UUID, "--resource", "VCPU=-4"],
        ["provider", "inventory", "set", UUID, "--resource", "vcpu=4"],
        ["provider", "allocation", "set", UUID, "--allocation", "rp=nope,VCPU=1"],
        ["provider", "allocation", "set", UUID, "--allocation", f"rp={UUID},VCPU=0"],
        ["resource", "class", "show", "vcpu"],
        ["trait", "create", "GOLD"],
        ["audit", "-c", "fixes"],
    ],
)
def test_bad_input_is_127_before_anything_is_asked(args):
    result = CliRunner().invoke(cli, [*NOWHERE, *args])
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert "Traceback" not in result.output and "cannot reach" not in result.output


@pytest.mark.parametrize(
    ("env", "args"),
    [
        ({"TALLY_PORT": "abc"}, ["serve", "--get", "/"]),
        ({}, ["serve", "--config", "/nonexistent/tally.toml", "--get", "/"]),
        ({}, ["db", "version", "--config", "/nonexistent/tally.toml"]),
    ],
)
def test_settings_that_do_not_read_are_bad_input(env, args):
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert "cannot read the settings: " in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize(
    "args", [["provider", "list"], ["audit"], ["heal"], ["capacity", "--resource", "VCPU=1"]]
)
def test_a_service_that_cannot_be_reached_is_1(args):
    result = CliRunner().invoke(cli, [*NOWHERE, *args])
    assert result.exit_code == exits.FAILED, result.output
    assert "cannot reach" in result.stderr and "Traceback" not in result.output


def test_the_unexpected_is_255_with_its_traceback(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("tally.cli.heal.heal_allocations", broken)
    result = CliRunner().invoke(cli, ["heal"], obj=Context())
    assert result.exit_code == exits.UNEXPECTED
    assert "Traceback" in result.stderr and "Error: unexpected RuntimeError: a bug" in result.stderr


@pytest.mark.parametrize(
    ("found", "all_fixed", "write_failed", "status"),
    [
        (False, False, False, 0),
        (True, False, False, 3),
        (True, True, False, 4),
        (True, False, True, 3),  # what could not be written is still found
    ],
)
def test_audit_statuses(found, all_fixed, write_failed, status):
    assert exits.audit_status(found, all_fixed, write_failed) == status


@pytest.mark.parametrize(
    ("write_failed", "stranded", "more", "healed", "status"),
    [
        (False, False, False, True, 0),
        (False, False, True, True, 1),
        (False, True, False, True, 2),
        (True, True, True, True, 3),  # a failed write says so first
        (False, False, False, False, 4),
    ],
)
def test_heal_statuses(write_failed, stranded, more, healed, status):
    assert exits.heal_status(write_failed, stranded, more, healed) == status


def test_a_reader_gone_ends_quietly_with_141():
    """`tally ... | head -1` reading less than the output: no BrokenPipeError
    traceback, and the shell's status for a program its pipe closed (issue 40)."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    tally = Path(sys.executable).with_name("tally")
    done = subprocess.run([str(tally), "db", "--help"], stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    assert done.returncode == exits.CLOSED_PIPE == 141
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr, done.stderr
