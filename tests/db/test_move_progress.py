"""`tally db import` and `tally db export` say how far they have got (issue 40, item
10: 20,000 providers imported in 25 s with nothing printed when stderr is not a
terminal, and ~20 s of bars frozen at 100% on one, while the copy was compared with
its source). Every phase of the work reports as it goes, the comparison in rows;
off a terminal, each phase is a line on stderr (tests/unit/test_progress.py: the
pace, and the bars)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tally.books import move
from tally.cli.main import cli
from tally.placement.ledger.bootstrap import prepare_database
from tally.progress import quiet

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])

IMPORT = ["read rows", "check rules", "prepare the target", "write rows"]
IMPORT += ["compare with the source", "commit"]
EXPORT = ["read rows", "prepare the target", "write rows", "compare with the source", "commit"]
COUNTED = ("check rules", "write rows", "compare with the source")  # done of a known total


def url_of(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def recorder() -> tuple[list[tuple[str, int, int]], object]:
    said: list[tuple[str, int, int]] = []
    return said, lambda phase, done, total: said.append((phase, done, total))


def assert_advancing(said: list[tuple[str, int, int]], phases: list[str]) -> None:
    assert list(dict.fromkeys(phase for phase, _, _ in said)) == phases
    for phase in COUNTED:
        counts = [(done, total) for p, done, total in said if p == phase]
        if not counts:
            continue
        total = counts[0][1]
        assert total > 0 and counts[-1] == (total, total), (phase, counts)
        done = [d for d, _ in counts]
        assert done == sorted(done) and len(set(done)) > 2, (phase, counts)  # steps between
    read = [done for phase, done, _ in said if phase == "read rows"]
    assert read == sorted(read) and read[-1] > 100


def test_every_phase_of_an_export_and_an_import_reports_as_it_goes(populated, new_database):
    upstream = new_database("upstream")
    said, progress = recorder()
    move.export_to(url_of(populated), upstream, progress)
    assert_advancing(said, EXPORT)
    said, progress = recorder()
    move.import_from(upstream, new_database("imported"), prepare_database, progress)
    assert_advancing(said, IMPORT)


def test_off_a_terminal_each_phase_is_a_line_on_stderr(populated, new_database, monkeypatch):
    upstream = new_database("upstream")
    monkeypatch.setenv("TALLY_DATABASE_URL", url_of(populated))
    exported = CliRunner().invoke(cli, ["db", "export", "--to", upstream])
    assert exported.exit_code == 0, exported.output
    monkeypatch.setenv("TALLY_DATABASE_URL", new_database("imported"))
    imported = CliRunner().invoke(cli, ["db", "import", "--from", upstream])
    assert imported.exit_code == 0, imported.output
    for result, command, phases in ((exported, "export", EXPORT), (imported, "import", IMPORT)):
        lines = result.stderr.splitlines()
        assert all(line.startswith(f"{command}: ") for line in lines), lines
        first = [next(line for line in lines if line.startswith(f"{command}: {p}")) for p in phases]
        assert [lines.index(line) for line in first] == sorted(lines.index(line) for line in first)
        assert f"{command}: write rows 0/" in result.stderr
        assert result.stdout.splitlines()[-1].startswith(f"{command}ed ")  # stdout: the data


def test_a_dry_run_reports_its_survey(populated, new_database):
    upstream = new_database("upstream")
    move.export_to(url_of(populated), upstream, quiet)
    said, progress = recorder()
    move.import_from(upstream, new_database("imported"), prepare_database, progress, dry_run=True)
    assert list(dict.fromkeys(phase for phase, _, _ in said)) == [
        "read rows",
        "check rules",
        "survey the source",
    ]
