"""A serving worker's memory: kept for the next big answer, handed back after
an unusual one, and no garbage collection over work that makes no cycles."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import threading
from collections.abc import Iterator

log = logging.getLogger("tally.serving")

# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
KEEP_FREED_BYTES = 64 << 20  # free heap an arena keeps rather than hand back
FROM_HEAP_BYTES = 32 << 20  # blocks up to this come from the heap (glibc's maximum)
ARENAS = 2  # one thread holds the GIL at a time: more arenas only keep more memory


def keep() -> None:
    """Stop glibc from handing every big answer's memory back to the kernel.

    By default glibc serves a block of a few MB from the heap once one that big was
    freed, and returns the heap's free top to the kernel past a threshold that
    follows the same size: after a listing of 13,000 providers (10 MB, copied twice
    on its way out) the next request on that thread paid 3-4 ms in
    `madvise(MADV_DONTNEED)` of 29 MB, and the next big answer paid again for
    faulting the pages in. Fixed thresholds end that: a one-provider listing right
    after the big one went from 6-7 to 2-3.5 ms, the big listing itself from 61-69
    to 27-34 ms (paired, 10,000 hosts). The cost: up to `KEEP_FREED_BYTES` of free
    heap stays with each of `ARENAS` arenas after a peak. No-op without glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    for param, value in (
        (M_ARENA_MAX, ARENAS),
        (M_MMAP_THRESHOLD, FROM_HEAP_BYTES),
        (M_TRIM_THRESHOLD, KEEP_FREED_BYTES),
    ):
        if mallopt(param, value) != 1:
            log.debug("mallopt(%d, %d) refused", param, value)


RELEASE_AFTER_BYTES = 32 << 20  # an answer this big: its memory goes back once sent
_asked = False  # by a request still being answered
_release_due = False  # by one answered: for the next maintenance tick


def release_soon() -> None:
    """Have the server `release` memory once the request at hand is answered
    (while it is, its frames may still hold what it made)."""
    global _asked
    _asked = True


def after_answer(body_bytes: int) -> None:
    """The server wrote an answer of `body_bytes`: release on the next tick if
    the request asked, or past `RELEASE_AFTER_BYTES` (its peak was one
    request's, rarely asked again; kept memory serves the common big answers:
    see `keep`)."""
    global _asked, _release_due
    if _asked or body_bytes > RELEASE_AFTER_BYTES:
        _asked, _release_due = False, True


def release_if_due() -> None:
    """From the server's maintenance tick, a second or so after the request
    asked (its answer sent and freed by then): collect the young generations
    (a search refused half-way leaves its objects in cycles through the
    exception's frames: 750,000 of them at 250,000 candidates) and hand the
    free memory of every arena back to the kernel (malloc_trim). A worker went
    from 225 to 108 MiB after a refused six-group request (baseline 92), from
    163 to 153 after a 100,000-candidate answer of 52 MB (bench/large_answer.py).
    No trim without glibc."""
    global _release_due
    if not _release_due:
        return
    _release_due = False
    gc.collect(1)  # (not the old generation: a big index would make it a long pause)
    hand_back()


def hand_back() -> None:
    """Hand the free memory of every arena back to the kernel (malloc_trim); no-op
    without glibc."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        return


_gc_lock = threading.Lock()
_gc_pausers = 0


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block: for work that makes
    hundreds of thousands of small containers and no cycles (a big search and
    its answer, a bulk claim). The collector would walk them again and again
    (a third of a search's time at 10,000 trees), and each full collection
    walks every object the worker keeps (kept answers: 90 ms at 400,000).
    They all die by reference counting inside the block and the collector
    never sees them. Counted, so overlapping blocks in other threads keep it
    paused."""
    global _gc_pausers
    with _gc_lock:
        ours = _gc_pausers > 0 or gc.isenabled()  # else someone else turned it off
        if ours:
            _gc_pausers += 1
            gc.disable()
    try:
        yield
    finally:
        if ours:
            with _gc_lock:
                _gc_pausers -= 1
                if _gc_pausers == 0:
                    gc.enable()
