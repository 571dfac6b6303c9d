"""How far a long command has got, on stderr (stdout stays the data).

On a terminal: a rich bar per phase, with a spinner and the time it has taken, so no
phase looks frozen while it works. Otherwise (ansible, systemd, `| tee`): one line
when a phase begins, then at most one every `EVERY` seconds while it goes on:

    import: read rows 150000
    import: write rows 120000/322000
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

EVERY = 5.0  # seconds between two lines of one phase, off a terminal


class Lines:
    """Phase lines for a log: `COMMAND: PHASE DONE/TOTAL`, paced by `clock`."""

    def __init__(
        self,
        command: str,
        stream: TextIO,
        every: float = EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.command, self.stream, self.every, self.clock = command, stream, every, clock
        self.phase: str | None = None
        self.said_at = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = self.clock()
        if phase == self.phase and now - self.said_at < self.every:
            return
        self.phase, self.said_at = phase, now
        count = f" {done}/{total}" if total else f" {done}" if done else ""
        print(f"{self.command}: {phase}{count}", file=self.stream, flush=True)


class Bars:
    """A rich bar per phase on a terminal; the one before is shown finished."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.tasks: dict[str, Any] = {}
        self.current: tuple[str, int, int] | None = None  # phase, done, total

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase not in self.tasks:
            if self.current is not None:  # the phase before is over
                before, seen, whole = self.current
                self.bar.update(self.tasks[before], completed=whole or seen)
                self.bar.stop_task(self.tasks[before])
            self.tasks[phase] = self.bar.add_task(phase, total=total or None)
        self.current = (phase, done, total)
        self.bar.update(self.tasks[phase], completed=done, total=total or None)


@contextlib.contextmanager
def phases(command: str) -> Iterator[Callable[[str, int, int], None]]:
    """A `tally.progress.Progress` for `command`: bars on a terminal, lines otherwise."""
    if not sys.stderr.isatty():
        yield Lines(command, sys.stderr)
        return
    from tally.cli.context import console

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console(err=True), transient=True) as bar:
        yield Bars(bar)
