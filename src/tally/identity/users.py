"""Users, projects and roles of the lab identity, from the `lab_users` setting.

Each entry is `user:password:project:role+role`; entries are separated by commas.
Ids are the names (user `admin` has id `admin`, project `admin` id `admin`), so a
server booted with Placement's noauth token `admin` and one booted with a lab token
of user admin belong to the same project.
"""

from __future__ import annotations

import dataclasses

DOMAIN = {"id": "default", "name": "Default"}


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    password: str
    project: str
    roles: tuple[str, ...]

    @property
    def id(self) -> str:
        return self.name


def parse_users(text: str) -> dict[str, User]:
    """`lab_users` -> users by name; ValueError naming a malformed entry."""
    users: dict[str, User] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        parts = entry.split(":")
        if len(parts) != 4 or not all(parts[:3]):
            raise ValueError(f"lab_users entry {entry!r} is not user:password:project:role+role")
        name, password, project, roles = parts
        users[name] = User(name, password, project, tuple(r for r in roles.split("+") if r))
    if not users:
        raise ValueError("lab_users names no user")
    return users
