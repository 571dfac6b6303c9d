"""The one renderer of rows (issue 40, items 7, 8 and 11): a table when it fits the
terminal with no cell cut, records (one block per row) when it does not, a sentence
when there is nothing; `-f csv` as the openstack client's; `-c` checked before a
command asks or writes anything; a default column set for `audit` and `history` with
the rest under `--long`."""

from __future__ import annotations

import csv
import io

import pytest
from click.testing import CliRunner

from tally.cli import render
from tally.cli.context import Output
from tally.cli.main import cli
from tests.unit.test_cli_commands import RP, SERVER, make_tally, seeded, tally  # noqa: F401, F811

NOWHERE = ["--url", "http://127.0.0.1:9", "--compute-url", "http://127.0.0.1:9/v2.1"]
FIX = "tally audit --provider 7ace5431-3b28-4d5d-8d26-ded6c8dbb2f6 --delete --apply"


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch):
    """stdout is a terminal of `width` columns (`terminal(80)`)."""

    def make(width: int) -> None:
        monkeypatch.setattr(render, "is_terminal", lambda stream: True)
        monkeypatch.setenv("COLUMNS", str(width))

    return make


ROWS = [
    {"consumer": "2ac73ecf-36a2-45d5-8f42-1a3e03ef99f6", "kind": "orphan", "fix": FIX},
    {"consumer": "9d2a1494-8a99-4615-9fad-ec48d92fc3c1", "kind": "live", "fix": None},
]


def test_a_table_when_it_fits_with_no_cell_cut(terminal, capsys):
    terminal(160)
    Output().rows(["consumer", "kind", "fix"], ROWS)
    lines = capsys.readouterr().out.splitlines()
    assert any(FIX in line and "orphan" in line for line in lines)
    assert max(map(len, lines)) <= 160


def test_records_when_it_does_not(terminal, capsys):
    terminal(80)
    Output().rows(["consumer", "kind", "fix"], ROWS)
    assert capsys.readouterr().out.splitlines() == [
        "consumer  2ac73ecf-36a2-45d5-8f42-1a3e03ef99f6",
        "kind      orphan",
        "fix",
        f"  {FIX}",  # too long for its line: whole on the next one
        "",
        "consumer  9d2a1494-8a99-4615-9fad-ec48d92fc3c1",
        "kind      live",  # an empty value is left out
    ]


def test_prose_columns_wrap_at_spaces_and_keep_it_a_table(terminal, capsys):
    terminal(60)
    rows = [{"kind": "orphan", "reason": "no server, no migration: " * 4}]
    Output().rows(["kind", "reason"], rows, prose=["reason"])
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:1] == ["orphan"] for line in lines)  # a table's row
    assert sum("migration" in line for line in lines) > 1 and max(map(len, lines)) <= 60


def test_nothing_is_a_sentence(capsys):
    Output().rows(["consumer", "kind"], [], empty="Nothing found.")
    Output("csv").rows(["consumer", "kind"], [])
    Output("json").rows(["consumer", "kind"], [])
    assert capsys.readouterr().out == 'Nothing found.\n"consumer","kind"\n[]\n'


def test_csv_lists_as_the_openstack_client(seeded):  # noqa: F811
    found = seeded(f"provider inventory list {RP} -f csv").stdout
    assert found.splitlines()[0] == (
        '"resource_class","allocation_ratio","min_unit","max_unit","reserved",'
        '"step_size","total","capacity","used"'
    )
    assert found.splitlines()[1] == '"VCPU",1.0,1,2147483647,0,1,32,32,20'
    rows = list(csv.DictReader(io.StringIO(seeded("provider list -f csv -c uuid -c name").stdout)))
    assert rows == [{"uuid": RP, "name": "compute-1"}]
    shown = seeded(f"provider allocation show {SERVER} -f csv -c resources").stdout
    assert shown == '"resources"\n"VCPU=20"\n'
    one = seeded(f"provider show {RP} -f csv -c name -c generation").stdout
    assert one == '"name","generation"\n"compute-1",2\n'


def test_csv_is_not_offered_for_reports():
    result = CliRunner().invoke(cli, [*NOWHERE, "explain", RP, "--resource", "VCPU=1", "-f", "csv"])
    assert result.exit_code == 127 and "'csv' is not one of" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "-c", "fixes"],
        ["history", "-c", "when"],
        ["lab", "break", "delete-while-down", "-c", "sever"],
        ["heal", "-c", "servers"],
        ["failures", "-c", "requests"],
    ],
)
def test_an_unknown_column_is_refused_before_anything_is_asked(args):
    result = CliRunner().invoke(cli, [*NOWHERE, *args])
    assert result.exit_code == 127, result.output
    assert "unknown column" in result.stderr and "cannot reach" not in result.stderr


def test_long_shows_every_column_of_the_table(seeded):  # noqa: F811
    short = seeded(f"history {SERVER}").stdout
    assert "resource_class" in short and "request_id" not in short
    assert "consumer" not in short  # the same on every row: it was asked for
    long = seeded(f"history {SERVER} --long").stdout
    assert "request_id" in long and "global_request_id" in long
    assert "request_id" in seeded(f"history {SERVER} -f json").stdout  # data: every key
