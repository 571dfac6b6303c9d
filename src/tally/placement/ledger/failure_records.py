"""Failed searches: every GET /allocation_candidates that found nothing, kept as a
row of `tally_failures` (the query as received, the microversion, who asked and the
verdict: why nothing fitted), read by `GET /tally/v1/failures` and pruned like the
claim history.

Recording never slows the request that failed: `Recorder.note` puts the note on a
bounded queue and returns; one writer thread of the process writes the queue in
batches, each one short write transaction (`tally.db.transaction`), and prunes
between batches. A full queue drops the note (counted, logged once a minute): a
record of a failure is worth less than the next request's time. The writer is a
background job of `tally.db.forks`: stopped (its queue written first) before a fork,
when a serving process ends and when its engine is disposed, and started again by
the next note; idle for a pruning period, it prunes once more and ends.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import queue
import threading
import time
from typing import Any
from urllib.parse import parse_qsl

import orjson
import sqlalchemy as sa
from sqlalchemy import event

from tally import counts
from tally.config import Settings
from tally.db import forks, retention
from tally.db import schema as t
from tally.db.retry import retrying
from tally.db.transaction import insert_at_commit, transaction

log = logging.getLogger("tally.placement.failures")

__all__ = ["FailureFilter", "FailureNote", "Record", "Recorder", "entries", "mentions", "prune"]

MAX_LIMIT = 1000
BATCH = retention.BATCH
WRITE_BATCH = 100  # notes one write transaction inserts at most
DROP_LOG_SECONDS = 60.0  # a full queue is logged at most this often
PRUNE_PAUSE = 0.02  # between two pruning batches when no note waits


@dataclasses.dataclass(frozen=True)
class FailureNote:
    """One search that found nothing, as the candidates handler saw it."""

    created_at: dt.datetime  # naive UTC
    request_id: str | None
    global_request_id: str | None
    user_id: str | None
    project_id: str | None
    microversion: str  # "1.39"
    query: str  # the query string as received
    reason: str | None  # the verdict's dominant reason
    verdict: dict[str, Any]

    def row(self) -> dict[str, Any]:
        return {
            "created_at": self.created_at,
            "request_id": self.request_id,
            "global_request_id": self.global_request_id,
            "user_id": self.user_id,
            "project_id": self.project_id,
            "microversion": self.microversion,
            "query": self.query,
            "reason": self.reason,
            "verdict": orjson.dumps(self.verdict).decode(),
        }


# ---------------------------------------------------------------- writing


class Recorder:
    """The failed searches of one app: a bounded queue and the thread that writes it."""

    def __init__(
        self,
        engine: sa.Engine,
        keep_days: int = 30,
        keep_rows: int = 100_000,
        queue_size: int = 1000,
        prune_every: float = 60.0,
    ) -> None:
        self.engine, self.keep_days, self.keep_rows = engine, keep_days, keep_rows
        self.prune_every = prune_every
        self.queue_size = max(queue_size, 1)
        self.dropped = 0  # notes refused by a full queue (or a failed write), in all
        self._lock = threading.Lock()
        # The running writer and its own queue (a stopped writer's queue is drained
        # by it alone, so a note that starts the next writer never meets its end).
        self._thread: threading.Thread | None = None
        self._queue: queue.Queue[FailureNote | None] = queue.Queue(self.queue_size)
        self._next_drop_log = 0.0
        self._prune_due = 0.0
        self._more = False  # the last pruning pass left more to delete
        forks.background(self)
        # (a disposed engine's writer ends: tests drop their databases after)
        event.listen(engine, "engine_disposed", lambda _engine: self.stop())

    @classmethod
    def from_settings(cls, engine: sa.Engine, settings: Settings) -> Recorder | None:
        """The app's recorder, or None when the `failures` setting is off."""
        if not settings.failures:
            return None
        return cls(
            engine,
            settings.failures_keep_days,
            settings.failures_keep_rows,
            settings.failures_queue,
            settings.history_prune_seconds,
        )

    def note(self, failure: FailureNote) -> bool:
        """Queue `failure` for the writer (started if it is not running); whether it
        was queued (False: the queue is full, and the note dropped)."""
        counts.unsatisfied_request(failure.reason)
        with self._lock:
            self._start()
            try:
                self._queue.put_nowait(failure)
            except queue.Full:
                self._dropped()
                return False
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued, then end the thread (its connections go back to the
        engine's pool); the next note starts another."""
        with self._lock:
            thread, pending = self._thread, self._queue
            if thread is None:
                return
            self._thread, self._queue = None, queue.Queue(self.queue_size)
        pending.put(None)  # after every note queued so far (waits for room)
        if thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._prune_due = time.monotonic() + self.prune_every
            self._thread = threading.Thread(
                target=self._run, args=(self._queue,), name="tally-failures-writer", daemon=True
            )
            self._thread.start()

    def _dropped(self) -> None:
        self.dropped += 1
        now = time.monotonic()
        if now >= self._next_drop_log:
            self._next_drop_log = now + DROP_LOG_SECONDS
            log.warning(
                "failed searches are coming faster than they are written: %d dropped so far "
                "(setting failures_queue = %d)",
                self.dropped,
                self.queue_size,
            )

    def _run(self, notes: queue.Queue[FailureNote | None]) -> None:
        """Write batch after batch of `notes` until the stop sentinel; prune when due."""
        stopping = False
        while not stopping:
            try:
                first = notes.get(timeout=self._until_prune())
            except queue.Empty:
                self._prune_pass()
                if not self._more and self._retire(notes):
                    return  # idle, and pruned since its last note: the next note starts one
                continue
            batch: list[FailureNote] = []
            item: FailureNote | None = first
            while True:
                if item is None:
                    stopping = True
                    break
                batch.append(item)
                if len(batch) >= WRITE_BATCH:
                    break
                try:
                    item = notes.get_nowait()
                except queue.Empty:
                    break
            self._write(batch)
            if time.monotonic() >= self._prune_due and not stopping:
                self._prune_pass()

    def _retire(self, notes: queue.Queue[FailureNote | None]) -> bool:
        """Whether this idle writer may end: no note waits, and it is still the
        recorder's writer (checked under the lock `note` starts writers under)."""
        with self._lock:
            if notes is self._queue and notes.empty():
                self._thread = None
                return True
        return False

    def _until_prune(self) -> float:
        """How long an idle writer waits for a note: a pause when a pruning pass
        left more to delete; else until the next pass (at least half a second)."""
        if self._more:
            return PRUNE_PAUSE
        return max(self._prune_due - time.monotonic(), 0.5)

    def _write(self, batch: list[FailureNote]) -> None:
        if not batch:
            return
        try:
            _insert(self.engine, [note.row() for note in batch])
        except Exception:  # the records are lost; the requests they describe are not
            self.dropped += len(batch)
            log.warning("writing %d failed searches failed", len(batch), exc_info=True)

    def _prune_pass(self) -> None:
        """One batch of pruning (the next comes after the next batch of notes, or at
        once when no note waits): writers take turns with it."""
        self._prune_due = time.monotonic() + self.prune_every
        self._more = False
        try:
            if prune(self.engine, self.keep_days, self.keep_rows) == BATCH:
                self._more, self._prune_due = True, time.monotonic()
        except Exception:  # the next pass retries; nothing depends on it
            log.warning("pruning failed searches failed", exc_info=True)


@retrying
def _insert(engine: sa.Engine, rows: list[dict[str, Any]]) -> None:
    with transaction(engine, write=True) as conn:
        insert_at_commit(conn, t.failures, rows)


# ---------------------------------------------------------------- reading


@dataclasses.dataclass(frozen=True)
class FailureFilter:
    """What `GET /tally/v1/failures` asks for: newest first, `limit` records older
    than the record `marker` (the last of the page before)."""

    request_id: str | None = None  # the request's id or the caller's global one
    since: dt.datetime | None = None  # naive UTC, inclusive
    until: dt.datetime | None = None  # naive UTC, exclusive
    resource_class: str | None = None
    trait: str | None = None
    limit: int = 100
    marker: int | None = None


@dataclasses.dataclass(frozen=True)
class Record:
    """One failed search, as kept."""

    id: int
    created_at: dt.datetime
    request_id: str | None
    global_request_id: str | None
    user_id: str | None
    project_id: str | None
    microversion: str
    query: str
    reason: str | None
    verdict: dict[str, Any]


def mentions(query: str, resource_class: str | None = None, trait: str | None = None) -> bool:
    """Whether the query string `query` names `resource_class` and `trait` (each
    that is given). The rule, on the parameters as `parse_qsl` decodes them:

    - a class is named by a `resources` parameter, unsuffixed or of a granular group
      (`resources1`, `resources_GPU`), whose `CLASS:AMOUNT` items include it;
    - a trait is named by a `required` (any suffix) or `root_required` parameter
      whose items include it required (`T`), forbidden (`!T`) or in an any-of
      group (`in:T,U`).

    Names are compared exactly (they are upper case in every valid query)."""
    wanted_class = resource_class is None
    wanted_trait = trait is None
    for key, value in parse_qsl(query, keep_blank_values=True):
        if not wanted_class and key.startswith("resources"):
            names = {item.partition(":")[0].strip() for item in value.split(",")}
            wanted_class = resource_class in names
        elif not wanted_trait and (key.startswith("required") or key == "root_required"):
            items = value[3:] if value.startswith("in:") else value
            names = {item.strip().lstrip("!") for item in items.split(",")}
            wanted_trait = trait in names
    return wanted_class and wanted_trait


def entries(engine: sa.Engine, wanted: FailureFilter) -> list[Record]:
    """The records `wanted` asks for, newest first. A class or trait is first looked
    for in the query text by SQL (`LIKE`: names are unreserved characters, never
    percent-encoded by a client), then `mentions` decides, page by page."""
    f = t.failures
    limit = min(wanted.limit, MAX_LIMIT)
    query = sa.select(f).order_by(f.c.id.desc())
    if wanted.request_id is not None:
        query = query.where(
            sa.or_(f.c.request_id == wanted.request_id, f.c.global_request_id == wanted.request_id)
        )
    if wanted.since is not None:
        query = query.where(f.c.created_at >= wanted.since)
    if wanted.until is not None:
        query = query.where(f.c.created_at < wanted.until)
    for name in (wanted.resource_class, wanted.trait):
        if name is not None:
            query = query.where(f.c.query.contains(name, autoescape=True))
    exact = wanted.resource_class is not None or wanted.trait is not None
    found: list[Record] = []
    marker = wanted.marker
    while len(found) < limit:
        page = query if marker is None else query.where(f.c.id < marker)
        with transaction(engine) as conn:
            rows = conn.execute(page.limit(limit)).all()
        for row in rows:
            if not exact or mentions(row.query, wanted.resource_class, wanted.trait):
                found.append(_record(row))
                if len(found) == limit:
                    break
        if len(rows) < limit or not exact:
            break
        marker = rows[-1].id
    return found


def _record(row: sa.Row) -> Record:
    return Record(
        id=row.id,
        created_at=row.created_at,
        request_id=row.request_id,
        global_request_id=row.global_request_id,
        user_id=row.user_id,
        project_id=row.project_id,
        microversion=row.microversion,
        query=row.query,
        reason=row.reason,
        verdict=orjson.loads(row.verdict),
    )


# ---------------------------------------------------------------- retention


def prune(
    engine: sa.Engine,
    keep_days: int,
    keep_rows: int,
    batch: int = BATCH,
    now: dt.datetime | None = None,
) -> int:
    """One batch of pruning (`retention.prune_oldest`); the number deleted."""
    return retention.prune_oldest(engine, t.failures, keep_days, keep_rows, batch, now)
