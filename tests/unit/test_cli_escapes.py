"""What the CLI prints for people shows control characters, it does not obey them
(issue 37, item 7: `tally provider list` wrote a provider name's terminal escape
sequences to the terminal). Tables and plain values show them escaped (`\\x1b`), and
a name that looks like rich markup prints as written; `-f json` and `-f yaml` stay
exact data.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tally.cli.context import Output, cell
from tests.unit.test_cli_commands import make_tally  # noqa: F401 - the fixture

# A title change, red text, a line of its own, a CSI in C1, a BEL, rich markup.
EVIL = "ok\x1b]0;pwned\x07\x1b[31mRED\nforged line\x9b2J\x7f[bold]x[/bold] [/]"
UUID = "6f0c3b4e-8d3a-4a55-9c2e-0e1f5a7a4d10"
SHOWN = "ok\\x1b]0;pwned\\x07\\x1b[31mRED\\x0aforged line\\x9b2J\\x7f[bold]x[/bold] [/]"


@pytest.fixture
def tally(make_tally):  # noqa: F811
    run = make_tally()
    made = run("provider", "create", "--uuid", UUID, EVIL, "-f", "json")
    assert made.exit_code == 0
    return run


def _control(text: str) -> list[str]:
    """Control characters in `text`, but the newlines that end lines."""
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]


@pytest.mark.parametrize("fmt", ["table", "value"])
def test_provider_list_shows_control_characters_escaped(tally, fmt):
    shown = tally("provider", "list", "-f", fmt, "-c", "name").stdout
    assert _control(shown) == []
    assert SHOWN in shown
    assert "forged line" not in shown.splitlines()[-1:]  # no line of its own


def test_provider_show_escapes_too(tally):
    shown = tally("provider", "show", UUID).stdout
    assert _control(shown) == []
    assert SHOWN in shown


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_data_formats_stay_exact(tally, fmt):
    text = tally("provider", "list", "-f", fmt, "-c", "name").stdout
    data = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    assert data == [{"name": EVIL}]
    assert _control(text) == []  # escaped by the format itself


def test_a_cell_keeps_its_own_line_breaks_and_escapes_the_values():
    nested = {"a": {"x": "1\n2"}, "b": {"y": "\x1b[0m"}}
    assert cell(nested) == "a: x=1\\x0a2\nb: y=\\x1b[0m"
    assert cell(["\x07", "fine"]) == "\\x07, fine"


def test_rows_print_markup_as_written(capsys):
    Output("table").rows(["name"], [{"name": "[red]r[/red] [/]"}])
    assert "[red]r[/red] [/]" in capsys.readouterr().out


def test_an_error_quoting_a_name_escapes_it(tally):
    refused = tally("provider", "create", "--uuid", UUID, EVIL, code=1)
    assert "Error: " in refused.stderr
    assert _control(refused.stderr) == []
