"""What the compute handlers and ops get: the lab's dependencies and the caller."""

from __future__ import annotations

import dataclasses
import datetime as dt

import sqlalchemy as sa

from tally.compute import microversion
from tally.compute.report import ReportClient
from tally.config import Settings


@dataclasses.dataclass(frozen=True)
class Identity:
    user_id: str
    project_id: str
    roles: tuple[str, ...] = ()
    request_id: str = ""  # the compute API request's id: its instance actions' key

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


@dataclasses.dataclass
class Lab:
    """The lab compute's dependencies, passed to each resource by `create_app`."""

    engine: sa.Engine
    settings: Settings
    placement: ReportClient

    @property
    def max_version(self) -> microversion.Version:
        """The newest microversion this lab answers with (`lab_compute_max_version`)."""
        return microversion.cap(self.settings.lab_compute_max_version)

    def now(self) -> dt.datetime:
        """UTC, naive (as stored), to the second."""
        return dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)

    def next_step_at(self) -> dt.datetime | None:
        seconds = self.settings.lab_step_seconds
        return self.now() + dt.timedelta(seconds=seconds) if seconds > 0 else None


LAB_SYSTEM = Identity("nova", "service", ("admin", "service"))  # the lab acting on its own
