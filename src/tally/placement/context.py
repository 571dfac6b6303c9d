"""What every handler gets: the service's dependencies and the request's identity."""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from tally.config import Settings


@dataclasses.dataclass(frozen=True)
class Service:
    """Dependencies passed to each resource by `create_app`."""

    engine: sa.Engine
    settings: Settings


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
