"""Which connection gives its place to a new one when a worker holds as many as it
may (`Limits.connections`), and which request gives up its body when the bodies
held pass `Limits.bodies`: clients that hold connections open, silent or sending
slowly, cannot keep anyone else out, since the one that waited longest goes first.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

_holding: weakref.WeakSet[Any] = weakref.WeakSet()  # requests holding a body (parsers)


def longest_waiting(channels: Iterable[Any]) -> Any | None:
    """The connection to close first: the one idle longest between requests, else the
    one whose request began longest ago and is still arriving; never one with a
    request being answered or an answer being sent (None when every one is)."""
    best, best_key = None, None
    for channel in channels:
        if channel.requests or channel.total_outbufs_len or channel.will_close:
            continue
        request = channel.request
        # (idle ones first, by their last activity; then by their request's start)
        key = (0, channel.last_activity) if request is None else (1, request.started)
        if best_key is None or key < best_key:
            best, best_key = channel, key
    return best


def body_to_refuse(request: Any, bound: int) -> Any | None:
    """`request` holds `body_held` bytes now: if the bodies of every request still
    arriving hold more than `bound`, the one whose request began longest ago (to
    refuse: bodies spill to temporary files, and a thousand slow senders would fill
    the disk); None while within the bound."""
    _holding.add(request)
    arriving = [r for r in _holding if not r.completed]
    if sum(r.body_held for r in arriving) <= bound:
        return None
    return min(arriving, key=lambda r: r.started)
