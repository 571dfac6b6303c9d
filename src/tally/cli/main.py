"""The `tally` command."""

from __future__ import annotations

import click

from tally.cli.db import db
from tally.cli.serve import serve


@click.group()
def cli() -> None:
    """Tally: Placement-compatible resource accounting, with a capacity guard."""


cli.add_command(serve)
cli.add_command(db)
