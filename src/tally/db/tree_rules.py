"""The ledger's rules for provider trees as stored: following parents from any
provider reaches a root (a provider without a parent) and never comes round.

The API never writes a parent loop, but a hand-edited database or an imported one
may hold one; an unguarded walk over it never ends (100% CPU, its list growing
until the process dies). Every walk up a tree goes through `walk_up`, which stops
at a loop and names its providers; `loops` finds every loop of a whole table, for
`tally db check` and `tally db import`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


class ParentLoop(Exception):
    """Providers that are each other's ancestors: `loop`, in parent order, the
    smallest id first."""

    def __init__(self, loop: list[int]) -> None:
        self.loop = _from_smallest(loop)
        super().__init__(f"providers {', '.join(map(str, self.loop))} form a parent loop")


def walk_up(rp: int, parent_of: Callable[[int], int | None]) -> list[int]:
    """`rp` and its ancestors, its root last; ParentLoop when the parents come round."""
    line: list[int] = []
    seen: dict[int, int] = {}
    node: int | None = rp
    while node is not None:
        if node in seen:
            raise ParentLoop(line[seen[node] :])
        seen[node] = len(line)
        line.append(node)
        node = parent_of(node)
    return line


def loops(parents: Mapping[int, int | None]) -> list[list[int]]:
    """Every parent loop among `parents` (provider id -> parent id), each once, in
    parent order from its smallest id; a parent missing from `parents` ends a walk
    (another rule reports it). Each provider is visited once: linear in the table."""
    done: set[int] = set()
    found = []
    for start in parents:
        path: dict[int, int] = {}  # the providers of this walk -> their place in it
        node: int | None = start
        while node is not None and node in parents and node not in done and node not in path:
            path[node] = len(path)
            node = parents[node]
        if node is not None and node in path:  # came round within this walk
            found.append(_from_smallest(list(path)[path[node] :]))
        done.update(path)
    return sorted(found)


def _from_smallest(loop: list[int]) -> list[int]:
    at = loop.index(min(loop))
    return loop[at:] + loop[:at]
