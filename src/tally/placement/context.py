"""What every handler gets: the service's dependencies and the request's identity."""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from tally.config import Settings
from tally.placement.ledger.candidates.index import Index
from tally.placement.ledger.failure_records import Recorder
from tally.placement.ledger.sandbox.store import Kept


def new_index(settings: Settings) -> Index | None:
    """An in-memory index of the database for one app (None when
    `candidates_index_max_mb = 0` turns it off); empty until its first search."""
    max_mb = settings.candidates_index_max_mb
    return Index(max_mb) if max_mb > 0 else None


@dataclasses.dataclass(frozen=True)
class Service:
    """Dependencies passed to each resource by `create_app`."""

    engine: sa.Engine
    settings: Settings
    candidates_index: Index | None = None  # built by `create_app` (or handed to it)
    # Where a search that found nothing is noted (None: the `failures` setting is off).
    failures: Recorder | None = None
    # The overlays of the what-if sandboxes this app served (ledger.sandbox).
    sandboxes: Kept = dataclasses.field(default_factory=Kept)

    def index(self) -> Index | None:
        """The app's in-memory index of the database, which candidates and
        provider listings read (None: `candidates_index_max_mb = 0` turned it off)."""
        return self.candidates_index


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who is asking, as the auth middleware found it."""

    user_id: str
    project_id: str | None
    roles: tuple[str, ...] = ()
    system_scope: str | None = None  # "all" for a system-scoped token
    domain_id: str | None = None  # set for a domain-scoped token

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles
