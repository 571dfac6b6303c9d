"""The one syntax of a shape typed by an operator: resource classes and amounts,
`VCPU=4,MEMORY_MB:8192`, each piece `CLASS=N` or `CLASS:N`, comma-separated.

`tally capacity --resource`, `tally explain candidates --resource`, the resource
filters of `tally provider list` and `tally allocation candidate list`, the page's
capacity box (`?shape=`) and the `capacity_shapes` setting all read it here.
"""

from __future__ import annotations

import re

CLASS = re.compile(r"[A-Z0-9_]+")  # Placement's names: standard classes and CUSTOM_*
EXAMPLE = "VCPU=4,MEMORY_MB=8192"
_PIECE = re.compile(r"([^=:]*)[=:]([^=:]*)")  # one separator, `=` or `:`


class ShapeError(ValueError):
    """A shape that does not read; the message names the piece at fault."""


def parse_shape(text: str, sep: str = ",") -> dict[str, int]:
    """`VCPU=4,MEMORY_MB:8192` -> {"VCPU": 4, "MEMORY_MB": 8192}; ShapeError naming
    the bad piece. Spaces around pieces and separators are ignored; every amount is a
    whole number of at least 1 (however large: Placement answers "nothing fits").
    `sep` joins the pieces (`+` where a comma already ends a list's item)."""
    shape: dict[str, int] = {}
    if not text.strip():
        raise ShapeError(f"no resources given (for example {EXAMPLE})")
    for piece in (p.strip() for p in text.split(sep)):
        if not piece:
            raise ShapeError(f"{text.strip()!r} has an empty piece (a {sep!r} with nothing after)")
        match = _PIECE.fullmatch(piece)
        if not match:
            raise ShapeError(f"{piece!r} is not CLASS=N or CLASS:N (for example {EXAMPLE})")
        name, amount = match.group(1).strip(), match.group(2).strip()
        if not name:
            raise ShapeError(f"{piece!r} names no resource class")
        if not CLASS.fullmatch(name):
            hint = f" (upper case: {name.upper()})" if CLASS.fullmatch(name.upper()) else ""
            raise ShapeError(f"{piece!r}: {name!r} is not a resource class name{hint}")
        if not amount.isascii() or not amount.isdigit():
            raise ShapeError(f"{piece!r}: the amount {amount!r} is not a whole number")
        if int(amount) < 1:
            raise ShapeError(f"{piece!r}: the amount must be at least 1")
        if name in shape:
            raise ShapeError(f"{piece!r}: {name} is given twice")
        shape[name] = int(amount)
    return shape


def query_value(shape: dict[str, int]) -> str:
    """The shape as Placement's `resources` query value: `VCPU:4,MEMORY_MB:8192`."""
    return ",".join(f"{rc}:{amount}" for rc, amount in shape.items())
