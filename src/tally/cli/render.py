"""How rows are shown to people, for every command: a rich table when it fits the
terminal with no cell cut (only the columns a command calls prose wrap, at spaces),
else records, one block per row, each value whole on its line; a sentence when there
is nothing to show. Scripts use `-f json|yaml|csv|value` (tally.cli.context.Output).

A terminal is asked for its width once per console; anything else (a pipe, a file, a
log) is 400 columns wide and plain, so lines of uuids are never folded there."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO, Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tally.escapes import visible

PLAIN_WIDTH = 400  # a pipe's or a log's "terminal"
PADDING = 1  # a cell's space on each side


def is_terminal(stream: IO[Any]) -> bool:
    """Whether `stream` is a terminal a person reads (the one place that asks)."""
    return stream.isatty()


def console(err: bool = False) -> Console:
    """A rich console on stdout (or stderr): the terminal's width and colours, or,
    when not writing to a terminal, wide and plain."""
    stream = sys.stderr if err else sys.stdout
    if is_terminal(stream):
        return Console(file=stream, highlight=False)
    return Console(file=stream, width=PLAIN_WIDTH, highlight=False, no_color=True)


class ShownTable(Table):
    """A table whose text cells show what they hold: control characters escaped
    (a line break too: a cell of several lines is given as `lines(text)`), no markup
    read (a name like `[bold]x[/]` prints as written)."""

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        cells = (Text(visible(r)) if isinstance(r, str) else r for r in renderables)
        super().add_row(*cells, **kwargs)


def lines(text: str) -> Text:
    """A cell of several lines (`tally.cli.context.cell`'s), each line escaped."""
    return Text("\n".join(visible(line) for line in text.split("\n")))


def new_table(headers: Sequence[str], prose: Sequence[str] = (), whole: bool = False) -> ShownTable:
    """An empty table: ASCII lines off a terminal (logs, pipes), rich lines on one.
    With `whole` (its rows known to fit: `show_rows`) only the `prose` columns wrap,
    at spaces, and no other cell is cut; else a cell too wide folds, losing nothing."""
    plain = not is_terminal(sys.stdout)
    table = ShownTable(box=box.ASCII2 if plain else box.SIMPLE_HEAVY, show_lines=False)
    for header in headers:
        if whole and header not in prose:
            table.add_column(header, no_wrap=True, min_width=cell_len(header))
        else:
            table.add_column(header, overflow="fold")
    return table


def needed_width(headers: Sequence[str], rows: Sequence[Sequence[str]], prose=()) -> int:
    """The narrowest the table can be with no cell cut: whole columns as wide as
    their longest line, prose ones as their longest word; plus padding and lines."""
    total = len(headers) + 1  # the vertical lines, the edges included
    for n, header in enumerate(headers):
        texts = [header, *(row[n] for row in rows)]
        if header in prose:
            width = max(cell_len(word) for text in texts for word in text.split() or [""])
        else:
            width = max(cell_len(line) for text in texts for line in text.split("\n"))
        total += width + 2 * PADDING
    return total


def records(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> str:
    """One block per row, blank-line separated: `name  value` lines (empty values
    left out); a value too long for its line starts on the next one, indented, so
    that it is never broken by us (a longer one is the terminal's to wrap)."""
    label = max(cell_len(h) for h in headers)
    blocks = []
    for row in rows:
        block = []
        for header, value in zip(headers, row, strict=True):
            if not value:
                continue
            parts = value.split("\n")
            if len(parts) == 1 and label + 2 + cell_len(value) > width:
                block += [header, f"  {value}"]
                continue
            block.append(f"{header:<{label}}  {parts[0]}")
            block += [f"{'':<{label}}  {part}" for part in parts[1:]]
        blocks.append("\n".join(block))
    return "\n\n".join(blocks)


def show_rows(
    headers: Sequence[str], rows: Sequence[Sequence[str]], prose: Sequence[str] = (), empty=""
) -> None:
    """Rows of text (already cells) for people: a table when it fits, else records;
    `empty` (a sentence) when there are none."""
    con = console()
    if not rows:
        if empty:
            con.print(Text(empty))
        return
    if needed_width(headers, rows, prose) <= con.width:
        table = new_table(headers, prose, whole=True)
        for row in rows:
            table.add_row(*map(lines, row))
        con.print(table)
    else:
        con.print(Text(records(headers, rows, con.width)), soft_wrap=True)
