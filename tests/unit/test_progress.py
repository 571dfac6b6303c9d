"""The phases of a long command on stderr (tally.cli.progress): off a terminal a line
when a phase begins and at most one every few seconds while it goes on; on a
terminal a bar per phase, the one before shown finished."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from tally.cli.progress import Bars, Lines


def test_lines_say_each_phase_and_then_every_few_seconds():
    now = [0.0]
    out = io.StringIO()
    lines = Lines("import", out, every=5.0, clock=lambda: now[0])
    for at, phase, done, total in [
        (0.0, "read rows", 0, 0),
        (1.0, "read rows", 1000, 0),  # too soon
        (5.5, "read rows", 5000, 0),
        (6.0, "write rows", 0, 20000),  # a new phase: at once
        (7.0, "write rows", 5000, 20000),
        (11.0, "write rows", 20000, 20000),
        (11.5, "commit", 0, 0),
    ]:
        now[0] = at
        lines(phase, done, total)
    assert out.getvalue().splitlines() == [
        "import: read rows",
        "import: read rows 5000",
        "import: write rows 0/20000",
        "import: write rows 20000/20000",
        "import: commit",
    ]


def test_bars_show_one_task_a_phase_and_finish_the_one_before():
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    with Progress(console=console, auto_refresh=False) as bar:
        bars = Bars(bar)
        bars("read rows", 3000, 0)
        bars("write rows", 500, 2000)
        read, write = bar.tasks
    assert (read.description, read.completed, read.finished) == ("read rows", 3000, False)
    assert read.stop_time is not None  # over: no longer timed
    assert (write.description, write.completed, write.total) == ("write rows", 500, 2000)
