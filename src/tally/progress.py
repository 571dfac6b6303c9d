"""The one shape of a progress report, for work that takes a while (`tally db
import`, the doctor's reads): `progress(phase, done, total)`, called as the work
goes; `phase` names what is under way ("write rows"), `total` is 0 when not known.
How it is shown is the caller's (tally.cli.progress)."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, int, int], None]


def quiet(phase: str, done: int, total: int) -> None:
    """A report nobody reads."""
