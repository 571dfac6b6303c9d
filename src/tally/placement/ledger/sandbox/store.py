"""Sandboxes in the database (`tally_sandboxes`): made, read, extended under a
compare-and-swap of their revision, deleted; and each worker's overlays of them,
kept per (sandbox, revision) so a read costs one primary-key lookup, with the
patches of the most recently read over the index."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import uuid as uuidlib
from collections import OrderedDict
from typing import Any

import orjson
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.retry import retrying
from tally.db.transaction import transaction
from tally.placement.error_types import ConcurrentUpdate, NotFound
from tally.placement.ledger.common import utcnow
from tally.placement.ledger.sandbox.overlay import Overlay
from tally.placement.ledger.sandbox.patch import Patch

KEPT = 64  # overlays kept per worker (the least recently read go first)
PATCHES_KEPT = 8  # patches kept per worker (each may keep a class's stock list whole)
ANSWERS_KEPT = 2  # of them, those that keep answers (answers.py)

_s = t.sandboxes


@dataclasses.dataclass(frozen=True)
class Row:
    id: str
    created_at: dt.datetime
    expires_at: dt.datetime
    revision: int
    steps: list[dict[str, Any]]


@retrying
def create(engine: sa.Engine, ttl_seconds: int) -> Row:
    """A new, empty sandbox (the expired ones are deleted on the way)."""
    now = utcnow()
    row = Row(str(uuidlib.uuid4()), now, now + dt.timedelta(seconds=ttl_seconds), 0, [])
    with transaction(engine, write=True) as conn:
        conn.execute(_s.delete().where(_s.c.expires_at < now))
        conn.execute(
            _s.insert().values(
                id=row.id,
                created_at=row.created_at,
                expires_at=row.expires_at,
                revision=0,
                steps="[]",
            )
        )
    return row


def load(conn: sa.Connection, sandbox: str, *, for_update: bool = False) -> Row:
    """The sandbox, or 404 when there is none (or it expired)."""
    query = sa.select(_s).where(_s.c.id == sandbox)
    if for_update and conn.dialect.name != "sqlite":
        query = query.with_for_update()
    found = conn.execute(query).first()
    if found is None or found.expires_at < utcnow():
        raise NotFound(f"No sandbox {sandbox} (it may have expired, or been committed).")
    return Row(
        found.id, found.created_at, found.expires_at, found.revision, orjson.loads(found.steps)
    )


def listing(engine: sa.Engine) -> list[Row]:
    """Every sandbox not expired, the newest first (made in one second: by id)."""
    query = (
        sa.select(_s).where(_s.c.expires_at >= utcnow()).order_by(_s.c.created_at.desc(), _s.c.id)
    )
    with transaction(engine) as conn:
        found = conn.execute(query).all()
    return [Row(r.id, r.created_at, r.expires_at, r.revision, orjson.loads(r.steps)) for r in found]


def read(engine: sa.Engine, sandbox: str) -> Row:
    with transaction(engine) as conn:
        return load(conn, sandbox)


_REVISION = sa.select(_s.c.revision, _s.c.expires_at).where(_s.c.id == sa.bindparam("id"))


def read_overlay(engine: sa.Engine, sandbox: str, kept: Kept) -> Overlay:
    """The sandbox's overlay: the one kept when it is of the stored revision (its
    steps not read again), else built from the stored steps; 404 as `load`."""
    with transaction(engine) as conn:
        found = conn.execute(_REVISION, {"id": sandbox}).first()
        if found is None or found.expires_at < utcnow():
            raise NotFound(f"No sandbox {sandbox} (it may have expired, or been committed).")
        overlay = kept.at(sandbox, found.revision)
        if overlay is None:
            overlay = kept.overlay(load(conn, sandbox))
        return overlay


@retrying
def save(engine: sa.Engine, sandbox: str, seen: int, steps: list[dict[str, Any]]) -> int:
    """Store the sandbox's steps if its revision is still `seen`; the new revision,
    or 409 when another request extended it meanwhile."""
    with transaction(engine, write=True) as conn:
        done = conn.execute(
            _s.update()
            .where(_s.c.id == sandbox, _s.c.revision == seen, _s.c.expires_at >= utcnow())
            .values(revision=seen + 1, steps=orjson.dumps(steps).decode())
        ).rowcount
    if done != 1:
        read(engine, sandbox)  # (404 when it went)
        raise ConcurrentUpdate(
            f"Sandbox {sandbox} was changed by another request meanwhile; read it and retry."
        )
    return seen + 1


@retrying
def delete(engine: sa.Engine, sandbox: str) -> None:
    with transaction(engine, write=True) as conn:
        load(conn, sandbox)
        conn.execute(_s.delete().where(_s.c.id == sandbox))


def delete_in(conn: sa.Connection, sandbox: str) -> None:
    conn.execute(_s.delete().where(_s.c.id == sandbox))


class Kept:
    """One worker's overlays of the sandboxes it served, by sandbox id, the most
    recently read last; and the patches over the index of the PATCHES_KEPT most
    recently read (with what they keep: patched stock lists, kept answers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._overlays: OrderedDict[str, Overlay] = OrderedDict()
        self._patches: OrderedDict[str, Patch] = OrderedDict()

    def overlay(self, row: Row) -> Overlay:
        """The overlay of the sandbox as read (built again when its revision moved)."""
        with self._lock:
            found = self._overlays.get(row.id)
            if found is None or found.revision != row.revision:
                found = Overlay(row.revision, row.steps).compact()
                self._keep(row.id, found, None)
            self._overlays.move_to_end(row.id)
            return found

    def at(self, sandbox: str, revision: int) -> Overlay | None:
        """The overlay kept of the sandbox when it is of `revision`."""
        with self._lock:
            found = self._overlays.get(sandbox)
            if found is None or found.revision != revision:
                return None
            self._overlays.move_to_end(sandbox)
            return found

    def keep(self, sandbox: str, overlay: Overlay, patch: Patch | None = None) -> None:
        """Keep `overlay` as the sandbox's, compacted (and `patch`, when it is of it)."""
        with self._lock:
            self._keep(sandbox, overlay.compact(), patch)  # (a patch behind it: not kept)

    def patch(self, sandbox: str) -> Patch | None:
        with self._lock:
            return self._patches.get(sandbox)

    def keep_patch(self, sandbox: str, patch: Patch | None) -> None:
        """Keep `patch` while its overlay is the one kept for the sandbox."""
        with self._lock:
            if patch is not None and self._overlays.get(sandbox) is patch.overlay:
                self._patches[sandbox] = patch
                self._patches.move_to_end(sandbox)
                while len(self._patches) > PATCHES_KEPT:
                    self._patches.popitem(last=False)
                for older in list(self._patches.values())[:-ANSWERS_KEPT]:
                    older.answers = None

    def _keep(self, sandbox: str, overlay: Overlay, patch: Patch | None) -> None:
        self._overlays[sandbox] = overlay
        self._patches.pop(sandbox, None)
        if patch is not None and patch.overlay is overlay and patch.folded == overlay.count:
            self._patches[sandbox] = patch
            while len(self._patches) > PATCHES_KEPT:
                self._patches.popitem(last=False)
        while len(self._overlays) > KEPT:
            gone, _ = self._overlays.popitem(last=False)
            self._patches.pop(gone, None)

    def forget(self, sandbox: str) -> None:
        with self._lock:
            self._overlays.pop(sandbox, None)
            self._patches.pop(sandbox, None)
