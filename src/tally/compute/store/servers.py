"""Servers. A deleted server keeps its row (`deleted`), as Nova's soft delete does,
so an admin can still list it with `deleted=true`."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from tally.compute.store import matching
from tally.db.compute_schema import compute_servers as t
from tally.db.transaction import transaction


def _row(row: sa.Row) -> dict[str, Any]:
    found = dict(row._mapping)
    found["flavor"] = json.loads(found["flavor"])
    found["fault"] = json.loads(found["fault"]) if found["fault"] else None
    return found


def _dump(values: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(values)
    if "flavor" in out:
        out["flavor"] = json.dumps(out["flavor"])
    if "fault" in out:
        out["fault"] = json.dumps(out["fault"]) if out["fault"] else None
    return out


def create(engine: sa.Engine, servers: Iterable[Mapping[str, Any]]) -> None:
    rows = [_dump(s) for s in servers]
    with transaction(engine, write=True) as conn:
        for start in range(0, len(rows), 500):
            conn.execute(t.insert(), rows[start : start + 500])


def get(engine: sa.Engine, uuid: str, *, deleted: bool = False) -> dict[str, Any] | None:
    query = sa.select(t).where(t.c.uuid == uuid)
    if not deleted:
        query = query.where(t.c.deleted.is_(False))
    with transaction(engine) as conn:
        row = conn.execute(query).first()
    return _row(row) if row else None


def listing(
    engine: sa.Engine,
    *,
    project_id: str | None = None,
    host: str | None = None,
    deleted: bool | None = False,
    uuids: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """Newest first. `project_id`/`host` None: any; `deleted` None: both."""
    query = matching(sa.select(t).order_by(t.c.id.desc()), t, project_id=project_id, host=host)
    if deleted is not None:
        query = query.where(t.c.deleted.is_(deleted))
    if uuids is not None:
        query = query.where(t.c.uuid.in_(list(uuids)))
    with transaction(engine) as conn:
        return [_row(r) for r in conn.execute(query)]


def count_on_host(engine: sa.Engine, host: str) -> int:
    query = sa.select(sa.func.count()).where(t.c.host == host, t.c.deleted.is_(False))
    with transaction(engine) as conn:
        return conn.execute(query).scalar_one()


def usage_by_host(engine: sa.Engine) -> dict[str, dict[str, int]]:
    """What Nova believes each host runs: servers and the sum of their flavors."""
    query = sa.select(t.c.host, t.c.flavor).where(t.c.deleted.is_(False), t.c.host.is_not(None))
    found: dict[str, dict[str, int]] = {}
    with transaction(engine) as conn:
        for host, flavor in conn.execute(query):
            flavor = json.loads(flavor)
            used = found.setdefault(host, {"servers": 0, "vcpus": 0, "memory_mb": 0, "disk_gb": 0})
            used["servers"] += 1
            used["vcpus"] += flavor["vcpus"]
            used["memory_mb"] += flavor["ram"]
            used["disk_gb"] += flavor["disk"] + flavor.get("ephemeral", 0)
    return found


def update(engine: sa.Engine, uuid: str, now: dt.datetime, **values: Any) -> dict[str, Any]:
    with transaction(engine, write=True) as conn:
        conn.execute(t.update().where(t.c.uuid == uuid).values(updated_at=now, **_dump(values)))
        return _row(conn.execute(sa.select(t).where(t.c.uuid == uuid)).one())


def soft_delete(engine: sa.Engine, uuid: str, now: dt.datetime) -> None:
    with transaction(engine, write=True) as conn:
        conn.execute(
            t.update()
            .where(t.c.uuid == uuid)
            .values(
                deleted=True, vm_state="deleted", task_state=None, deleted_at=now, updated_at=now
            )
        )
